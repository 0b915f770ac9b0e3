"""A loopback HTTP server that plays leased badly, for the client's bounds.

It answers an acquire (and anything a rule does not take) as leased would,
with a well-formed lease, so that a hold starts; a rule chosen per request
(method and path) then misbehaves: an answer whose head never comes, a body
trickled one byte every half second, a body of 256 MiB, JSON with the wrong
types, or a connection reset once the request has been read. It counts what
it saw and how many body bytes it managed to write."""
import datetime
import json
import socket
import struct
import threading
import time
from typing import Callable, Dict, List, Optional

Rule = Callable[["Request"], Optional[str]]

HUGE_BYTES = 256 * 1024 * 1024
TRICKLE_EVERY_S = 0.5


class Request:
    def __init__(self, method: str, path: str, body: Dict[str, object]) -> None:
        self.method, self.path, self.body = method, path, body


def _now_ms(offset_ms: int = 0) -> str:
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(milliseconds=offset_ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def lease_json(body: Dict[str, object], ttl_ms: int) -> Dict[str, object]:
    return {"lease_id": str(body.get("lease_id") or "lease_fake0001"), "fencing_token": 7,
            "state": "active", "ttl_ms": ttl_ms, "lock_identity": body.get("lock_identity"),
            "acquired_at": _now_ms(), "renewed_at": _now_ms(), "expires_at": _now_ms(ttl_ms),
            "service_instance_id": "fake", "execution_id": "exec_fake", "job_id": "job_fake",
            "trace_id": "0" * 32}


def session_json(path: str, ttl_ms: int) -> Dict[str, object]:
    """The session of /v1/sessions[/{id}/verb] as leased answers it."""
    parts = path.split("/")
    sid = parts[3] if len(parts) > 3 else "session_fake0001"
    return {"session_id": sid, "tenant_id": "tenant-main", "owner_principal_id": "prn_fake",
            "owner_credential_id": "key_fake", "service_instance_id": "fake", "ttl_ms": ttl_ms,
            "created_at": _now_ms(), "renewed_at": _now_ms(), "expires_at": _now_ms(ttl_ms),
            "state": "open"}


class MisbehavingServer:
    def __init__(self, rule: Rule, ttl_ms: int = 3000) -> None:
        self.rule = rule
        self.ttl_ms = ttl_ms
        self.seen: List[str] = []
        self.request_ids: List[str] = []
        self.body_bytes_sent = 0
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        """Stops listening: a connect from then on is refused (shutdown wakes
        the accepting thread, which close alone does not)."""
        self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed already
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                req = self._read(conn)
                if req is None:
                    return
                with self._lock:
                    self.seen.append(f"{req.method} {req.path}")
                    rid = req.body.get("request_id")
                    if isinstance(rid, str):
                        self.request_ids.append(rid)
                how = self.rule(req) or "leased"
                getattr(self, "_" + how)(conn, req)
        except OSError:
            pass  # the client gave up on us: what the tests want

    @staticmethod
    def _read(conn: socket.socket) -> Optional[Request]:
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("iso-8859-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            rest += chunk
        body = json.loads(rest) if rest else {}
        return Request(method, path, body)

    def _send(self, conn: socket.socket, status: int, env: Dict[str, object]) -> None:
        data = json.dumps(env).encode()
        conn.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)

    # what a rule may answer --------------------------------------------

    def _leased(self, conn: socket.socket, req: Request) -> None:
        """As leased: a success with a well-formed lease (a watch: after a while)."""
        if "/watch" in req.path:
            time.sleep(30)
        code = {"acquire": "lease_acquired", "renew": "lease_renewed",
                "release": "lease_released", "sessions": "lease_acquired",
                "keepalive": "lease_renewed", "close": "lease_released",
                }.get(req.path.rsplit("/", 1)[-1], "lease_inspected")
        env: Dict[str, object] = {"status": "success", "code": code,
                                  "correlation_id": "corr_fake"}
        if req.path.startswith("/v1/sessions"):
            env["session"] = session_json(req.path, self.ttl_ms)
            if req.path.endswith("/close"):
                env.update(leases_ended=0, more=False)
        elif req.path == "/v1/commits":
            env.update(code="commit_accepted", commit={
                "lease_id": req.body.get("lease_id"), "fencing_token": 7, "results": []})
        else:
            env["lease"] = lease_json(req.body, self.ttl_ms)
        self._send(conn, 200, env)

    def _slow_head(self, conn: socket.socket, req: Request) -> None:
        time.sleep(120)

    def _slow_body(self, conn: socket.socket, req: Request) -> None:
        body = json.dumps({"status": "success", "code": "lease_renewed",
                           "lease": lease_json(req.body, self.ttl_ms)}).encode()
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode())
        for i in range(len(body)):
            conn.sendall(body[i:i + 1])
            with self._lock:
                self.body_bytes_sent += 1
            time.sleep(TRICKLE_EVERY_S)

    def _huge(self, conn: socket.socket, req: Request, framed: bool = True) -> None:
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        if framed:
            head += f"Content-Length: {HUGE_BYTES}\r\n"
        conn.sendall((head + "\r\n").encode())
        block = b"{\"status\":\"success\"," + b" " * (1 << 20)
        left = HUGE_BYTES
        while left > 0:
            n = conn.send(block[:min(len(block), left)])
            left -= n
            with self._lock:
                self.body_bytes_sent += n

    def _huge_unframed(self, conn: socket.socket, req: Request) -> None:
        self._huge(conn, req, framed=False)

    def _wrong_types(self, conn: socket.socket, req: Request) -> None:
        lease = lease_json(req.body, self.ttl_ms)
        lease.update(lease_id=17, fencing_token="seven", state=["active"], ttl_ms="3000",
                     expires_at=12, renewed_at={"at": 1})
        self._send(conn, 200, {"status": "success", "code": "lease_acquired", "lease": lease,
                               "waited_ms": "none", "replayed": "yes"})

    def _wrong_session_types(self, conn: socket.socket, req: Request) -> None:
        session = session_json(req.path, self.ttl_ms)
        session.update(session_id=17, ttl_ms="3000", expires_at=12, state=["open"])
        self._send(conn, 200, {"status": "success", "code": "lease_renewed", "session": session})

    def _lease_instead_of_session(self, conn: socket.socket, req: Request) -> None:
        """A success that answers a lease where a session belongs."""
        self._send(conn, 200, {"status": "success", "code": "lease_renewed",
                               "lease": lease_json(req.body, self.ttl_ms)})

    def _session_closed(self, conn: socket.socket, req: Request) -> None:
        """A keep-alive's success naming the session closed: not a confirmation."""
        session = session_json(req.path, self.ttl_ms)
        session["state"] = "closed"
        self._send(conn, 200, {"status": "success", "code": "lease_renewed", "session": session})

    def _session_lost(self, conn: socket.socket, req: Request) -> None:
        self._send(conn, 409, {"status": "error", "code": "lease_lost", "retryable": False,
                               "msg": "the session is not open", "correlation_id": "corr_fake"})

    def _sessions_refused(self, conn: socket.socket, req: Request) -> None:
        """What leased on the Valkey backend answers a session route or an
        acquire naming session_id (src/protocol/store.c)."""
        self._send(conn, 400, {"status": "error", "code": "invalid_lease_request",
                               "retryable": False, "field": "session_id",
                               "msg": "sessions need the PostgreSQL backend",
                               "correlation_id": "corr_fake"})

    def _deadline_exceeded(self, conn: socket.socket, req: Request) -> None:
        """What leased answers a call whose deadline passed before it began
        (408): nothing happened, the call ran out of time."""
        self._send(conn, 408, {"status": "error", "code": "deadline_exceeded",
                               "retryable": True, "msg": "the deadline passed",
                               "correlation_id": "corr_fake"})

    def _bare_503(self, conn: socket.socket, req: Request) -> None:
        """A proxy's 503 page: no typed envelope."""
        data = b"<html>503 Service Unavailable</html>"
        conn.sendall(f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/html\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                     + data)

    def _wrong_error_types(self, conn: socket.socket, req: Request) -> None:
        self._send(conn, 409, {"status": "error", "code": "lease_conflict", "msg": ["held"],
                               "retry_after_ms": "soon", "field": 7, "retryable": "maybe",
                               "correlation_id": {"id": 1}})

    def _reset(self, conn: socket.socket, req: Request) -> None:
        # SO_LINGER 0: close() sends RST, after the request was read whole
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
