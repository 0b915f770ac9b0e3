"""Holding a lease: renewal on the documented schedule (by the client's
renewal thread, renewals.py: by default every lease held through one Client
acquired in one session and kept alive by one keep-alive per period, else
renewed in one renew-batch per period), a watch (long poll) that reports an end the holder did
not ask for, and one cancellation signal (``lost``) for the work. Above the
calls (calls.py) and the renewal group, below client.py and aio.py."""
import dataclasses
import logging
import random
import threading
import time
from types import TracebackType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Type

from . import schedule
from .calls import Calls
from .errors import (
    AccessDenied,
    BackendUnavailable,
    DeadlineExceeded,
    InvalidCredential,
    InvalidLeaseRequest,
    LeaseError,
    LeaseLost,
    LeaseNotFound,
    OutcomeUnknown,
    RateLimited,
)
from .transport import Abort, Aborted
from .renewals import group_of
from .sessions import ClientSession
from .types import (CommitResult, Identity, LeaseRecord, SessionRecord, format_time_ms,
                    parse_time_ms)

log = logging.getLogger("leaseclient")

_TRANSIENT = (BackendUnavailable, OutcomeUnknown, RateLimited, DeadlineExceeded)
_WATCH_REFUSED_FOR_GOOD = (InvalidLeaseRequest, AccessDenied, InvalidCredential, LeaseNotFound)
WATCH_RETRY_FIRST_S = 0.2
WATCH_RETRY_MAX_S = 5.0
DEFAULT_COMMIT_DEADLINE_MS = 5000
# How long the service may take to say what became of a lease whose holder
# found itself past its local expiry (stopped, frozen, starved): the lease's
# authority is already gone then, so this delays nothing that matters.
NAMING_INSPECT_MS = 1000


