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
        self._default_port = 443 if self._scheme == "https" else 80
        if self._scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context(cafile=ca_file)

    def _attempt(self, method: str, path: str, body: Optional[bytes], deadline: float,
                 abort: Optional[Abort]) -> "tuple[int, Dict[str, str], bytes]":
        """One exchange (connect, send, head and body), all of it bounded by
        ``deadline`` (time.monotonic()): every step's socket timeout is the
        time left, so a server that trickles its answer cannot stretch it."""
        try:
            sock = socket.create_connection((self._host, self._port or self._default_port),
                                            timeout=_left(deadline))
        except (OSError, ssl.SSLError) as e:
            raise _NotSent(str(e)) from e
        try:
            if self._scheme == "https":
                assert self._ssl is not None
                try:
                    sock.settimeout(_left(deadline))
                    sock = self._ssl.wrap_socket(sock, server_hostname=self._host)
                except (OSError, ssl.SSLError) as e:
                    raise _NotSent(str(e)) from e
            if abort is not None:
                abort.attach(sock)
            sock.settimeout(_left(deadline))
            sock.sendall(self._request(method, path, body))
            return _read_answer(sock, deadline)
        finally:
            if abort is not None:
                try:
                    abort.attach(None)
                finally:
                    sock.close()
            else:
                sock.close()

    def _request(self, method: str, path: str, body: Optional[bytes]) -> bytes:
        host = f"[{self._host}]" if ":" in self._host else self._host
        if self._port is not None and self._port != self._default_port:
            host += f":{self._port}"
        lines = [f"{method} {self._prefix + path} HTTP/1.1", f"Host: {host}",
                 "Accept: application/json", "Connection: close"]
        if self._token:
            lines.append("Authorization: Bearer " + self._token)
        if body is not None:
            lines.append("Content-Type: application/json")
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + (body or b"")

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
            # a deadline already past still gets one attempt: the service judges it
            attempt_deadline = deadline if deadline > now else now + PAST_DEADLINE_ATTEMPT_S
            retry_after_ms = None
            try:
                status, headers, data = self._attempt(method, path, body, attempt_deadline,
                                                      abort)
            except Aborted:
                raise
            except AnswerTooLarge as e:
                if abort is not None and abort.event.is_set():
                    raise Aborted() from e
                if not mutation:
                    raise BackendUnavailable(f"leased at {self.url}: {e}",
                                             http_status=e.status) from e
                # a mutation answered, unreadably: it may have happened
                maybe_done = True
                transient_msg = f"leased at {self.url}: {e}"
                if not self._pause(deadline, pause, None, abort):
                    break
                pause = min(pause * 2, PAUSE_MAX_S)
                continue
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


# The most of an answer's body read: a larger one is refused, never held in
# memory whole (the Go client's MaxAnswerBytes).
MAX_ANSWER_BYTES = 8 * 1024 * 1024
MAX_HEAD_BYTES = 64 * 1024
_RECV_BYTES = 65536


class AnswerTooLarge(OSError):
    """An answer whose body (or head) is larger than MAX_ANSWER_BYTES."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _left(deadline: float) -> float:
    """The time left before ``deadline``; socket.timeout once it passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("the exchange's deadline passed")
    return left


class _Answer:
    """Reads one HTTP/1.1 answer from a socket under one deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self.buf = bytearray()
        self.eof = False

    def more(self) -> None:
        self._sock.settimeout(_left(self._deadline))
        chunk = self._sock.recv(_RECV_BYTES)
        if not chunk:
            self.eof = True
        self.buf += chunk

    def line(self, limit: int) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return out
            if len(self.buf) > limit:
                raise http.client.HTTPException("an answer line longer than allowed")
            if self.eof:
                raise http.client.IncompleteRead(bytes(self.buf))
            self.more()

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if self.eof:
                raise http.client.IncompleteRead(bytes(self.buf), n - len(self.buf))
            self.more()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


def _read_answer(sock: socket.socket, deadline: float) -> "tuple[int, Dict[str, str], bytes]":
    r = _Answer(sock, deadline)
    while True:  # 1xx interim answers precede the final one
        status_line = r.line(MAX_HEAD_BYTES).decode("iso-8859-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise http.client.BadStatusLine(status_line[:80])
        status = int(parts[1])
        headers: Dict[str, str] = {}
        size = len(status_line)
        while True:
            line = r.line(MAX_HEAD_BYTES).decode("iso-8859-1")
            size += len(line) + 2
            if size > MAX_HEAD_BYTES:
                raise AnswerTooLarge(f"an answer head larger than {MAX_HEAD_BYTES} bytes", status)
            if not line:
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if status >= 200 or status < 100:
            break
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = bytearray()
        while True:
            size_line = r.line(1024).split(b";", 1)[0].strip()
            try:
                n = int(size_line, 16)
            except ValueError:
                raise http.client.HTTPException("a bad chunk size") from None
            if n == 0:
                break
            if len(body) + n > MAX_ANSWER_BYTES:
                raise AnswerTooLarge(f"an answer larger than {MAX_ANSWER_BYTES} bytes", status)
            body += r.exactly(n)
            r.exactly(2)
        return status, headers, bytes(body)
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise http.client.HTTPException("a bad Content-Length")
        n = int(length)
        if n > MAX_ANSWER_BYTES:  # refused before a byte of it is read
            raise AnswerTooLarge(f"an answer of {n} bytes, more than {MAX_ANSWER_BYTES}", status)
        return status, headers, r.exactly(n)
    while not r.eof:  # the body ends with the connection (we sent Connection: close)
        if len(r.buf) > MAX_ANSWER_BYTES:
            raise AnswerTooLarge(f"an answer larger than {MAX_ANSWER_BYTES} bytes", status)
        r.more()
    if len(r.buf) > MAX_ANSWER_BYTES:
        raise AnswerTooLarge(f"an answer larger than {MAX_ANSWER_BYTES} bytes", status)
    return status, headers, bytes(r.buf)


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


__all__ = ["Abort", "Aborted", "Answer", "AnswerTooLarge", "MAX_ANSWER_BYTES", "Transport",
           "RateLimited"]
