#!/usr/bin/env python3
# Hostile load, slowloris (issue 10): N connections from 127.0.0.1 trickle a
# header line every second and reconnect as soon as they are closed; a client
# on 127.0.0.2 measures /healthz and an authenticated inspect meanwhile.
#   tests/bench/hostile_slowloris.py PORT TOKEN N SECONDS
import socket, sys, time, selectors, statistics, json
port, token, n, secs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
sel = selectors.DefaultSelector()
conns = {}
stats = {"refused429": 0, "timeout408": 0, "other": 0, "opened": 0}
def open_one():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.setblocking(False)
    try: s.connect(("127.0.0.1", port))
    except BlockingIOError: pass
    conns[s] = {"sent": 0, "t": time.time()}
    sel.register(s, selectors.EVENT_READ)
    stats["opened"] += 1
for _ in range(n): open_one()
time.sleep(0.2)
for s in list(conns):
    try: s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    except OSError: pass
lat_h, lat_i, errs = [], [], 0
body = json.dumps({"lock_identity": {"tenant_id": "tenant-main", "program_id": "program-a", "target_namespace": "n", "target_id": "t", "actor_name": "a", "workflow_name": "w"}}).encode()
def legit(path, auth):
    global errs
    t0 = time.time()
    try:
        c = socket.socket(); c.bind(("127.0.0.2", 0)); c.settimeout(10); c.connect(("127.0.0.1", port))
        if auth:
            c.sendall(b"POST /v1/leases/inspect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode() + b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        else:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            d = c.recv(65536)
            if not d: break
            data += d
        c.close()
        st = int(data.split(b" ")[1])
        if st not in (200, 404): errs += 1
    except Exception as e:
        errs += 1
    return (time.time() - t0) * 1000
end = time.time() + secs; last_trickle = time.time()
while time.time() < end:
    for key, _ in sel.select(timeout=0.05):
        s = key.fileobj
        try: d = s.recv(4096)
        except OSError: d = b""
        if b" 429 " in d[:20]: stats["refused429"] += 1
        elif b" 408 " in d[:20]: stats["timeout408"] += 1
        elif d: stats["other"] += 1
        sel.unregister(s); s.close(); del conns[s]
        open_one()  # the attacker comes straight back
    if time.time() - last_trickle > 1.0:
        for s, st in list(conns.items()):
            try: s.send(b"X-T%d: v\r\n" % st["sent"]); st["sent"] += 1
            except OSError: pass
        last_trickle = time.time()
    lat_h.append(legit("/healthz", False))
    lat_i.append(legit("/v1/leases/inspect", True))
def q(v, p): v = sorted(v); return v[min(len(v)-1, int(len(v)*p))]
print(f"trickling connections kept open: {n}; connections opened in all: {stats['opened']}; answered 429 at once: {stats['refused429']}; answered 408: {stats['timeout408']}; other: {stats['other']}")
print(f"127.0.0.2 /healthz: {len(lat_h)} requests, p50 {q(lat_h,.5):.1f} ms, p99 {q(lat_h,.99):.1f} ms, max {max(lat_h):.1f} ms")
print(f"127.0.0.2 inspect (authenticated, database): {len(lat_i)} requests, p50 {q(lat_i,.5):.1f} ms, p99 {q(lat_i,.99):.1f} ms, max {max(lat_i):.1f} ms; failures {errs}")
