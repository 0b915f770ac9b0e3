"""A holder frozen past its TTL (SIGSTOP of a child process holding the
lease, leased and Postgres up throughout) is told what happened, the same
way every time: the lease is ``lost`` (``lease_lost``), the service having
expired it, never ``unconfirmed``/``lease_backend_unavailable``, which would
name an outage that did not happen."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(os.environ.get("FROZEN_ROUNDS", "3"))

_HOLDER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from leaseclient import Client, Identity
c = Client(sys.argv[2], sys.argv[3])
with c.hold(Identity(**json.loads(sys.argv[4])), ttl_ms=2000,
            watch=sys.argv[5] == "watch") as lease:
    print("held", lease.lease_id, flush=True)
    lost = lease.lost.wait(30)
    print(json.dumps({"lost": lost, "reason": lease.reason, "code": lease.code,
                      "detail": getattr(lease, "detail", None)}), flush=True)
"""


def _freeze_once(url: str, token: str, ident: dict, watch: str) -> dict:
    from leaseclient import Client
    # stderr kept: a holder that ends without its answer is reported with
    # its exit status and what it wrote (seen once under a loaded machine:
    # an empty line, nothing else to go on)
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, PROJECT, url, token,
                              json.dumps(ident), watch], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stderr is not None
        held = child.stdout.readline()
        assert held.startswith("held ")
        lease_id = held.split()[1]
        time.sleep(0.3)
        child.send_signal(signal.SIGSTOP)
        # frozen until the service itself answers that the lease expired
        # (inspect: state "expired", past its expires_at; the holder's own
        # local expiry, reckoned from before each call was sent, is earlier),
        # bounded: it must happen within a few TTLs
        frozen = time.monotonic()
        observer = Client(url, token)
        while observer.inspect(lease_id).state == "active":
            assert time.monotonic() - frozen < 15, "the service did not expire the frozen lease"
            time.sleep(0.1)
        state = observer.inspect(lease_id).state
        frozen = time.monotonic() - frozen
        child.send_signal(signal.SIGCONT)
        line = child.stdout.readline()
        if not line:
            status = child.wait(30)
            pytest.fail(f"the holder ended without its answer: exit status {status}, "
                        f"stderr: {child.stderr.read()!r}")
        out = json.loads(line)
        assert child.wait(30) == 0
        out["frozen_s"], out["state_when_thawed"] = frozen, state
        return out
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("watch", ["watch", "no-watch"])
def test_a_holder_frozen_past_its_ttl_is_told_the_lease_was_lost(leased, tokens, identity, watch):
    """With the watch, whichever of the watch and the renewer speaks first;
    without it, the renewer alone (it asks leased what became of the lease)."""
    seen = []
    for _ in range(ROUNDS):
        i = identity()
        ident = dict(tenant_id=i.tenant_id, program_id=i.program_id,
                     target_namespace=i.target_namespace, target_id=i.target_id,
                     actor_name=i.actor_name, workflow_name=i.workflow_name)
        seen.append(_freeze_once(leased.url, tokens["worker"], ident, watch))
    for s in seen:
        print(f"\n{watch}: frozen {s['frozen_s']:.1f} s under a 2 s TTL, until the service "
              f"answered {s['state_when_thawed']!r}: {s['reason']} ({s['code']}): {s['detail']}")
    assert all(s["state_when_thawed"] == "expired" for s in seen)
    assert all(s["lost"] for s in seen)
    assert [(s["reason"], s["code"]) for s in seen] == [("lost", "lease_lost")] * ROUNDS


def test_a_stall_seen_before_the_local_expiry_is_not_an_outage(identity):
    """The renewer reaching the cancel point with no renewal tried (the
    process did not run in time) while the local expiry is still ahead:
    ``unconfirmed``/``deadline_exceeded`` at once, nothing asked (the client
    points at a port nothing listens on)."""
    from leaseclient import Client, HeldLease, LeaseRecord
    from leaseclient import schedule
    lease = LeaseRecord(identity=identity(), lease_id="lease_stall", fencing_token=1, ttl_ms=3000)
    window = schedule.plan(time.monotonic() - 2.8, 3000)  # C 2.7 s, E 3.0 s after S
    held = HeldLease(Client("http://127.0.0.1:9", "lsk_x"), lease, window,
                     service_instance_id="h-1", ttl_ms=3000, watch=False,
                     watch_wait_ms=30000, margin_ms=0)
    held._cancel_point()
    print(f"\nstalled before the local expiry: {held.reason} ({held.code}): {getattr(held, 'detail', None)}")
    assert held.lost.is_set() and (held.reason, held.code) == ("unconfirmed", "deadline_exceeded")
