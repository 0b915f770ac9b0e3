#!/usr/bin/env python3
# Hostile load, bad tokens (issue 10): random well-formed tokens from
# 127.0.0.1 on THREADS keep-alive connections for SECONDS; a client on
# 127.0.0.2 (token TOKEN) measures an inspect meanwhile. Prints counts and
# latencies as JSON; measure database cost with pg_stat_database (README).
#   tests/bench/hostile_auth_flood.py PORT TOKEN SECONDS THREADS
import socket, sys, time, threading, random, string, json
port, token, secs, threads = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
b32 = "abcdefghijklmnopqrstuvwxyz234567"; b64 = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
def rnd_token():
    return "lsk_key_" + "".join(random.choice(b32) for _ in range(26)) + "_" + "".join(random.choice(b64) for _ in range(42)) + random.choice("AEIMQUYcgkosw048")
counts = {"401": 0, "429": 0, "other": 0}
lock = threading.Lock(); stop = time.time() + secs
def read_resp(s, buf):
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d: raise EOFError
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    cl = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(rest) < cl:
        d = s.recv(65536)
        if not d: raise EOFError
        rest += d
    return int(head.split(b" ")[1]), rest[cl:]
def flood():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.connect(("127.0.0.1", port)); buf = b""
    while time.time() < stop:
        s.sendall(b"POST /v1/leases/inspect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + rnd_token().encode() + b"\r\nContent-Length: 2\r\n\r\n{}")
        st, buf = read_resp(s, buf)
        with lock: counts[str(st) if st in (401, 429) else "other"] += 1
ths = [threading.Thread(target=flood) for _ in range(threads)]
for t in ths: t.start()
body = json.dumps({"lock_identity": {"tenant_id": "tenant-main", "program_id": "program-a", "target_namespace": "n", "target_id": "t", "actor_name": "a", "workflow_name": "w"}}).encode()
lat = []; fails = 0
c = socket.socket(); c.bind(("127.0.0.2", 0)); c.connect(("127.0.0.1", port)); buf = b""
while time.time() < stop:
    t0 = time.time()
    c.sendall(b"POST /v1/leases/inspect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    st, buf = read_resp(c, buf)
    lat.append((time.time() - t0) * 1000)
    if st != 404: fails += 1
    time.sleep(0.02)
for t in ths: t.join()
lat.sort()
print(json.dumps({"rejected_401": counts["401"], "rejected_429": counts["429"], "other": counts["other"], "legit_requests": len(lat), "legit_failures": fails, "legit_p50_ms": round(lat[len(lat)//2], 2), "legit_p99_ms": round(lat[int(len(lat)*.99)], 2)}))
