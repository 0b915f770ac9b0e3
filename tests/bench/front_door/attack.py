#!/usr/bin/env python3
"""Attacks on leased's front door (issue 34), each beside a victim tenant.

  attack.py MODE PORT TOKEN_A TOKEN_B SECONDS [--probe-port P] [--attacker-nice N]

MODE (the attacker is tenant A or anonymous; the victim is tenant B, one
request at a time from its own address, 127.0.0.2, on a kept-alive
connection as a fleet's client does, each acquire of a target of its own,
so that every answer should be a 200):
  idle     4 addresses x 256 connections: one GET /healthz each, then idle
  batches  tenant A keeps 200 renew-batches of 100 renewals outstanding
  flood    tenant A sends renew-batches of 100 unknown leases from 4
           connections (every item lease_lost)
  probes   64 connections (8 from each of 8 addresses) send a request head
           to the probe listener one line every 2 s; the victim is /healthz
           there
  cpu      a control: the attacker's process burns one core and sends
           nothing (the floor that an attacker on the same 2 cores sets)

Prints one line: the victim's p50, p99 and max in ms, its answers by
status, the attacker's answers by status. Bounded: SECONDS of attack, then
everything is closed.
"""
import json
import os
import socket
import sys
import threading
import time

mode, port, token_a, token_b, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
probe_port = int(sys.argv[sys.argv.index("--probe-port") + 1]) if "--probe-port" in sys.argv else 0
stop = time.monotonic() + secs
attacker = {}
lock = threading.Lock()


def count(d, k):
    with lock:
        d[k] = d.get(k, 0) + 1


def ident(tenant, target):
    return {"tenant_id": tenant, "program_id": "bench", "target_namespace": "ns",
            "target_id": target, "actor_name": "a", "workflow_name": "w"}


def request(sock, method, path, token=None, body=None, keep=True):
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: leased\r\n"
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    if not keep:
        head += "Connection: close\r\n"
    sock.sendall(head.encode() + b"\r\n" + data)


