"""One renewal thread per Client for every lease held through it.

The thread wakes at the earliest renewal or cancel point of its holds. When
one is due it renews that hold and every other hold at least half way to its
own renewal point in one ``POST /v1/leases/renew-batch`` (one database
transaction): renewing early only restarts a window at the batch's send, so
authority never outlasts what the service granted, and after one batch the
holds stay in step: one call per period however many leases are held.

Each item's answer is judged by its hold (HeldLease._judge) exactly as a
renewal of its own. A failure of the whole call that may pass (backend
unavailable, outcome unknown, rate limited, deadline) is each item's
temporary failure; a refusal of the whole call (an item out of scope or
malformed) tells nothing about each lease, so those holds are renewed one by
one at once; a leased without the route (400 naming "method", or 404) one by
one from then on. A
lone due renewal is a plain ``/v1/leases/renew``.
"""
import logging
import threading
import time
from typing import Dict, List, Optional, Protocol, Tuple, Union

from .calls import Calls
from .errors import (BackendUnavailable, DeadlineExceeded, LeaseError, OutcomeUnknown,
                     RateLimited)
from .schedule import Window
from .types import LeaseRecord

log = logging.getLogger("leaseclient")

_TRANSIENT = (BackendUnavailable, OutcomeUnknown, RateLimited, DeadlineExceeded)
BATCH_MAX = 100


class Member(Protocol):
    """What the group needs of a held lease (hold.HeldLease): this file sits
    below hold.py and never imports it."""

    client: Calls
    _service_instance_id: str
    _ttl_ms: Optional[int]

    def _standing(self, now: float) -> Tuple[str, float]: ...

    def _cancel_point(self) -> None: ...

    def _renew_once(self) -> None: ...

    def _prepare(self) -> Tuple[LeaseRecord, Window, float]: ...

    def _judge(self, held: LeaseRecord, window: Window, started: float,
               outcome: Union[LeaseRecord, LeaseError], first_sent: float,
               answered: float) -> None: ...


def group_of(client: Calls) -> "RenewalGroup":
    """The renewal group of the leases held through client, made (with no
    thread yet) on first use and kept in the client's slot for it."""
    with client._group_lock:
        if client._group is None:
            client._group = RenewalGroup(client)
        group = client._group
    assert isinstance(group, RenewalGroup)
    return group


class RenewalGroup:
    """The holds of one Client and the thread that renews them (started
    when the first hold joins, ended when the last one leaves)."""

    def __init__(self, client: Calls) -> None:
        self._client = client
        self._cond = threading.Condition()
        self._members: List[Member] = []
        self._thread: Optional[threading.Thread] = None
        self._one_by_one = False  # the service has no renew-batch route
        self.batches = 0  # renew-batch calls made (for tests and diagnostics)

    def join(self, held: Member) -> None:
        with self._cond:
            self._members.append(held)
            if self._thread is None:
                self._thread = threading.Thread(target=self._main, daemon=True,
                                                name="lease-renewals")
                self._thread.start()
            self._cond.notify_all()

    def leave(self, held: Member) -> None:
        """Takes a hold out. A renewal of it in flight is judged by a hold
        that has stopped, which ignores it."""
        with self._cond:
            if held in self._members:
                self._members.remove(held)
            self._cond.notify_all()

    def _main(self) -> None:
        with self._cond:
            while True:
                if not self._members:
                    self._thread = None
                    return
                now = time.monotonic()
                over: List[Member] = []
                due: List[Member] = []
                gather: List[Member] = []
                nxt = float("inf")
                for m in self._members:
                    kind, at = m._standing(now)
                    lists: Dict[str, List[Member]] = {"over": over, "due": due,
                                                      "gatherable": gather}
                    lists.get(kind, []).append(m)
                    nxt = min(nxt, at)
                if not over and not due:
                    self._cond.wait(None if nxt == float("inf") else max(nxt - now, 0.0))
                    continue
                batch = (due + gather)[:BATCH_MAX]
                one_by_one = self._one_by_one
                self._cond.release()
                try:
                    for m in over:
                        m._cancel_point()
                    if len(batch) == 1 or one_by_one:
                        for m in batch:
                            m._renew_once()
                    elif batch:
                        self._renew_batch(batch)
                except Exception:  # the thread must outlive any one failure
                    log.exception("lease renewals: a round failed")
                    time.sleep(0.01)
                finally:
                    self._cond.acquire()

    def _renew_batch(self, members: List[Member]) -> None:
        prepared = [m._prepare() for m in members]
        started = min(p[2] for p in prepared)
        cancel = min(p[1].cancel for p in prepared)
        budget_ms = max(int((cancel - started) * 1000), 1)
        items = [m.client._owner_item(p[0], m._service_instance_id, m._ttl_ms)
                 for m, p in zip(members, prepared)]
        try:
            results, answer = self._client._owner_batch(True, items, None, budget_ms, None)
        except _TRANSIENT as e:
            answered = time.monotonic()
            for m, (held, window, began) in zip(members, prepared):
                m._judge(held, window, began, e, began, answered)
            return
        except LeaseError as e:
            # an older leased: /v1/leases/{id} takes GET only (400, field
            # "method"); a proxy may answer 404
            if e.http_status == 404 or getattr(e, "field", None) == "method":
                with self._cond:
                    self._one_by_one = True
                log.info("leased has no renew-batch route: renewing one by one")
            for m in members:
                m._renew_once()
            return
        with self._cond:
            self.batches += 1
        for m, (held, window, began), outcome in zip(members, prepared, results):
            m._judge(held, window, began, outcome, answer.first_sent, answer.answered)