class HeldLease:
    """A lease held by a background renewer.

    ``lost`` is set, once and for good, the moment this holder can no longer
    prove it holds the lease: a renewal answered ``lease_lost`` or was refused
    for good, the watch saw the lease end (force-release, revoke, expiry), no
    renewal was confirmed before the cancel point, or the maximum lifetime
    ended. ``reason`` then says which (``lost``, ``unconfirmed``, ``expired``),
    ``code`` the typed code behind it and ``detail`` what was observed. Stop the work when it is set;
    ``check()`` raises :class:`LeaseLost` then. The fencing token travels with
    ``commit()``; the service refuses a stale holder's commit either way.
    """

    def __init__(self, client: Calls, lease: LeaseRecord, window: schedule.Window, *,
                 service_instance_id: str, ttl_ms: Optional[int], watch: bool,
                 watch_wait_ms: int, margin_ms: int,
                 on_lost: Optional[Callable[["HeldLease"], None]] = None,
                 session: Optional[ClientSession] = None,
                 lifetime: Optional[schedule.Window] = None) -> None:
        self.client = client
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self.code: Optional[str] = None
        self.detail: Optional[str] = None  # what was observed, in words
        self.release_error: Optional[LeaseError] = None
        self.renewals = 0
        self.late_answers = 0  # renewals answered after their answer deadline, then inspected
        self.acquisition = lease  # the acquire's answer (waited_ms, replayed, ...)
        self._lease = lease
        self._window = window
        self._capped = lease.grant_capped
        # held in a session (None: renewed alone): the session's keep-alive
        # extends its window up to ``lifetime``, the window of its maximum
        # lifetime from the acquire (a renewal cannot pass it)
        self._session = session
        self._lifetime = lifetime
        if session is not None:
            # a lease's record in a session shows the session's expiry: a
            # short span there is the session's, not the lifetime's
            self._capped = lifetime is not None and lifetime.expiry <= window.expiry
        self._service_instance_id = service_instance_id
        self._ttl_ms = ttl_ms
        self._margin_ms = margin_ms
        self._watch_wait_ms = watch_wait_ms
        self._failures = 0
        # the cause of the failures in a row (_note_failure), and what the
        # last attempt itself met
        self._last_code = "lease_renewed"
        self._last_met = "lease_renewed"
        self._cond = threading.Condition()
        self._stop = False
        self._released = False
        self._watch_abort = Abort()
        self._renew_abort = Abort()  # ends a renewal in flight when the hold stops
        self._callbacks: List[Callable[["HeldLease"], None]] = [on_lost] if on_lost else []
        # renewal runs on the client's renewal group (renewals.py); the
        # watch has a thread of its own
        self._threads: List[threading.Thread] = []
        if watch:
            self._threads.append(threading.Thread(target=self._watch_main, daemon=True,
                                                  name=f"lease-watch-{lease.lease_id}"))

    # ------------------------------------------------------------------
    # what the work sees

    @property
    def lease(self) -> LeaseRecord:
        """The latest confirmed lease record (expires_at moves with renewals)."""
        with self._cond:
            return self._lease

    @property
    def lease_id(self) -> str:
        return self._lease.lease_id

    @property
    def fencing_token(self) -> int:
        return self._lease.fencing_token

    @property
    def identity(self) -> Identity:
        return self._lease.identity

    @property
    def window(self) -> schedule.Window:
        with self._cond:
            return self._window

    def check(self) -> None:
        """Raises LeaseLost when the lease is lost; returns otherwise."""
        if self.lost.is_set():
            raise LeaseLost(f"lease {self.lease_id} is {self.reason} ({self.code}): {self.detail}")

    def add_lost_callback(self, fn: Callable[["HeldLease"], None]) -> None:
        """Calls fn(self) once when the lease is lost (at once if it already is).
        It runs on the renewer's or the watcher's thread: keep it short."""
        with self._cond:
            if not self.lost.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def commit(self, writes: Sequence[Mapping[str, Any]], **kw: Any) -> CommitResult:
        """A fenced commit with this lease's id and token (Client.commit's options).
        Raises LeaseLost without sending when the lease is already known lost.
        Its deadline is the call's (``deadline_ms``, default 5 s) but never
        past the lease's cancel point: a commit does not outlive the
        holder's authority (LeaseLost when none is left)."""
        self.check()
        if kw.get("deadline_at") is None:
            authority_ms = int((self.window.cancel - time.monotonic()) * 1000)
            if authority_ms < 1:
                raise LeaseLost(f"lease {self.lease_id}: no authority left (its cancel point "
                                "passed without a confirmed renewal)")
            asked = kw.get("deadline_ms") or DEFAULT_COMMIT_DEADLINE_MS
            kw["deadline_ms"] = min(asked, authority_ms)
        return self.client.commit(self.lease, writes, **kw)

    def release(self, *, deadline_ms: int = 5000) -> None:
        """Stops renewing and releases the lease (also done on leaving ``with``)."""
        with self._cond:
            if self._released:
                return
            self._released = True
        was_lost = self.lost.is_set()
        self._halt("released", "lease_released")
        if was_lost and self.code == "lease_lost":
            return  # the service already ended it
        try:
            self.client.release(self.lease, service_instance_id=self._service_instance_id,
                                deadline_ms=deadline_ms)
        except LeaseLost:
            pass
        except LeaseError as e:
            self.release_error = e
            log.warning("lease %s: release failed: %s", self.lease_id, e)

    # ------------------------------------------------------------------
    # the state change, once

    def _signal(self, reason: str, code: str, detail: str) -> None:
        with self._cond:
            if self.lost.is_set() or self._stop:
                return
            self.reason, self.code, self.detail = reason, code, detail
            self.lost.set()
            callbacks = list(self._callbacks)
            self._cond.notify_all()
        log.warning("lease %s: %s (%s): %s", self._lease.lease_id, reason, code, detail)
        group_of(self.client).leave(self)  # nothing left to renew
        self._watch_abort.fire()
        for fn in callbacks:
            try:
                fn(self)
            except Exception:  # a callback's failure must not stop the others
                log.exception("lease %s: lost callback failed", self._lease.lease_id)

    def _halt(self, reason: str, code: str) -> None:
        with self._cond:
            if not self._stop:
                self._stop = True
                if not self.lost.is_set():
                    self.reason, self.code = reason, code
            self._cond.notify_all()
        self._watch_abort.fire()
        self._renew_abort.fire()
        group_of(self.client).leave(self)
        for t in self._threads:
            if t is not threading.current_thread() and t.is_alive():
                t.join()

    def _start(self) -> None:
        group_of(self.client).join(self)
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------
    # renewal

    # The client's renewal group (renewals.py) calls these: it renews every
    # lease held through one Client, those due in the same period in one
    # renew-batch, and each answer is judged here as a renewal of its own.

    def _standing(self, now: float) -> "tuple[str, float]":
        """("ended" | "over" | "due" | "gatherable" | "idle", when next needed)."""
        with self._cond:
            if self._stop or self.lost.is_set():
                return "ended", float("inf")
            w = self._window
            if self._session is not None:
                # the session's keep-alive moves the window, not a renewal
                if now >= w.cancel:
                    return "over", w.cancel
                return "idle", w.cancel
            renews = not self._capped and w.renew <= w.cancel
            nxt = w.renew if renews else w.cancel
            if now >= w.cancel:
                return "over", w.cancel
            if renews and now >= w.renew:
                return "due", nxt
            # renewing early is always safe (the new window starts at the
            # batch's send); half way keeps a process's renewals in step
            if renews and now >= w.sent + (w.renew - w.sent) / 2:
                return "gatherable", nxt
            return "idle", nxt

    def _cancel_point(self) -> None:
        """The cancel point passed without a confirmed renewal."""
        with self._cond:
            capped, window = self._capped, self._window
            failures, last_code, last_met = self._failures, self._last_code, self._last_met
        if capped:
            self._signal("expired", "lease_lost", "the maximum lifetime ended")
            return
        observed = None
        if failures:
            detail = (f"no renewal confirmed before the cancel point: {failures} attempt(s) "
                      f"failed, the last with {last_met}")
            if last_met != last_code:
                detail += f" (an earlier one's outcome is unknown: {last_code})"
            observed = (last_code, detail)
        self._signal(*self._unconfirmed(window, observed))

    def _unconfirmed(self, window: schedule.Window,
                     observed: "Optional[tuple[str, str]]") -> "tuple[str, str, str]":
        """(reason, code, detail) of a hold whose authority ran out unconfirmed.

        ``observed`` is the failure the renewals met (a code and what it
        was). Without one, or when this holder only got to look after its
        local expiry (nothing in the client sleeps past the cancel point),
        the renewals did not run in time: the process itself was stopped,
        frozen or starved, which says nothing about leased. Before the local
        expiry that is ``unconfirmed``/``deadline_exceeded`` (no renewal was
        sent in time). After it the service is asked what became of the
        lease, and that is the answer: ``lost`` when it ended it (expired,
        or another's), else ``unconfirmed`` with what the inspection met."""
        now = time.monotonic()
        if observed is not None and now < window.expiry:
            return ("unconfirmed",) + observed
        stalled = (f"this holder did not run its renewal in time: it looked "
                   f"{now - window.cancel:.2f} s after its cancel point (the process was "
                   "stopped, frozen or starved, or its renewal thread held up)")
        if now < window.expiry:
            # the service cannot have expired it yet: nothing to ask, and
            # no reason to keep the work going past the cancel point
            return ("unconfirmed", "deadline_exceeded",
                    stalled + "; no renewal was sent before the cancel point")
        if observed is not None:
            stalled += f"; the renewals failed with {observed[0]}"
        # past the local expiry authority is long gone: the service's word
        # costs nothing more and names what happened
        budget_ms = NAMING_INSPECT_MS
        lease_id, token = self._lease.lease_id, self._lease.fencing_token
        try:
            seen = self.client.inspect(lease_id, deadline_ms=budget_ms)
        except LeaseNotFound:
            return "lost", "lease_lost", stalled + "; leased no longer knows the lease"
        except LeaseError as e:
            return "unconfirmed", e.code, stalled + f"; leased could not say more ({e.code})"
        if seen.state != "active" or seen.fencing_token != token:
            return "lost", "lease_lost", stalled + f"; leased says the lease is {seen.state}"
        return ("unconfirmed", "deadline_exceeded",
                stalled + "; leased still shows it active, but no renewal was sent before the "
                          "cancel point")

    def _prepare(self) -> "tuple[LeaseRecord, schedule.Window, float]":
        """What is held, its window and when this attempt began."""
        with self._cond:
            return self._lease, self._window, time.monotonic()

    def _renew_item(self) -> Dict[str, Any]:
        """This lease's item in a renew-batch."""
        held = self.lease
        return self.client._owner_item(held, self._service_instance_id, self._ttl_ms)

    def _renew_once(self) -> None:
        held, window, now = self._prepare()
        # the call may run (and resolve an unknown outcome) up to the cancel
        # point, never past it: then cancellation is due anyway
        budget_ms = max(int((window.cancel - now) * 1000), 1)
        try:
            renewed, answer = self.client._renew(held, ttl_ms=self._ttl_ms,
                                                 service_instance_id=self._service_instance_id,
                                                 deadline_ms=budget_ms,
                                                 abort=self._renew_abort)
        except Aborted:
            return  # the hold is stopping
        except LeaseError as e:
            self._judge(held, window, now, e, now, time.monotonic())
            return
        self._judge(held, window, now, renewed, answer.first_sent, answer.answered)

    def _judge(self, held: LeaseRecord, window: schedule.Window, started: float,
               outcome: "LeaseRecord | LeaseError", first_sent: float, answered: float) -> None:
        """One renewal's answer, judged exactly as a renewal of its own:
        a grant anchored at its request's first send, a late answer counted
        only when an inspection confirms it, a temporary failure retried,
        anything else ends this hold only."""
        if self._stop:
            return
        if isinstance(outcome, _TRANSIENT):
            with self._cond:
                self._note_failure(outcome.code)
                self._window = schedule.Window(window.sent, window.grant_ms, window.expiry,
                                               window.cancel,
                                               schedule.retry_at(answered, window.cancel,
                                                                 self._failures))
            log.info("lease %s: renewal failed (%s, %d in a row); retrying", held.lease_id,
                     outcome.code, self._failures)
            return
        if isinstance(outcome, LeaseError):
            # lease_lost, or refused for good (credential, scope, invalid)
            self._signal("lost", outcome.code, f"a renewal was answered {outcome.code}")
            return
        renewed = outcome
        if (renewed.lease_id != held.lease_id or renewed.fencing_token != held.fencing_token
                or renewed.state != "active"):
            self._signal("lost", "lease_lost",
                         "a renewal answered another lease, or one no longer active")
            return
        answer_by = schedule.answer_deadline(started, window.cancel)
        if answered > answer_by:
            with self._cond:
                self.late_answers += 1
            log.info("lease %s: renewal answered %.0f ms after its deadline; inspecting",
                     held.lease_id, (answered - answer_by) * 1000)
            if not self._confirm_by_inspect(renewed, window.cancel):
                self._signal(*self._unconfirmed(window, (
                    "lease_outcome_unknown", "a renewal answered after its answer deadline "
                    "was not confirmed by an inspection before the cancel point")))
                return
        w = schedule.plan(first_sent, renewed.grant_ms, margin_config_ms=self._margin_ms)
        with self._cond:
            if self._stop:
                return
            self._lease = renewed
            self._window = w
            self._capped = renewed.grant_capped
            self._failures = 0
            self._last_code = self._last_met = "lease_renewed"
            self.renewals += 1

    def _kept(self, record: SessionRecord, first_sent: float) -> None:
        """The session's keep-alive, first sent at first_sent, was confirmed:
        the window starts there with the session's grant, never past the
        maximum lifetime; the record shows what the service would answer
        (the session's expiry, or the lease's own bound when earlier)."""
        w = schedule.plan(first_sent, record.grant_ms, margin_config_ms=self._margin_ms)
        with self._cond:
            if self._stop or self.lost.is_set() or w.expiry <= self._window.expiry:
                return
            if self._lifetime is not None and w.expiry >= self._lifetime.expiry:
                w, self._capped = self._lifetime, True
            lease = self._lease
            expires_at = record.expires_at
            acquired = parse_time_ms(lease.acquired_at)
            if acquired is not None and lease.maximum_lifetime_ms:
                own = acquired + lease.maximum_lifetime_ms
                if own < (parse_time_ms(expires_at) or own):
                    expires_at = format_time_ms(own)
            self._lease = dataclasses.replace(lease, renewed_at=record.renewed_at,
                                              expires_at=expires_at)
            self._window = w
            self._failures = 0
            self._last_code = self._last_met = "lease_renewed"
            self.renewals += 1

    def _session_failed(self, code: str) -> None:
        """The session's keep-alive failed in a way that may pass (retried)."""
        with self._cond:
            self._note_failure(code)

    def _note_failure(self, code: str) -> None:
        """An attempt (a renewal or the session's keep-alive) confirmed
        nothing and is retried (self._cond held). An earlier attempt whose
        outcome is unknown stays the cause when a later one only ran out of
        time (``deadline_exceeded``, often before it was sent): what the
        holder knows is still that the earlier one may have happened. Any
        other failure is the cause. The Go client's noteFailure."""
        self._failures += 1
        self._last_met = code
        if self._last_code == "lease_outcome_unknown" and code == "deadline_exceeded":
            return
        self._last_code = code

    def _confirm_by_inspect(self, renewed: LeaseRecord, cancel: float) -> bool:
        """A late renewal answer grants nothing unless an inspection, answered
        before the cancel point, shows the lease active with it applied."""
        left_ms = int((cancel - time.monotonic()) * 1000)
        if left_ms <= 0:
            return False
        try:
            seen = self.client.inspect(renewed.lease_id, deadline_ms=left_ms)
        except LeaseError:
            return False
        return (time.monotonic() < cancel and seen.state == "active"
                and seen.lease_id == renewed.lease_id
                and seen.fencing_token == renewed.fencing_token
                and (parse_time_ms(seen.renewed_at) or 0) >= (parse_time_ms(renewed.renewed_at) or 0))

    # ------------------------------------------------------------------
    # watch

    def _watch_main(self) -> None:
        retry = WATCH_RETRY_FIRST_S
        lease_id = self._lease.lease_id
        while True:
            with self._cond:
                if self._stop or self.lost.is_set():
                    return
            try:
                seen = self.client.watch(lease_id, wait_ms=self._watch_wait_ms,
                                         abort=self._watch_abort)
            except Aborted:
                return
            except _WATCH_REFUSED_FOR_GOOD as e:
                log.info("lease %s: watch not available (%s): renewal alone guards it",
                         lease_id, e.code)
                return
            except LeaseError:
                # unreachable or busy: renewal guards meanwhile
                if self._watch_abort.event.wait(retry + random.uniform(0, retry / 2)):
                    return
                retry = min(retry * 2, WATCH_RETRY_MAX_S)
                continue
            if seen.lease_id == lease_id and seen.state != "active":
                with self._cond:
                    if self._stop:
                        return
                log.warning("lease %s: watch: the lease is %s", lease_id, seen.state)
                self._signal("lost", "lease_lost", f"the watch saw the lease {seen.state}")
                return
            retry = WATCH_RETRY_FIRST_S


