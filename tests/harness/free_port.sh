# shellcheck shell=bash
# free_port: prints a TCP port on 127.0.0.1 that nothing has bound, chosen
# below the kernel's ephemeral range (net.ipv4.ip_local_port_range). A port
# inside that range can be taken by any outgoing connection (a client of the
# embedded Valkey, of Postgres) between the choice and the server's bind:
# that made a CI run's leased fail with "Address already in use". Below the
# range only another listener can take it, and the bind check sees those.
#
#   . tests/harness/free_port.sh; port=$(free_port)
free_port() {
  python3 - <<'PY'
import random, socket
with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    low = int(f.read().split()[0])
top = low if low > 12000 else 32768
for _ in range(500):
    port = random.randrange(10000, top)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("free_port: no free port below %d" % top)
PY
}
