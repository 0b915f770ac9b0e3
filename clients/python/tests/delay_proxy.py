"""A loopback HTTP proxy that holds back answers: for each request (the
client sends one per connection) it forwards the request to leased at once,
reads the whole answer, and passes it on only after the delay a rule gives
for that method and path. So the service acts on time and only the answer
is late, as on a slow network."""
import socket
import threading
import time
from typing import Callable, List


class DelayProxy:
    def __init__(self, upstream_port: int, delay_s: Callable[[str, str], float]) -> None:
        self.upstream_port = upstream_port
        self.delay_s = delay_s
        self.seen: List[str] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                body += chunk
            method, path = head.split(b" ")[:2]
            route = f"{method.decode()} {path.decode()}"
            self.seen.append(route)
            with socket.create_connection(("127.0.0.1", self.upstream_port)) as up:
                up.sendall(head + b"\r\n\r\n" + body)
                answer = b""
                while True:
                    chunk = up.recv(65536)
                    if not chunk:
                        break
                    answer += chunk
            time.sleep(self.delay_s(method.decode(), path.decode()))
            try:
                conn.sendall(answer)
            except OSError:
                pass
