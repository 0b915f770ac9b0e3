"""The session a Client's holds share (docs/api.md, "Sessions";
docs/clients.md, "Sessions"): what this process knows of it, and the rules
that judge its answers. The renewal group (renewals.py) opens it on the
first hold and keeps it alive, one keep-alive per period for every lease
in it; this file holds no thread and makes no call."""
from typing import Optional, Tuple

from . import schedule
from .errors import (BackendUnavailable, DeadlineExceeded, InvalidLeaseRequest, LeaseError,
                     OutcomeUnknown, RateLimited)
from .types import SessionRecord

# failures a keep-alive retries until the session's cancel point
TRANSIENT = (BackendUnavailable, OutcomeUnknown, RateLimited, DeadlineExceeded)

# What holds must ask alike to share a session: the TTL they asked (None:
# the service's default; a lease in a session takes the session's TTL) and
# the service instance the session is opened for.
SessionKey = Tuple[Optional[int], str]


def refuses_sessions(e: LeaseError) -> bool:
    """The service keeps no sessions: another backend (400 naming
    ``session_id``, "sessions need the PostgreSQL backend"), or a leased
    older than the routes (400 naming ``method``, or a proxy's 404)."""
    if isinstance(e, InvalidLeaseRequest) and e.field in ("session_id", "method"):
        return True
    return e.http_status == 404 and not isinstance(e, TRANSIENT)


class ClientSession:
    """One session of a Client as this process knows it: its last
    confirmed window (anchored, like a renewal's, at the first send of the
    open or keep-alive that the service confirmed), when the next
    keep-alive is due, and the failures in a row since the last
    confirmation. Changed only under the renewal group's lock."""

    def __init__(self, record: SessionRecord, window: schedule.Window, key: SessionKey) -> None:
        self.session_id = record.session_id
        self.record = record
        self.window = window
        self.key = key
        self.next_at = window.renew
        self.failures = 0
        self.last_code = "lease_renewed"
        self.ended = False  # lost, refused, or past its cancel point: never used again
        self.users = 0  # holds acquiring in it right now (kept alive meanwhile)

    def __repr__(self) -> str:
        return f"ClientSession({self.session_id!r}, ended={self.ended})"

    def usable(self, now: float) -> bool:
        """A new lease may be acquired in it without a keep-alive first."""
        return not self.ended and now < self.window.renew

    def confirm(self, record: SessionRecord, first_sent: float) -> Optional[schedule.Window]:
        """A keep-alive's (or open's) answer, sent first at ``first_sent``:
        the new window, or None when it says nothing newer than what is
        known (an answer overtaken by a later one). A keep-alive has no
        request id, so it is anchored at its first send: the service
        extended the session no earlier than that."""
        w = schedule.plan(first_sent, record.grant_ms)
        if w.expiry <= self.window.expiry:
            return None
        self.window, self.record = w, record
        self.next_at = w.renew
        self.failures, self.last_code = 0, "lease_renewed"
        return w

    def failed(self, code: str, answered: float) -> None:
        """A keep-alive failed in a way that may pass: retried on the
        renewal backoff, never past the cancel point."""
        self.failures += 1
        self.last_code = code
        self.next_at = schedule.retry_at(answered, self.window.cancel, self.failures)


def judge_keepalive(session: ClientSession, record: SessionRecord) -> Optional[str]:
    """Why a keep-alive's success answer cannot be taken (None: it can)."""
    if record.session_id != session.session_id:
        return "a keep-alive answered another session"
    if record.state != "open":
        return f"a keep-alive answered the session {record.state}"
    return None


__all__ = ["ClientSession", "SessionKey", "TRANSIENT", "judge_keepalive", "refuses_sessions"]
