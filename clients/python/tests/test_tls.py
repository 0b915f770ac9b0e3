"""https:// with a private CA (ca_file, as LEASE_CA_FILE), TLS terminated in
front of leased by socat as docs/operators.md describes: a hold, its watch
long-polled through TLS, and a client without the CA refused before
anything was sent."""
import socket
import subprocess
import tempfile
import time

import pytest

from leaseclient import BackendUnavailable, Client, document

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def sh(argv, cwd):
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True, timeout=60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def tls_front(leased):
    with tempfile.TemporaryDirectory() as d:
        sh(["openssl", "req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=leaseclient test CA"], d)
        sh(["openssl", "req", *EC, "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=localhost"], d)
        with open(f"{d}/san.ext", "w") as f:
            f.write("subjectAltName=DNS:localhost\n")
        sh(["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext"], d)
        port = free_port()
        proc = subprocess.Popen(
            ["socat", f"OPENSSL-LISTEN:{port},bind=127.0.0.1,cert={d}/server.crt,"
             f"key={d}/server.key,verify=0,fork,reuseaddr", f"TCP:127.0.0.1:{leased.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            end = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.5).close()
                    break
                except OSError:
                    assert time.monotonic() < end, "socat did not listen"
                    time.sleep(0.05)
            yield f"https://localhost:{port}", f"{d}/ca.crt"
        finally:
            proc.terminate()
            proc.wait(10)


def test_https_with_a_private_ca(leased, tokens, identity, tls_front):
    url, ca = tls_front
    c = Client(url, tokens["worker"], ca_file=ca)
    admin = Client(leased.url, tokens["admin"])
    with c.hold(identity(), ttl_ms=30000) as lease:
        lease.commit([document(f"py/tls/{lease.lease_id}", {"ok": True})])
        time.sleep(0.3)
        admin.force_release(lease.lease, reason="py tls")
        assert lease.lost.wait(3), "the watch through TLS did not report the end"
    with pytest.raises(BackendUnavailable) as e:
        Client(url, tokens["worker"]).acquire(identity(), deadline_ms=2000)
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value)