def read_answer(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return 0, b""
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ")[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(rest) < length:
        d = sock.recv(65536)
        if not d:
            break
        rest += d
    return status, rest


def connect(src, p=None):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", p or port))
    return s


def call(src, method, path, token=None, body=None, p=None):
    try:
        s = connect(src, p)
        request(s, method, path, token, body, keep=False)
        st, data = read_answer(s)
        s.close()
        return st, data
    except OSError:
        return 0, b""


def victim():
    # B as a fleet's client is: one kept-alive connection, made again when
    # it is closed (the time to connect again counts); a probe connects
    # anew each time, as kubelet does
    lat, answers = [], {}
    conn = None
    i = 0
    while time.monotonic() < stop:
        t0 = time.monotonic()
        if mode == "probes":
            st, _ = call("127.0.0.2", "GET", "/healthz", p=probe_port)
        else:
            body = {"request_id": f"victim-{i}-{time.time_ns()}", "lock_identity": ident("tenant-b", f"v-{i}"),
                    "service_instance_id": "victim", "execution_id": "e", "job_id": "j"}
            st = 0
            for _ in range(2):  # a kept-alive connection the server closed: once more on a new one
                try:
                    if conn is None:
                        conn = connect("127.0.0.2")
                    request(conn, "POST", "/v1/leases/acquire", token_b, body)
                    st, _ = read_answer(conn)
                except OSError:
                    st = 0
                if st:
                    break
                if conn is not None:
                    conn.close()
                conn = None
        lat.append((time.monotonic() - t0) * 1000)
        answers[st] = answers.get(st, 0) + 1
        i += 1
        time.sleep(0.05)
    lat.sort()
    return lat, answers


def attack_idle():
    held = []
    for a in range(4):
        for _ in range(256):
            try:
                s = connect(f"127.0.1.{a + 10}")
                request(s, "GET", "/healthz")
                st, _ = read_answer(s)
                count(attacker, st)
                held.append(s)
            except OSError:
                count(attacker, 0)
    while time.monotonic() < stop:
        time.sleep(0.1)
    for s in held:
        s.close()


def attack_batches():
    # one lease of A's own, renewed 100 times in each of 200 outstanding batches
    st, data = call("127.0.1.20", "POST", "/v1/leases/acquire", token_a,
                    {"request_id": f"a-own-{time.time_ns()}", "lock_identity": ident("tenant-a", "a-own"),
                     "service_instance_id": "attacker", "execution_id": "e", "job_id": "j",
                     "ttl_ms": 300000})
    lease = json.loads(data).get("lease", {}) if st == 200 else {}
    items = [{"request_id": f"r-{k}", "lock_identity": ident("tenant-a", "a-own"),
              "lease_id": lease.get("lease_id", "missing"), "fencing_token": lease.get("fencing_token", 1),
              "service_instance_id": "attacker"} for k in range(100)]

    def one(n):
        k = 0
        while time.monotonic() < stop:
            body = {"renewals": [dict(it, request_id=f"r-{n}-{k}-{j}") for j, it in enumerate(items)],
                    "deadline_ms": 20000}
            st2, _ = call("127.0.1.20", "POST", "/v1/leases/renew-batch", token_a, body)
            count(attacker, st2)
            k += 1
    ts = [threading.Thread(target=one, args=(n,)) for n in range(200)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def attack_flood():
    def one(n):
        k = 0
        while time.monotonic() < stop:
            body = {"renewals": [{"request_id": f"u-{n}-{k}-{j}", "lock_identity": ident("tenant-a", f"u-{j}"),
                                  "lease_id": f"lease_unknown{n}{k}{j}", "fencing_token": 1,
                                  "service_instance_id": "attacker"} for j in range(100)]}
            st, _ = call("127.0.1.30", "POST", "/v1/leases/renew-batch", token_a, body)
            count(attacker, st)
            k += 1
    ts = [threading.Thread(target=one, args=(n,)) for n in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def attack_probes():
    conns = []
    for a in range(8):
        for _ in range(8):
            try:
                s = connect(f"127.0.2.{a + 10}", probe_port)
                s.sendall(b"GET /healthz HTTP/1.1\r\n")
                conns.append((s, f"127.0.2.{a + 10}"))
            except OSError:
                count(attacker, 0)
    line = 0
    while time.monotonic() < stop:
        time.sleep(2)
        line += 1
        for i, (s, src) in enumerate(conns):
            try:
                s.sendall(f"X-Trickle-{line}: x\r\n".encode())
            except OSError:
                count(attacker, "closed")
                try:  # reconnect at once, as an attacker would
                    n = connect(src, probe_port)
                    n.sendall(b"GET /healthz HTTP/1.1\r\n")
                    conns[i] = (n, src)
                except OSError:
                    pass
    for s, _ in conns:
        s.close()


def attack_cpu():
    # a control, not an attack: the attacker's process only burns the CPU
    # (one core, as the batches attacker's interpreter does), so B's
    # figures under it are the floor that co-location alone sets
    while time.monotonic() < stop:
        pass


attacks = {"cpu": attack_cpu, "idle": attack_idle, "batches": attack_batches, "flood": attack_flood, "probes": attack_probes}
# The attacker runs in a process of its own: its threads must not slow the
# victim's measurements (one interpreter lock between them would).
rd, wr = os.pipe()
child = os.fork()
if child == 0:
    os.close(rd)
    # --attacker-nice N: the attacker's process yields the CPU to leased,
    # Postgres and the victim, as an attacker on another host would not
    # take their cores (on this 2-core machine it otherwise takes one)
    if "--attacker-nice" in sys.argv:
        os.nice(int(sys.argv[sys.argv.index("--attacker-nice") + 1]))
    attacks[mode]()
    os.write(wr, json.dumps({str(k): v for k, v in attacker.items()}, sort_keys=True).encode())
    os._exit(0)
os.close(wr)
time.sleep(1.0)  # the attack is in place
lat, answers = victim()
report = b""
while True:
    d = os.read(rd, 65536)
    if not d:
        break
    report += d
os.waitpid(child, 0)
if not lat:
    print(f"mode={mode} victim: no request made")
    sys.exit(1)
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print(f"mode={mode} seconds={secs:.0f} victim_requests={len(lat)} p50_ms={p(0.5):.1f} p99_ms={p(0.99):.1f} "
      f"max_ms={lat[-1]:.1f} victim_answers={json.dumps(answers, sort_keys=True)} "
      f"attacker_answers={report.decode() or '{}'}")
