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

Sessions (sessions.py; docs/clients.md, "Sessions"): by default the holds
of a Client acquire their leases in one session the group opens on the
first hold, and the thread sends ONE keep-alive per period (G/3 of the
session's TTL) instead of renewing each lease. A keep-alive answered
``lease_lost`` (the session closed, expired, unknown) or refused for good
ends every hold in it; one that may pass is retried on the renewal backoff
until the session's cancel point, where each hold is over unconfirmed
(nothing is reported alive that the service did not confirm). A service
that keeps no sessions (400 naming ``session_id``) is remembered: holds
renew per lease from then on.
"""
import logging
import threading
import time
from typing import Dict, List, Optional, Protocol, Tuple, Union

from . import schedule
from .calls import Calls
from .errors import (BackendUnavailable, DeadlineExceeded, LeaseError, OutcomeUnknown,
                     RateLimited)
from .schedule import Window
from .sessions import (TRANSIENT as SESSION_TRANSIENT, ClientSession, SessionKey,
                       judge_keepalive, refuses_sessions)
from .types import LeaseRecord, SessionRecord

log = logging.getLogger("leaseclient")

_TRANSIENT = (BackendUnavailable, OutcomeUnknown, RateLimited, DeadlineExceeded)
BATCH_MAX = 100


class Member(Protocol):
    """What the group needs of a held lease (hold.HeldLease): this file sits
    below hold.py and never imports it."""

    client: Calls
    _service_instance_id: str
    _ttl_ms: Optional[int]
    _session: Optional[ClientSession]  # the session it was acquired in (None: renewed alone)

    def _standing(self, now: float) -> Tuple[str, float]: ...

    def _cancel_point(self) -> None: ...

    def _renew_once(self) -> None: ...

    def _prepare(self) -> Tuple[LeaseRecord, Window, float]: ...

    def _judge(self, held: LeaseRecord, window: Window, started: float,
               outcome: Union[LeaseRecord, LeaseError], first_sent: float,
               answered: float) -> None: ...

    def _kept(self, record: SessionRecord, first_sent: float) -> None: ...

    def _session_failed(self, code: str) -> None: ...

    def _signal(self, reason: str, code: str, detail: str) -> None: ...


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
        # the holds' session (sessions.py): opened on the first hold that
        # wants one, one at a time (_open_lock), kept alive by this thread
        self._open_lock = threading.Lock()
        self.session: Optional[ClientSession] = None
        self.sessions_refused = False  # the service keeps none: per lease from then on
        self.keepalives = 0  # keep-alives confirmed (for tests and diagnostics)
        self.pause_keepalives = False  # tests: a frozen keep-alive (the session expires)

    def join(self, held: Member) -> None:
        with self._cond:
            self._members.append(held)
            self._run()

    def _run(self) -> None:
        """Starts the thread when none runs (the lock held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, daemon=True,
                                            name="lease-renewals")
            self._thread.start()
        self._cond.notify_all()

    # ------------------------------------------------------------------
    # the session

    def session_for(self, key: SessionKey) -> Optional[ClientSession]:
        """A session for a hold to acquire in, kept alive until the hold
        calls session_done; None when the service keeps none (remembered) or
        the session open now was asked for other holds (another TTL or
        service instance): that hold renews alone. Raises the open's
        LeaseError otherwise (the hold does not start, as when its acquire
        fails)."""
        with self._open_lock:
            with self._cond:
                if self.sessions_refused:
                    return None
                s = self.session
                now = time.monotonic()
                if s is not None and not s.ended and now >= s.window.cancel:
                    s.ended = True  # its holds are over at the same point
                if s is not None and s.key != key:
                    if not s.ended and (s.users or self._members_of(s)):
                        return None
                    s = None
                if s is not None and s.usable(now):
                    s.users += 1
                    self._run()
                    return s
            if s is not None and not s.ended:
                # idle since its last keep-alive: one now, or a new session
                self._keepalive(s)
                with self._cond:
                    if s.usable(time.monotonic()):
                        s.users += 1
                        self._run()
                        return s
            try:
                record, answer = self._client._session_open(
                    ttl_ms=key[0], service_instance_id=key[1], request_id=None,
                    deadline_ms=None, deadline_at=None)
            except LeaseError as e:
                if refuses_sessions(e):
                    self._refused(e)
                    return None
                raise
            fresh = ClientSession(record, schedule.plan(answer.first_sent, record.grant_ms), key)
            with self._cond:
                old = self.session
                if old is not None:
                    old.ended = True
                self.session = fresh
                fresh.users += 1
                self._run()
            log.info("lease session %s opened (ttl %d ms)", record.session_id, record.ttl_ms)
            return fresh

    def session_done(self, session: ClientSession) -> None:
        """A hold acquiring in session has joined (or given up)."""
        with self._cond:
            session.users -= 1
            self._cond.notify_all()

    def session_refused(self, e: LeaseError) -> None:
        """An acquire in a session was refused as the service keeps none."""
        self._refused(e)

    def session_lost(self, session: ClientSession, code: str, detail: str) -> None:
        """The service says the session is not open (a keep-alive or an
        acquire in it answered lease_lost, or one was refused for good):
        every hold in it is lost; the next hold opens a new session."""
        with self._cond:
            session.ended = True
            members = self._members_of(session)
        if members:
            log.warning("lease session %s: %s (%s): %d hold(s) lost", session.session_id,
                        detail, code, len(members))
        for m in members:
            m._signal("lost", code, detail)

    def _refused(self, e: LeaseError) -> None:
        with self._cond:
            if not self.sessions_refused:
                log.info("leased keeps no sessions (%s): holds renew per lease", e)
            self.sessions_refused = True

    def _members_of(self, session: ClientSession) -> List[Member]:
        return [m for m in self._members if m._session is session]

    def _keepalive(self, s: ClientSession) -> None:
        """One keep-alive of s, bounded by its cancel point, judged for
        every hold in it."""
        with self._cond:
            window = s.window
        started = time.monotonic()
        budget_ms = max(int((window.cancel - started) * 1000), 1)
        try:
            record, answer = self._client._session_keepalive(s.session_id, deadline_ms=budget_ms)
        except SESSION_TRANSIENT as e:
            answered = time.monotonic()
            with self._cond:
                s.failed(e.code, answered)
                members = self._members_of(s)
            log.info("lease session %s: keep-alive failed (%s, %d in a row); retrying",
                     s.session_id, e.code, s.failures)
            for m in members:
                m._session_failed(e.code)
            return
        except LeaseError as e:
            if refuses_sessions(e):
                self._refused(e)
            self.session_lost(s, e.code, f"the session's keep-alive was answered {e.code}")
            return
        why = judge_keepalive(s, record)
        if why is not None:
            self.session_lost(s, "lease_lost", why)
            return
        with self._cond:
            if s.ended or s.confirm(record, answer.first_sent) is None:
                return
            self.keepalives += 1
            members = self._members_of(s)
        for m in members:
            m._kept(record, answer.first_sent)

    # ------------------------------------------------------------------
    # the thread

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
                s = self.session
                kept = s is not None and not s.ended and (s.users > 0 or bool(self._members_of(s)))
                if not self._members and not kept:
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
                keepalive: Optional[ClientSession] = None
                if kept and s is not None:
                    if now >= s.window.cancel:
                        s.ended = True  # unconfirmed: its holds are over at their own points
                    elif now >= s.next_at and not self.pause_keepalives:
                        keepalive = s
                    else:
                        nxt = min(nxt, s.window.cancel if self.pause_keepalives else s.next_at)
                if not over and not due and keepalive is None:
                    self._cond.wait(None if nxt == float("inf") else max(nxt - now, 0.0))
                    continue
                batch = (due + gather)[:BATCH_MAX]
                one_by_one = self._one_by_one
                self._cond.release()
                try:
                    if keepalive is not None:
                        self._keepalive(keepalive)
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
