"""Calls: one method per route of leased (docs/api.md), the layer below
holding a lease. client.py's Client adds hold() and hold_async() on top
(hold.py, aio.py, renewals.py); nothing here imports those."""
import datetime
import hashlib
import json
import os
import secrets
import socket
import ssl
import threading
import time
import urllib.parse
from typing import (Any, Dict, Iterator, List, Mapping, Optional, Protocol, Sequence, Tuple,
                    Union)

from .errors import (ERRORS_BY_CODE, SUCCESS_CODES, InvalidLeaseRequest, LeaseError,
                     OutcomeUnknown, error_from_envelope)
from .transport import Abort, Answer, Transport
from .types import CommitResult, Identity, IdentityLike, LeaseRecord, Page, SessionRecord

BATCH_MAX = 100  # renew-batch and release-batch take 1 to 100 items

DEFAULT_DEADLINE_MS = 5000
ACQUIRE_DEADLINE_CAP_MS = 30000
DEFAULT_WATCH_WAIT_MS = 30000
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"


def new_id(prefix: str) -> str:
    """prefix + 26 random base32 characters (request, execution and job ids)."""
    return prefix + "".join(secrets.choice(_BASE32) for _ in range(26))


def new_trace_id() -> str:
    return secrets.token_hex(16)


def default_service_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"[:128]


class HasLeaseRecord(Protocol):
    """What a HeldLease (hold.py) offers the calls: its latest confirmed record."""

    @property
    def lease(self) -> LeaseRecord: ...


# What calls on a held lease take: a LeaseRecord (from acquire, inspect,
# list) or the HeldLease of a hold (its latest confirmed record is used).
LeaseLike = Union[LeaseRecord, HasLeaseRecord]


def _lease_of(lease: LeaseLike) -> LeaseRecord:
    if isinstance(lease, LeaseRecord):
        return lease
    held = getattr(lease, "lease", None)
    if isinstance(held, LeaseRecord):
        return held
    raise TypeError("a LeaseRecord or a HeldLease is needed")


