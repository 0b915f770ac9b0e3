"""Real leased processes and credentials for the client tests, the way
tests/harness/leased_proc.c makes them for the C tests: leased on a free
loopback port (or a given one, to restart in place), credentials through
``leasectl credential create``. Environment from tests/clients/with_database.
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request
from typing import Dict, List, Optional, Sequence

TENANT = "tenant-main"
PROGRAM = "program-a"


def need(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run through tests/clients/with_database")
    return value


def on_valkey() -> bool:
    """The suite runs against leased on Valkey (tests/clients/with_database
    with LEASE_TEST_STORE=valkey): the store URL is redis://."""
    return os.environ.get("LEASE_TEST_STORE") == "valkey"


def store_setting(url: str) -> Dict[str, str]:
    """leased's store setting for url: LEASE_STORE_URL for a redis:// or
    valkey:// URL (docs/config.md), else LEASE_DATABASE_URL."""
    if url.startswith(("redis://", "valkey://")):
        return {"LEASE_STORE_URL": url}
    return {"LEASE_DATABASE_URL": url}


def _clean_env(extra: Dict[str, str]) -> Dict[str, str]:
    # no LEASE_* of the caller's reaches the program under test
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASE_")}
    env.update(extra)
    return env


class LeasedProc:
    def __init__(self, extra_env: Optional[Dict[str, str]] = None, port: int = 0,
                 database_url: Optional[str] = None, wait_ready: bool = True) -> None:
        self.extra_env = dict(extra_env or {})
        self.database_url = database_url or need("LEASE_TEST_SERVICE_DB_URL")
        self.log_path = tempfile.mkstemp(prefix="leased-py-", suffix=".log")[1]
        self.port = port
        self.proc: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
        self.killed = False  # by kill9, on purpose
        self.start(wait_ready)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait_ready: bool = True) -> None:
        env = _clean_env({
            **store_setting(self.database_url),
            "LEASE_LISTEN": f"127.0.0.1:{self.port}",
            "LEASE_LOG_LEVEL": "info",
            "LEASE_HEALTH_INTERVAL_MS": "200",
            **self.extra_env,
        })
        self.killed = False
        log = open(self.log_path, "ab")
        offset = log.tell()
        self.proc = subprocess.Popen([need("LEASE_TEST_LEASED")], env=env, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        end = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"leased exited before listening:\n{self.log()}")
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                m = re.search(rb"listening on [^\s(]*:(\d+)", f.read())
            if m:
                self.port = int(m.group(1))
                break
            if time.monotonic() > end:
                raise RuntimeError(f"leased did not listen within 15 s:\n{self.log()}")
            time.sleep(0.02)
        if not wait_ready:
            return
        end = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"leased was not ready:\n{self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.killed = True

    def restart(self) -> None:
        """Starts again on the same port (after kill9 or stop)."""
        self.start(True)

    def stop(self) -> None:
        """Stops leased and removes its log (kept with LEASE_TEST_KEEP_LOGS set).
        Raises, keeping the log, when leased had died on its own, did not
        exit 0 on SIGTERM, or a sanitizer reported something."""
        status = None
        if self.proc is not None:
            died = self.proc.poll() is not None and not self.killed
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    status = self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
                    status = -9
            log = self.log()
            if died or status not in (None, 0) or "Sanitizer" in log or "runtime error:" in log:
                raise RuntimeError(f"leased ended badly (status {status}, died on its own: "
                                   f"{died}); log {self.log_path}:\n{log[-4000:]}")
        if not os.environ.get("LEASE_TEST_KEEP_LOGS"):
            try:
                os.unlink(self.log_path)
            except OSError:
                pass


def credential(principal: str, *, program: str = PROGRAM, capabilities: Sequence[str] = (
        "targets:lease", "targets:read"), admin: bool = False,
        actors: Sequence[str] = ("*",)) -> str:
    """A new credential's token (printed once by leasectl)."""
    argv: List[str] = [need("LEASE_TEST_LEASECTL"), "credential", "create",
                       "--database-url", need("LEASE_TEST_DB_URL"), "--principal", principal,
                       "--client", "cl_" + principal, "--tenant", TENANT, "--program", program]
    for a in actors:
        argv += ["--actor", a]
    for c in capabilities:
        argv += ["--capability", c]
    if admin:
        argv.append("--admin")
    out = subprocess.run(argv, env=_clean_env({}), capture_output=True, text=True, timeout=30)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            if "token" in obj:
                return str(obj["token"])
    raise RuntimeError(f"credential create failed ({out.returncode}): {out.stderr}")


def psql(sql: str) -> str:
    """Runs SQL as the database owner; returns the unaligned output."""
    out = subprocess.run(["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                          need("LEASE_TEST_DB_URL"), "-c", sql],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"psql failed: {out.stderr}")
    return out.stdout.strip()


class RowLock:
    """Holds a row lock in a psql session of its own until released."""

    def __init__(self, sql: str) -> None:
        self.proc = subprocess.Popen(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
                                      need("LEASE_TEST_DB_URL")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"BEGIN;\n{sql};\n\\echo locked\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.strip() == "locked":
                return
        raise RuntimeError("the row lock was not taken")

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("ROLLBACK;\n\\q\n")
        self.proc.stdin.flush()
        self.proc.stdin.close()
        self.proc.wait(30)
