"""Client: the calls (calls.py, one method per route of leased) and, on top
of them, holding a lease (hold.py, aio.py, renewals.py). This is the top
layer: it imports those, none of them imports it (tests/test_module_graph.py)."""
from typing import Any, Optional

from .aio import AsyncHold
from .calls import (ACQUIRE_DEADLINE_CAP_MS, BATCH_MAX, DEFAULT_DEADLINE_MS,
                    DEFAULT_WATCH_WAIT_MS, Calls, LeaseLike, default_service_instance_id,
                    new_id, new_trace_id)
from .errors import LeaseError
from .hold import Hold
from .renewals import RenewalGroup, group_of
from .types import Identity, IdentityLike


class Client(Calls):
    """A client of one leased service: every call of docs/api.md (Calls) and
    ``hold``/``hold_async``, a lease held by a background renewer. Safe to
    share between threads: every call opens its own connection, and the
    token is only ever sent in the Authorization header.

    Every call has a deadline (``deadline_ms``, default 5 s; an acquire's
    default is 5 s plus its wait, at most 30 s) that bounds all its attempts
    and is sent to the service as ``deadline_ms``; or ``deadline_at``, an
    absolute time sent as is (a deadline already past gets the service's
    ``DeadlineExceeded``). A mutation whose answer is lost after it was sent is
    repeated with the same request id until a typed answer comes; if none
    comes before the deadline it raises :class:`OutcomeUnknown` carrying the
    ``request_id``: calling again with ``request_id=`` that id resolves it.
    """

    def hold(self, identity: IdentityLike, *, ttl_ms: Optional[int] = None, wait_ms: int = 0,
             **kw: Any) -> Hold:
        """``with client.hold(identity, ttl_ms=..., wait_ms=...) as lease:`` acquires,
        keeps alive on the schedule of docs/executor.md (by default in this
        client's one session: one keep-alive per period for all its holds;
        ``per_lease_renewal=True`` renews this one on its own), watches for
        loss and releases on exit (leaseclient.hold.Hold has the options)."""
        return Hold(self, Identity.of(identity), ttl_ms=ttl_ms, wait_ms=wait_ms, **kw)

    def hold_async(self, identity: IdentityLike, *, ttl_ms: Optional[int] = None,
                   wait_ms: int = 0, **kw: Any) -> AsyncHold:
        """``async with client.hold_async(...) as lease:``: the same hold; the
        body's task is cancelled when the lease is lost (LeaseLost at exit)."""
        return AsyncHold(self, Identity.of(identity), ttl_ms=ttl_ms, wait_ms=wait_ms, **kw)

    def _renewal_group(self) -> RenewalGroup:
        """The one thread that renews every lease held through this client."""
        return group_of(self)


__all__ = ["ACQUIRE_DEADLINE_CAP_MS", "BATCH_MAX", "Client", "DEFAULT_DEADLINE_MS",
           "DEFAULT_WATCH_WAIT_MS", "LeaseError", "LeaseLike", "default_service_instance_id",
           "new_id", "new_trace_id"]
