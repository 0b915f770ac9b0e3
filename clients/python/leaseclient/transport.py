"""One bounded HTTP exchange with leased, and the resolution of unknown
outcomes by repeating the same request id.

Why the body is built once and resent byte for byte: the service's
idempotency record compares a digest of the request; a repeat that differed
in any input that matters would be an idempotency conflict, not a
resolution. The deadline of a call bounds every attempt together.
"""
import http.client
import json
import random
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Dict, Optional, Type

from .errors import (
    ERRORS_BY_CODE,
    ERRORS_BY_STATUS,
    SUCCESS_CODES,
    BackendUnavailable,
    DeadlineExceeded,
    LeaseError,
    OutcomeUnknown,
    RateLimited,
    error_from_envelope,
)

PAUSE_FIRST_S = 0.020
PAUSE_MAX_S = 0.500
# A deadline already past is the service's to judge (it answers
# deadline_exceeded without touching the database): one attempt gets this long.
PAST_DEADLINE_ATTEMPT_S = 2.0


class Aborted(Exception):
    """The exchange was ended from another thread (a hold that stops its watch)."""


class Abort:
    """Ends an exchange in progress from another thread: shuts its socket down."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None

    def attach(self, sock: Optional[socket.socket]) -> None:
        with self._lock:
            self._sock = sock
            fired = self.event.is_set()
        if fired:
            raise Aborted()

    def fire(self) -> None:
        with self._lock:
            self.event.set()
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Answer:
    """A success envelope and the facts of the call that produced it."""

    def __init__(self, envelope: Dict[str, Any], status: int, request_id: Optional[str],
                 first_sent: float, answered: float, attempts: int) -> None:
        self.envelope = envelope
        self.status = status
        self.request_id = request_id
        self.first_sent = first_sent  # time.monotonic() of the first attempt
        self.answered = answered  # time.monotonic() when the answer was read
        self.attempts = attempts


class _NotSent(Exception):
    """Connecting failed: the request cannot have reached the service."""


_TRANSIENT_CODES = ("lease_backend_unavailable", "lease_rate_limited", "deadline_exceeded")


class Transport:
    def __init__(self, url: str, token: Optional[str], *, ca_file: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be http://HOST[:PORT] or https://HOST[:PORT]")
        self.url = url.rstrip("/")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._token = token
        self._ssl = ssl_context
        if self._scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context(cafile=ca_file)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _attempt(self, method: str, path: str, body: Optional[bytes], timeout: float,
                 abort: Optional[Abort]) -> "tuple[int, Dict[str, str], bytes]":
        conn = self._connection(timeout)
        try:
            try:
                conn.connect()
            except (OSError, ssl.SSLError) as e:
                raise _NotSent(str(e)) from e
            if abort is not None:
                abort.attach(conn.sock)
            headers = {"Accept": "application/json", "Connection": "close"}
            if self._token:
                headers["Authorization"] = "Bearer " + self._token
            if body is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, self._prefix + path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            if abort is not None:
                try:
                    abort.attach(None)
                finally:
                    conn.close()
            else:
                conn.close()

    def exchange(self, method: str, path: str, body: Optional[bytes], *, mutation: bool,
                 deadline: float, request_id: Optional[str] = None,
                 abort: Optional[Abort] = None) -> Answer:
        """Sends until a typed answer comes or ``deadline`` (time.monotonic())
        passes; returns the success answer or raises its typed error."""
        maybe_done = False  # an earlier attempt may have taken effect
        transient: Type[LeaseError] = BackendUnavailable
        transient_msg = "leased could not be reached"
        retry_after_ms: Optional[int] = None
        pause = PAUSE_FIRST_S
        attempts = 0
        first_sent = 0.0
        while attempts == 0 or time.monotonic() < deadline:
            now = time.monotonic()
            if attempts == 0:
                first_sent = now
            attempts += 1
            left = deadline - now
            timeout = left if left > 0 else PAST_DEADLINE_ATTEMPT_S
            retry_after_ms = None
            try:
                status, headers, data = self._attempt(method, path, body, timeout, abort)
            except Aborted:
                raise
            except _NotSent as e:
                if abort is not None and abort.event.is_set():
                    raise Aborted() from e
                if not maybe_done:
                    raise BackendUnavailable(
                        f"leased at {self.url} could not be reached: {e}",
                        retryable=True, request_id=request_id) from e
                transient_msg = f"leased at {self.url} could not be reached: {e}"
                if not self._pause(deadline, pause, None, abort):
                    break
                pause = min(pause * 2, PAUSE_MAX_S)
                continue
            except (OSError, http.client.HTTPException, ssl.SSLError) as e:
                if abort is not None and abort.event.is_set():
                    raise Aborted() from e
                # sent, or partly: the answer is lost, the effect may exist
                maybe_done = maybe_done or mutation
                transient_msg = f"no answer from leased at {self.url}: {e!r}"
                if not self._pause(deadline, pause, None, abort):
                    break
                pause = min(pause * 2, PAUSE_MAX_S)
                continue
            answered = time.monotonic()
            env = _envelope(data)
            if env is not None:
                code = env["code"]
                if code == "lease_outcome_unknown" or (maybe_done and code in _TRANSIENT_CODES):
                    # not an answer to "did it happen?": ask again
                    maybe_done = maybe_done or mutation
                    transient = BackendUnavailable
                    if code != "lease_outcome_unknown":
                        transient = ERRORS_BY_CODE[code]
                    transient_msg = str(env.get("msg") or code)
                    ra = env.get("retry_after_ms")
                    retry_after_ms = ra if isinstance(ra, int) and ra > 0 else None
                    if not self._pause(deadline, pause, retry_after_ms, abort):
                        break
                    pause = min(pause * 2, PAUSE_MAX_S)
                    continue
                if code in SUCCESS_CODES:
                    return Answer(env, status, request_id, first_sent, answered, attempts)
                raise error_from_envelope(env, status, request_id)
            if status >= 500 or 200 <= status < 300:
                # a proxy's error page or a garbled answer proves nothing
                maybe_done = maybe_done or mutation
                transient_msg = f"HTTP {status} without a typed answer"
                retry_after_ms = _retry_after_header(headers)
                if not self._pause(deadline, pause, retry_after_ms, abort):
                    break
                pause = min(pause * 2, PAUSE_MAX_S)
                continue
            cls = ERRORS_BY_STATUS.get(status, BackendUnavailable)
            raise cls(f"HTTP {status} without a typed answer", http_status=status,
                      request_id=request_id, retry_after_ms=_retry_after_header(headers))
        if attempts == 0:
            raise DeadlineExceeded("the call's deadline passed before it was sent",
                                   request_id=request_id)
        if maybe_done:
            raise OutcomeUnknown(
                "no answer before the deadline; call again with the same request id "
                f"to resolve it ({transient_msg})",
                retryable=True, request_id=request_id)
        raise transient(transient_msg, retryable=True, request_id=request_id,
                        retry_after_ms=retry_after_ms)

    @staticmethod
    def _pause(deadline: float, pause: float, retry_after_ms: Optional[int],
               abort: Optional[Abort]) -> bool:
        """Sleeps before the next attempt; False when the deadline leaves no room."""
        wait = retry_after_ms / 1000.0 if retry_after_ms else pause
        wait += random.uniform(0, wait / 2)
        if wait >= deadline - time.monotonic():
            return False
        if abort is not None:
            if abort.event.wait(wait):
                raise Aborted()
        else:
            time.sleep(wait)
        return True


def _envelope(data: bytes) -> Optional[Dict[str, Any]]:
    """The typed envelope in a body, or None when it is not one."""
    try:
        env = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(env, dict):
        return None
    code = env.get("code")
    if not isinstance(code, str) or (code not in SUCCESS_CODES and code not in ERRORS_BY_CODE):
        return None
    return env


def _retry_after_header(headers: Dict[str, str]) -> Optional[int]:
    value = headers.get("retry-after")
    if value and value.isdigit():
        return int(value) * 1000
    return None


__all__ = ["Abort", "Aborted", "Answer", "Transport", "RateLimited"]