class _SessionGone(Exception):
    """An acquire in a session answered lease_lost: the session is not open."""

    def __init__(self, error: LeaseLost) -> None:
        super().__init__(str(error))
        self.error = error


class Hold:
    """``with client.hold(identity, ttl_ms=..., wait_ms=...) as lease:``

    Entering acquires (raising LeaseConflict when the lease stays held past
    ``wait_ms``, or any other typed error) and starts the renewer and the
    watcher; leaving stops them and releases the lease. Options: those of
    Client.acquire, plus ``watch`` (default True), ``watch_wait_ms``
    (30 000), ``margin_ms`` (0: the documented G/10 clamped to [100 ms, 5 s]),
    ``on_lost`` (a callback, run on a background thread) and
    ``per_lease_renewal`` (default False: the lease is acquired in the
    client's session and kept alive by its one keep-alive per period; True
    renews it on its own, as is a hold without a watch, or one whose
    service keeps no sessions: docs/clients.md, "Sessions").
    """

    def __init__(self, client: Calls, identity: Identity, *, ttl_ms: Optional[int] = None,
                 wait_ms: int = 0, maximum_lifetime_ms: Optional[int] = None,
                 service_instance_id: Optional[str] = None, execution_id: Optional[str] = None,
                 job_id: Optional[str] = None, trace_id: Optional[str] = None,
                 metadata: Optional[Mapping[str, Any]] = None, request_id: Optional[str] = None,
                 deadline_ms: Optional[int] = None, watch: bool = True,
                 watch_wait_ms: int = 30000, margin_ms: int = 0,
                 on_lost: Optional[Callable[[HeldLease], None]] = None,
                 per_lease_renewal: bool = False) -> None:
        self._client = client
        self._identity = identity
        self._ttl_ms = ttl_ms
        self._service_instance_id = service_instance_id or client.service_instance_id
        self._acquire: Dict[str, Any] = dict(
            ttl_ms=ttl_ms, wait_ms=wait_ms, maximum_lifetime_ms=maximum_lifetime_ms,
            service_instance_id=self._service_instance_id, execution_id=execution_id,
            job_id=job_id, trace_id=trace_id, metadata=metadata, request_id=request_id,
            deadline_ms=deadline_ms, deadline_at=None)
        self._watch = watch
        self._watch_wait_ms = watch_wait_ms
        self._margin_ms = margin_ms
        self._on_lost = on_lost
        # A session's keep-alive says nothing of one lease: a lease ended by
        # force-release or revoke is seen by its watch. A hold without one
        # renews per lease, so that its renewal still tells it.
        self._session = watch and not per_lease_renewal
        self.held: Optional[HeldLease] = None

    def start(self) -> HeldLease:
        group = group_of(self._client)
        session = (group.session_for((self._ttl_ms, self._service_instance_id))
                   if self._session else None)
        if session is None:
            return self._start_in(None)
        try:
            try:
                return self._start_in(session)
            except _SessionGone as gone:
                # the session ended before the acquire reached it (nothing
                # was written): its holds are lost; once more in a new one
                group.session_lost(session, gone.error.code, "an acquire in the session "
                                   f"was answered {gone.error.code}")
            except InvalidLeaseRequest as e:
                if e.field != "session_id":
                    raise
                group.session_refused(e)
                return self._start_in(None)
        finally:
            group.session_done(session)
        again = group.session_for((self._ttl_ms, self._service_instance_id))
        if again is None:
            return self._start_in(None)
        try:
            return self._start_in(again)
        except _SessionGone as gone:
            group.session_lost(again, gone.error.code, "an acquire in the session was "
                               f"answered {gone.error.code}")
            raise gone.error from None
        finally:
            group.session_done(again)

    def _start_in(self, session: Optional[ClientSession]) -> HeldLease:
        try:
            lease, answer = self._client._acquire(
                self._identity, session_id=session.session_id if session else None,
                **self._acquire)
        except LeaseLost as e:
            if session is None:
                raise
            raise _SessionGone(e) from e
        sent = schedule.anchor(answer.first_sent, lease.waited_ms, answer.answered)
        window = schedule.plan(sent, lease.grant_ms, margin_config_ms=self._margin_ms)
        lifetime = None
        if session is not None and lease.maximum_lifetime_ms:
            lifetime = schedule.plan(sent, lease.maximum_lifetime_ms,
                                     margin_config_ms=self._margin_ms)
            if lifetime.expiry < window.expiry:
                window = lifetime
        held = HeldLease(self._client, lease, window,
                         service_instance_id=self._service_instance_id, ttl_ms=self._ttl_ms,
                         watch=self._watch, watch_wait_ms=self._watch_wait_ms,
                         margin_ms=self._margin_ms, on_lost=self._on_lost, session=session,
                         lifetime=lifetime)
        if time.monotonic() >= window.cancel:
            # granted, but with no local authority left: give it back
            held.release()
            raise LeaseLost(f"lease {lease.lease_id} was granted after its local authority "
                            f"ended (waited_ms {lease.waited_ms})", request_id=answer.request_id)
        held._start()
        self.held = held
        return held

    def __enter__(self) -> HeldLease:
        return self.start()

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if self.held is not None:
            self.held.release()