def _rfc3339(dt: datetime.datetime) -> str:
    if dt.tzinfo is None:
        raise ValueError("deadline_at must be timezone-aware")
    utc = dt.astimezone(datetime.timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


class Calls:
    """The calls of a client of one leased service (client.Client adds
    holding on top). Safe to share between threads: every call opens its own
    connection, and the token is only ever sent in the
    Authorization header.

    Every call has a deadline (``deadline_ms``, default 5 s; an acquire's
    default is 5 s plus its wait, at most 30 s) that bounds all its attempts
    and is sent to the service as ``deadline_ms``; or ``deadline_at``, an
    absolute time sent as is (a deadline already past gets the service's
    ``DeadlineExceeded``). A mutation whose answer is lost after it was sent is
    repeated with the same request id until a typed answer comes; if none
    comes before the deadline it raises :class:`OutcomeUnknown` carrying the
    ``request_id``: calling again with ``request_id=`` that id resolves it.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 ca_file: Optional[str] = None, ssl_context: Optional[ssl.SSLContext] = None,
                 service_instance_id: Optional[str] = None) -> None:
        url = url or os.environ.get("LEASE_URL") or "http://127.0.0.1:8080"
        token = token if token is not None else os.environ.get("LEASE_TOKEN")
        ca_file = ca_file or os.environ.get("LEASE_CA_FILE") or None
        self._transport = Transport(url, token, ca_file=ca_file, ssl_context=ssl_context)
        self.url = self._transport.url
        self.service_instance_id = service_instance_id or default_service_instance_id()
        # what the layer above keeps per client: the renewal group of the
        # leases held through it (renewals.group_of), made on first use
        self._group_lock = threading.Lock()
        self._group: Optional[object] = None

    def __repr__(self) -> str:  # never shows the token
        return f"Client({self.url!r})"

    # ------------------------------------------------------------------
    # the exchange

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]], *, mutation: bool,
              request_id: Optional[str], deadline_ms: Optional[int],
              deadline_at: Optional[datetime.datetime], default_deadline_ms: int = DEFAULT_DEADLINE_MS,
              abort: Optional[Abort] = None, batch: bool = False,
              by_value: bool = False) -> Answer:
        """One route's exchange. ``by_value``: a write idempotent by value (a
        session's keep-alive): resent like a mutation when its answer is
        lost, but without a request id (the route takes none)."""
        if deadline_ms is not None and deadline_at is not None:
            raise InvalidLeaseRequest("deadline_ms and deadline_at exclude each other",
                                      field="deadline_ms")
        if deadline_ms is not None and (isinstance(deadline_ms, bool) or
                                        not isinstance(deadline_ms, int) or deadline_ms < 1):
            raise InvalidLeaseRequest("deadline_ms must be an integer >= 1", field="deadline_ms")
        if mutation and not batch and not by_value:  # a batch's items carry their own ids
            request_id = request_id or new_id("req_")
            if not (1 <= len(request_id) <= 128):
                raise InvalidLeaseRequest("request_id must have 1..128 characters",
                                          field="request_id")
        start = time.monotonic()
        if deadline_at is not None:
            left_s = (deadline_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
            deadline = start + max(left_s, 0.0)
        else:
            deadline = start + (deadline_ms or default_deadline_ms) / 1000.0
        data: Optional[bytes] = None
        if body is not None:
            body = dict(body)
            if mutation and not batch and not by_value:
                body["request_id"] = request_id
            if deadline_at is not None:
                body["deadline_at"] = _rfc3339(deadline_at)
            else:
                body["deadline_ms"] = deadline_ms or default_deadline_ms
            try:
                data = json.dumps(body, separators=(",", ":"), ensure_ascii=False,
                                  allow_nan=False).encode("utf-8")
            except (TypeError, ValueError) as e:
                raise InvalidLeaseRequest(f"body cannot be sent as JSON: {e}", field="body") from e
        return self._transport.exchange(method, path, data, mutation=mutation, deadline=deadline,
                                        request_id=request_id if mutation else None, abort=abort)

    @staticmethod
    def _lease(answer: Answer, mutation: bool) -> LeaseRecord:
        obj = answer.envelope.get("lease")
        try:
            return LeaseRecord.from_json(obj, answer.envelope,  # type: ignore[arg-type]
                                         answer.request_id)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            # "success" without a readable lease tells nothing we can use
            from .errors import BackendUnavailable, OutcomeUnknown
            cls = OutcomeUnknown if mutation else BackendUnavailable
            raise cls(f"unreadable lease in a success answer: {e}",
                      request_id=answer.request_id) from e

    # ------------------------------------------------------------------
    # the holder's routes

    def acquire(self, identity: IdentityLike, *, ttl_ms: Optional[int] = None,
                wait_ms: int = 0, maximum_lifetime_ms: Optional[int] = None,
                service_instance_id: Optional[str] = None, execution_id: Optional[str] = None,
                job_id: Optional[str] = None, trace_id: Optional[str] = None,
                metadata: Optional[Mapping[str, Any]] = None, request_id: Optional[str] = None,
                deadline_ms: Optional[int] = None,
                deadline_at: Optional[datetime.datetime] = None,
                session_id: Optional[str] = None) -> LeaseRecord:
        """Acquires the lease of ``identity``; with ``wait_ms`` the service retries a
        conflict up to that long. Raises LeaseConflict when it stays held.
        ``session_id``: acquired in that session (session_open), which keeps
        it alive; LeaseLost when the session is not open and this caller's."""
        return self._acquire(identity, ttl_ms=ttl_ms, wait_ms=wait_ms,
                             maximum_lifetime_ms=maximum_lifetime_ms,
                             service_instance_id=service_instance_id, execution_id=execution_id,
                             job_id=job_id, trace_id=trace_id, metadata=metadata,
                             request_id=request_id, deadline_ms=deadline_ms,
                             deadline_at=deadline_at, session_id=session_id)[0]

    def _acquire(self, identity: IdentityLike, *, ttl_ms: Optional[int], wait_ms: int,
                 maximum_lifetime_ms: Optional[int], service_instance_id: Optional[str],
                 execution_id: Optional[str], job_id: Optional[str], trace_id: Optional[str],
                 metadata: Optional[Mapping[str, Any]], request_id: Optional[str],
                 deadline_ms: Optional[int], deadline_at: Optional[datetime.datetime],
                 session_id: Optional[str] = None) -> "tuple[LeaseRecord, Answer]":
        request_id = request_id or new_id("req_")
        # defaults derived from the request id, so that repeating it (to
        # resolve an unknown outcome) sends the same inputs
        derived = hashlib.sha256(request_id.encode("utf-8")).hexdigest()
        body: Dict[str, Any] = {
            "lock_identity": Identity.of(identity).to_json(),
            "service_instance_id": service_instance_id or self.service_instance_id,
            "execution_id": execution_id or "exec_" + derived[:26],
            "job_id": job_id or "job_" + derived[26:52],
        }
        if trace_id:
            body["trace_id"] = trace_id
        if ttl_ms is not None:
            body["ttl_ms"] = ttl_ms
        if maximum_lifetime_ms is not None:
            body["maximum_lifetime_ms"] = maximum_lifetime_ms
        if wait_ms:
            body["wait_ms"] = wait_ms
        if metadata is not None:
            body["metadata"] = dict(metadata)
        if session_id is not None:
            body["session_id"] = session_id
        default = min(DEFAULT_DEADLINE_MS + max(wait_ms, 0), ACQUIRE_DEADLINE_CAP_MS)
        answer = self._call("POST", "/v1/leases/acquire", body, mutation=True,
                            request_id=request_id, deadline_ms=deadline_ms,
                            deadline_at=deadline_at, default_deadline_ms=default)
        return self._lease(answer, True), answer

    def renew(self, lease: LeaseLike, *, ttl_ms: Optional[int] = None,
              service_instance_id: Optional[str] = None, request_id: Optional[str] = None,
              deadline_ms: Optional[int] = None,
              deadline_at: Optional[datetime.datetime] = None) -> LeaseRecord:
        """Extends a held lease; LeaseLost when it is no longer this holder's."""
        return self._renew(lease, ttl_ms=ttl_ms, service_instance_id=service_instance_id,
                           request_id=request_id, deadline_ms=deadline_ms,
                           deadline_at=deadline_at)[0]

    def _renew(self, lease: LeaseLike, *, ttl_ms: Optional[int] = None,
               service_instance_id: Optional[str] = None, request_id: Optional[str] = None,
               deadline_ms: Optional[int] = None,
               deadline_at: Optional[datetime.datetime] = None,
               abort: Optional[Abort] = None) -> "tuple[LeaseRecord, Answer]":
        lease = _lease_of(lease)
        body = self._held_body(lease)
        body["service_instance_id"] = (service_instance_id or lease.service_instance_id
                                       or self.service_instance_id)
        if ttl_ms is not None:
            body["ttl_ms"] = ttl_ms
        answer = self._call("POST", "/v1/leases/renew", body, mutation=True,
                            request_id=request_id, deadline_ms=deadline_ms,
                            deadline_at=deadline_at, abort=abort)
        return self._lease(answer, True), answer

    def release(self, lease: LeaseLike, *, service_instance_id: Optional[str] = None,
                request_id: Optional[str] = None, deadline_ms: Optional[int] = None,
                deadline_at: Optional[datetime.datetime] = None) -> LeaseRecord:
        """Ends a held lease (state ``released``)."""
        lease = _lease_of(lease)
        body = self._held_body(lease)
        body["service_instance_id"] = (service_instance_id or lease.service_instance_id
                                       or self.service_instance_id)
        answer = self._call("POST", "/v1/leases/release", body, mutation=True,
                            request_id=request_id, deadline_ms=deadline_ms,
                            deadline_at=deadline_at)
        return self._lease(answer, True)

    def renew_many(self, leases: Sequence[LeaseLike], *, ttl_ms: Optional[int] = None,
                   service_instance_id: Optional[str] = None,
                   request_ids: Optional[Sequence[str]] = None,
                   deadline_ms: Optional[int] = None,
                   deadline_at: Optional[datetime.datetime] = None
                   ) -> List[Union[LeaseRecord, LeaseError]]:
        """``POST /v1/leases/renew-batch``: 1 to 100 renewals in one request and
        one transaction. Returns one result per lease, in order: the renewed
        LeaseRecord, or the LeaseError its own renew() would have raised (one
        ``LeaseLost`` does not fail the others). Raises only for the whole
        call (deadline, backend, a malformed or out-of-scope item); sending
        the same ``request_ids`` again then is safe (OutcomeUnknown carries
        them as ``.request_ids``)."""
        items = [self._owner_item(lease, service_instance_id, ttl_ms) for lease in leases]
        return self._owner_batch(True, items, request_ids, deadline_ms, deadline_at)[0]

    def release_many(self, leases: Sequence[LeaseLike], *,
                     service_instance_id: Optional[str] = None,
                     request_ids: Optional[Sequence[str]] = None,
                     deadline_ms: Optional[int] = None,
                     deadline_at: Optional[datetime.datetime] = None
                     ) -> List[Union[LeaseRecord, LeaseError]]:
        """``POST /v1/leases/release-batch``: 1 to 100 releases in one
        transaction, answered as renew_many answers (the released
        LeaseRecord, or the LeaseError its own release() would have raised)."""
        items = [self._owner_item(lease, service_instance_id, None) for lease in leases]
        return self._owner_batch(False, items, request_ids, deadline_ms, deadline_at)[0]

    def _owner_item(self, lease: LeaseLike, service_instance_id: Optional[str],
                    ttl_ms: Optional[int]) -> Dict[str, Any]:
        lease = _lease_of(lease)
        body = self._held_body(lease)
        body["service_instance_id"] = (service_instance_id or lease.service_instance_id
                                       or self.service_instance_id)
        if ttl_ms is not None:
            body["ttl_ms"] = ttl_ms
        return body

    def _owner_batch(self, renew: bool, items: Sequence[Dict[str, Any]],
                     request_ids: Optional[Sequence[str]], deadline_ms: Optional[int],
                     deadline_at: Optional[datetime.datetime], abort: Optional[Abort] = None
                     ) -> "Tuple[List[Union[LeaseRecord, LeaseError]], Answer]":
        key = "renewals" if renew else "releases"
        if not 1 <= len(items) <= BATCH_MAX:
            raise InvalidLeaseRequest(f"{key} must be 1 to {BATCH_MAX} items", field=key)
        if request_ids is not None and len(request_ids) != len(items):
            raise InvalidLeaseRequest("one request id per item", field=key)
        ids = [(request_ids[i] if request_ids and request_ids[i] else new_id("req_"))
               for i in range(len(items))]
        body = {key: [dict(item, request_id=rid) for item, rid in zip(items, ids)]}
        path = "/v1/leases/renew-batch" if renew else "/v1/leases/release-batch"
        try:
            answer = self._call("POST", path, body, mutation=True, request_id=None,
                                deadline_ms=deadline_ms, deadline_at=deadline_at, abort=abort,
                                batch=True)
        except LeaseError as e:
            e.request_ids = ids  # type: ignore[attr-defined]
            raise
        results = answer.envelope.get("results")
        if not isinstance(results, list) or len(results) != len(items):
            raise OutcomeUnknown("a decided batch without one result per item",
                                 request_id=None)
        out: List[Union[LeaseRecord, LeaseError]] = []
        for env, rid in zip(results, ids):
            out.append(self._item_result(env, rid, answer))
        return out, answer

    @staticmethod
    def _item_result(env: Any, request_id: str, answer: Answer) -> Union[LeaseRecord, LeaseError]:
        """One item of a batch: what its own call would have answered."""
        code = env.get("code") if isinstance(env, dict) else None
        if code in SUCCESS_CODES and env.get("status") == "success":
            try:
                return LeaseRecord.from_json(env["lease"], env, request_id)
            except (KeyError, TypeError, ValueError, AttributeError):
                pass
        elif code in ERRORS_BY_CODE and env.get("status") == "error":
            return error_from_envelope(env, answer.status, request_id)
        return OutcomeUnknown("unreadable item of a batch answer", request_id=request_id)

    def commit(self, lease: LeaseLike, writes: Sequence[Mapping[str, Any]], *,
               execution_id: Optional[str] = None, trace_id: Optional[str] = None,
               request_id: Optional[str] = None, deadline_ms: Optional[int] = None,
               deadline_at: Optional[datetime.datetime] = None) -> CommitResult:
        """A fenced commit: accepted only while exactly this lease (id and
        fencing token) is active. ``writes`` from document() and publication()."""
        lease = _lease_of(lease)
        body = self._held_body(lease)
        request_id = request_id or new_id("req_")
        # defaults derived from the request id, so that repeating it (to
        # resolve an unknown outcome) sends the same inputs
        derived = hashlib.sha256(request_id.encode("utf-8")).hexdigest()
        body["execution_id"] = execution_id or lease.execution_id or "exec_" + derived[:26]
        body["trace_id"] = trace_id or lease.trace_id or derived[:32]
        body["writes"] = [dict(w) for w in writes]
        answer = self._call("POST", "/v1/commits", body, mutation=True, request_id=request_id,
                            deadline_ms=deadline_ms, deadline_at=deadline_at)
        c = answer.envelope.get("commit")
        if (not isinstance(c, dict) or not isinstance(c.get("results"), list)
                or not isinstance(c.get("lease_id", ""), str)
                or not isinstance(c.get("fencing_token", 0), int)
                or isinstance(c.get("fencing_token"), bool)):
            from .errors import OutcomeUnknown
            raise OutcomeUnknown("unreadable commit in a success answer",
                                 request_id=answer.request_id)
        return CommitResult(lease_id=c.get("lease_id", lease.lease_id),
                            fencing_token=int(c.get("fencing_token", lease.fencing_token)),
                            results=c["results"], replayed=bool(answer.envelope.get("replayed")),
                            request_id=answer.request_id,
                            correlation_id=answer.envelope.get("correlation_id")
                            if isinstance(answer.envelope.get("correlation_id"), str) else None)

    # ------------------------------------------------------------------
    # sessions (docs/api.md, "Sessions"; PostgreSQL backend only: another
    # answers InvalidLeaseRequest with field "session_id")

    def session_open(self, *, ttl_ms: Optional[int] = None,
                     service_instance_id: Optional[str] = None,
                     request_id: Optional[str] = None, deadline_ms: Optional[int] = None,
                     deadline_at: Optional[datetime.datetime] = None) -> SessionRecord:
        """``POST /v1/sessions``: opens a session of this credential (TTL
        ``ttl_ms``, or the service's default). Acquire with its ``session_id``
        and one ``session_keepalive`` keeps every lease in it alive."""
        return self._session_open(ttl_ms=ttl_ms, service_instance_id=service_instance_id,
                                  request_id=request_id, deadline_ms=deadline_ms,
                                  deadline_at=deadline_at)[0]

    def _session_open(self, *, ttl_ms: Optional[int], service_instance_id: Optional[str],
                      request_id: Optional[str], deadline_ms: Optional[int],
                      deadline_at: Optional[datetime.datetime]
                      ) -> "tuple[SessionRecord, Answer]":
        body: Dict[str, Any] = {
            "service_instance_id": service_instance_id or self.service_instance_id}
        if ttl_ms is not None:
            body["ttl_ms"] = ttl_ms
        answer = self._call("POST", "/v1/sessions", body, mutation=True, request_id=request_id,
                            deadline_ms=deadline_ms, deadline_at=deadline_at)
        return self._session(answer), answer

    def session_keepalive(self, session_id: str, *, deadline_ms: Optional[int] = None,
                          deadline_at: Optional[datetime.datetime] = None) -> SessionRecord:
        """``POST /v1/sessions/{session_id}/keepalive``: extends the session,
        and so every lease in it, to the service's now plus its TTL.
        LeaseLost when it is closed, expired, unknown or another's. It takes
        no request id (repeating it extends again): a lost answer is resent
        until the deadline, then OutcomeUnknown."""
        return self._session_keepalive(session_id, deadline_ms=deadline_ms,
                                       deadline_at=deadline_at)[0]

    def _session_keepalive(self, session_id: str, *, deadline_ms: Optional[int],
                           deadline_at: Optional[datetime.datetime] = None,
                           abort: Optional[Abort] = None) -> "tuple[SessionRecord, Answer]":
        answer = self._call("POST", _session_path(session_id, "keepalive"), {}, mutation=True,
                            request_id=None, deadline_ms=deadline_ms, deadline_at=deadline_at,
                            abort=abort, by_value=True)
        return self._session(answer), answer

    def session_close(self, session_id: str, *, request_id: Optional[str] = None,
                      deadline_ms: Optional[int] = None,
                      deadline_at: Optional[datetime.datetime] = None) -> SessionRecord:
        """``POST /v1/sessions/{session_id}/close``: ends the session and every
        lease in it (``leases_ended`` of them now, ``more`` when the sweeper
        ends the rest). Idempotent by request id."""
        answer = self._call("POST", _session_path(session_id, "close"), {}, mutation=True,
                            request_id=request_id, deadline_ms=deadline_ms,
                            deadline_at=deadline_at)
        return self._session(answer)

    @staticmethod
    def _session(answer: Answer) -> SessionRecord:
        try:
            return SessionRecord.from_json(answer.envelope.get("session"), answer.envelope,
                                           answer.request_id)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            # "success" without a readable session: it may have happened
            raise OutcomeUnknown(f"unreadable session in a success answer: {e}",
                                 request_id=answer.request_id) from e

    # ------------------------------------------------------------------
    # administrators

    def force_release(self, lease: LeaseLike, *, reason: str, request_id: Optional[str] = None,
                      deadline_ms: Optional[int] = None,
                      deadline_at: Optional[datetime.datetime] = None) -> LeaseRecord:
        """Ends someone's lease (administrator credential, targets:force-release)."""
        lease = _lease_of(lease)
        body = self._held_body(lease)
        body["reason"] = reason
        answer = self._call("POST", "/v1/leases/force-release", body, mutation=True,
                            request_id=request_id, deadline_ms=deadline_ms,
                            deadline_at=deadline_at)
        return self._lease(answer, True)

    def revoke(self, lease: LeaseLike, *, reason: str, incident_id: Optional[str] = None,
               request_id: Optional[str] = None, deadline_ms: Optional[int] = None,
               deadline_at: Optional[datetime.datetime] = None) -> LeaseRecord:
        """Revokes a lease (administrator credential, targets:revoke)."""
        lease = _lease_of(lease)
        body = self._held_body(lease)
        body["reason"] = reason
        if incident_id is not None:
            body["incident_id"] = incident_id
        answer = self._call("POST", "/v1/leases/revoke", body, mutation=True,
                            request_id=request_id, deadline_ms=deadline_ms,
                            deadline_at=deadline_at)
        return self._lease(answer, True)

    # ------------------------------------------------------------------
    # reads

    def inspect(self, lease_id: str, *, deadline_ms: Optional[int] = None) -> LeaseRecord:
        """``GET /v1/leases/{lease_id}``: the lease, active or ended."""
        answer = self._call("GET", _lease_path(lease_id), None, mutation=False, request_id=None,
                            deadline_ms=deadline_ms, deadline_at=None)
        return self._lease(answer, False)

    def inspect_identity(self, identity: IdentityLike, *, deadline_ms: Optional[int] = None,
                         deadline_at: Optional[datetime.datetime] = None) -> LeaseRecord:
        """The active lease of an identity (LeaseNotFound when there is none)."""
        answer = self._call("POST", "/v1/leases/inspect",
                            {"lock_identity": Identity.of(identity).to_json()}, mutation=False,
                            request_id=None, deadline_ms=deadline_ms, deadline_at=deadline_at)
        return self._lease(answer, False)

    def watch(self, lease_id: str, *, wait_ms: int = DEFAULT_WATCH_WAIT_MS,
              deadline_ms: Optional[int] = None, abort: Optional[Abort] = None) -> LeaseRecord:
        """Long poll: answers as soon as the lease is no longer active, else
        (state still ``active``) once ``wait_ms`` passed."""
        path = _lease_path(lease_id) + "/watch?wait_ms=" + str(int(wait_ms))
        answer = self._call("GET", path, None, mutation=False, request_id=None,
                            deadline_ms=deadline_ms or int(wait_ms) + DEFAULT_DEADLINE_MS,
                            deadline_at=None, abort=abort)
        return self._lease(answer, False)

    def list(self, by: str = "program", *, tenant_id: Optional[str] = None,
             program_id: Optional[str] = None, target_namespace: Optional[str] = None,
             target_id: Optional[str] = None, page_size: Optional[int] = None,
             page_token: Optional[str] = None, deadline_ms: Optional[int] = None,
             deadline_at: Optional[datetime.datetime] = None) -> Page:
        """One page of leases ``by`` owner, program or target."""
        body: Dict[str, Any] = {"by": by}
        for k, v in (("tenant_id", tenant_id), ("program_id", program_id),
                     ("target_namespace", target_namespace), ("target_id", target_id),
                     ("page_size", page_size), ("page_token", page_token)):
            if v is not None:
                body[k] = v
        answer = self._call("POST", "/v1/leases/list", body, mutation=False, request_id=None,
                            deadline_ms=deadline_ms, deadline_at=deadline_at)
        raw: List[Any] = answer.envelope.get("leases") or []
        try:
            leases = [LeaseRecord.from_json(x) for x in raw]
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            from .errors import BackendUnavailable
            raise BackendUnavailable(f"unreadable list answer: {e}") from e
        return Page(leases, answer.envelope.get("next_page_token"))

    def list_all(self, by: str = "program", **filters: Any) -> Iterator[LeaseRecord]:
        """Every lease of a list, page after page."""
        token: Optional[str] = None
        while True:
            page = self.list(by, page_token=token, **filters)
            yield from page.leases
            token = page.next_page_token
            if not token:
                return

    @staticmethod
    def _held_body(lease: LeaseRecord) -> Dict[str, Any]:
        return {"lock_identity": lease.identity.to_json(), "lease_id": lease.lease_id,
                "fencing_token": lease.fencing_token}


def _session_path(session_id: str, verb: str) -> str:
    if not isinstance(session_id, str) or not 1 <= len(session_id) <= 128:
        raise InvalidLeaseRequest("session_id must have 1..128 characters", field="session_id")
    return "/v1/sessions/" + urllib.parse.quote(session_id, safe="") + "/" + verb


def _lease_path(lease_id: str) -> str:
    if not lease_id or len(lease_id) > 128:
        raise InvalidLeaseRequest("lease_id must have 1..128 characters", field="lease_id")
    return "/v1/leases/" + urllib.parse.quote(lease_id, safe="")


__all__ = ["Calls", "LeaseLike", "new_id", "new_trace_id"]
