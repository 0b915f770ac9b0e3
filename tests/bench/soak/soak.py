#!/usr/bin/env python3
"""Housekeeping soak (issue 40): leased under steady mixed load with the
retention shortened so that the purges apply inside the run.

Drives one leased against one database:
  * http_load clients: acquire + release cycles (each writes an idempotency
    row and an audit event per operation);
  * "abandoning" clients: acquire with a short TTL and never release, so
    that the sweep has leases to move to history.
Every sample it reads /metrics and the tables, and at the end it checks:
  1. no housekeeping step (expiry, purge) failed twice in a row: a failure
     is retried successfully at the next interval
     (leased_housekeeping_failure_streak_max);
  2. no lease stayed active more than --overdue-intervals (2) sweep
     intervals past its expiry (at every sample after the first two);
  3. once retention applies, no row stays --slack-intervals (5) past its
     retention, and no housekept table's size on disk grows: the mean of
     the last third of the run at most --tolerance above the third before
     (row counts are printed; they follow the request rate, which a shared
     machine varies);
and prints the figures (sizes, bytes per mutation, serialization failures
by statement when --pg-log is given).

Usage (a database migrated and with the login role leased_app; see
tests/bench/soak/run for the full 30-minute soak and tests/CMakeLists.txt
for the short form the suite runs):
  soak.py --db-url URL --service-url URL --leased BIN --leasectl BIN
          --http-load BIN [--seconds 180] [--clients 4] [--abandoners 2]
          [--sweep-interval-ms 1000] [--retention-ms 30000]
          [--sample-seconds 5] [--pg-log PATH] [--tolerance 0.2]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

TABLES = ["idempotency_keys", "audit_events", "history", "lease_index"]


def psql(url, sql):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"psql: {r.stderr.strip()} ({sql})")
    return r.stdout.strip()


def metrics(base):
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def post(base, token, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, {}
    except OSError:
        return 0, {}


class Abandoner(threading.Thread):
    """Acquires short leases on identities of its own and never releases."""

    def __init__(self, base, token, index, ttl_ms, stop):
        super().__init__(daemon=True)
        self.base, self.token, self.index, self.ttl_ms, self.stop = base, token, index, ttl_ms, stop
        self.acquired = 0

    def run(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            identity = {"tenant_id": "bench", "program_id": "bench", "target_namespace": "soak",
                        "target_id": f"abandon-{self.index}-{n}", "actor_name": "bench",
                        "workflow_name": "default"}
            status, _ = post(self.base, self.token, "/v1/leases/acquire",
                             {"request_id": f"ab-{self.index}-{n}-{time.time_ns()}",
                              "lock_identity": identity, "service_instance_id": "soak",
                              "execution_id": f"e-{n}", "job_id": "j", "ttl_ms": self.ttl_ms})
            if status == 200:
                self.acquired += 1
            self.stop.wait(0.05)


def start_leased(args, token_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASE_")}
    env.update({
        "LEASE_DATABASE_URL": args.service_url, "LEASE_LISTEN": "127.0.0.1:0",
        "LEASE_LOG_LEVEL": "info", "LEASE_RATE_LIMIT": "1000000/s",
        "LEASE_SOURCE_RATE_LIMIT": "1000000/s", "LEASE_MAX_INFLIGHT": "4096",
        "LEASE_MAX_INFLIGHT_PER_CREDENTIAL": "4096", "LEASE_MAX_INFLIGHT_PER_TENANT": "4096",
        "LEASE_SWEEP_INTERVAL_MS": str(args.sweep_interval_ms),
        "LEASE_SWEEP_BATCH": str(args.sweep_batch),
    })
    log = open(args.out + "/leased.log", "w")
    proc = subprocess.Popen([args.leased], env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        time.sleep(0.1)
        with open(args.out + "/leased.log") as f:
            m = re.search(r"listening on [0-9.]*:([0-9]+)", f.read())
        if m:
            return proc, "http://127.0.0.1:" + m.group(1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("leased did not start; see " + args.out + "/leased.log")


def sample(args, base, t0, interval_s):
    m = metrics(base)
    # Row counts are the statistics' live-tuple estimates, not count(*): a
    # count(*) of every table each sample scanned about a million rows, and
    # the paced soak's commits stalled for 150-290 ms at each sample (its own
    # observer effect, docs/operators.md "Housekeeping").
    rows = psql(args.db_url, " UNION ALL ".join(
        f"SELECT '{t}', n_live_tup, pg_total_relation_size('lease.{t}')"
        f" FROM pg_stat_user_tables WHERE relid = 'lease.{t}'::regclass"
        for t in TABLES) if not args.exact_counts else " UNION ALL ".join(
        f"SELECT '{t}', count(*), pg_total_relation_size('lease.{t}') FROM lease.{t}"
        for t in TABLES))
    tables = {}
    for line in rows.splitlines():
        name, count, size = line.split("|")
        tables[name] = (int(count), int(size))
    slack = f"interval '{args.slack_intervals * interval_s} seconds'"
    late_rows = psql(args.db_url, f"""
        SELECT 'idempotency_keys', count(*) FROM lease.idempotency_keys WHERE expires_at < now() - {slack}
        UNION ALL SELECT 'history', count(*) FROM lease.history, lease.policy p
         WHERE ended_at < now() - lease._ms(p.history_retention_ms) - {slack}
        UNION ALL SELECT 'lease_index', count(*) FROM lease.lease_index, lease.policy p
         WHERE created_at < now() - lease._ms(p.history_retention_ms + p.maximum_lifetime_ms) - {slack}
        UNION ALL SELECT 'audit_events', count(*) FROM lease.audit_events, lease.policy p
         WHERE occurred_at < now() - lease._ms(p.audit_retention_ms) - {slack}""")
    past = {line.split("|")[0]: int(line.split("|")[1]) for line in late_rows.splitlines()}
    overdue = int(psql(args.db_url,
                       "SELECT count(*) FROM lease.locks WHERE state = 'active' AND expires_at"
                       f" < now() - interval '{args.overdue_intervals * interval_s} seconds'"))
    return {"t": time.monotonic() - t0, "metrics": m, "tables": tables, "overdue": overdue,
            "past": past,
            "db_bytes": int(psql(args.db_url, "SELECT pg_database_size(current_database())"))}


def metric(m, name, **labels):
    key = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    return m.get(key)


def serialization_failures(pg_log, start_offset):
    """Serialization failures in the server log after start_offset, by statement."""
    if not pg_log or not os.path.exists(pg_log):
        return None
    counts = {}
    reasons = {}
    with open(pg_log, errors="replace") as f:
        f.seek(start_offset)
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if "could not serialize access" not in line:
            continue
        detail, stmt = "", ""
        for follow in lines[i + 1:i + 5]:
            if "DETAIL:" in follow and not detail:
                detail = re.sub(r"Reason code: ", "", follow.split("DETAIL:", 1)[1]).strip()
            if "STATEMENT:" in follow:
                stmt = follow.split("STATEMENT:", 1)[1].strip()
                break
        kind = ("housekeeping" if re.search(r"sweep_expired|purge_retention|expire_batch|"
                                            r"expired_candidates|check_namespace", stmt)
                else "lease traffic")
        counts[kind] = counts.get(kind, 0) + 1
        what = line.split("could not serialize access", 1)[1].strip()
        why = kind + ": " + what + (" / " + re.sub(r"[0-9]+", "N", detail) if detail else "")
        reasons[why] = reasons.get(why, 0) + 1
    return counts, reasons


def main():
    ap = argparse.ArgumentParser()
    # defaults from tests/clients/with_database, which the suite's short
    # form runs under
    env = os.environ.get
    ap.add_argument("--db-url", default=env("LEASE_TEST_DB_URL"))
    ap.add_argument("--service-url", default=env("LEASE_TEST_SERVICE_DB_URL"))
    ap.add_argument("--leased", default=env("LEASE_TEST_LEASED"))
    ap.add_argument("--leasectl", default=env("LEASE_TEST_LEASECTL"))
    ap.add_argument("--http-load", required=True)
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--identities", type=int, default=2000)
    ap.add_argument("--abandoners", type=int, default=2)
    ap.add_argument("--sweep-interval-ms", type=int, default=1000)
    ap.add_argument("--retention-ms", type=int, default=30000)
    ap.add_argument("--sweep-batch", type=int, default=500,
                    help="LEASE_SWEEP_BATCH: small, the purge must repeat its steps to keep up")
    ap.add_argument("--sample-seconds", type=float, default=5)
    ap.add_argument("--tolerance", type=float, default=0.2)
    ap.add_argument("--overdue-intervals", type=float, default=2,
                    help="a lease still active this many sweep intervals past its expiry is late")
    ap.add_argument("--slack-intervals", type=float, default=5,
                    help="rows this many sweep intervals past retention count as not purged")
    ap.add_argument("--segments", type=int, default=3,
                    help="run the load as this many consecutive http_load runs (p99 of each)")
    ap.add_argument("--rate", type=int, default=0,
                    help="operations/s in all (http_load --rate); 0: unpaced. Paced, the run"
                         " also checks that the rate was sustained and the p99 stayed flat")
    ap.add_argument("--p99-ratio", type=float, default=1.2,
                    help="with --rate: the largest last/first segment p99 allowed")
    ap.add_argument("--exact-counts", action="store_true",
                    help="count(*) each table at each sample (scans them; the default reads"
                         " the statistics' estimates)")
    ap.add_argument("--pg-log")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-assert", action="store_true",
                    help="report only (to measure a build without the housekeeping metrics)")
    args = ap.parse_args()
    for need in ("db_url", "service_url", "leased", "leasectl"):
        if not getattr(args, need):
            ap.error(f"--{need.replace('_', '-')} is required (or run under with_database)")
    args.out = args.out or f"/tmp/leased-soak-{os.getpid()}"
    os.makedirs(args.out, exist_ok=True)
    interval_s = args.sweep_interval_ms / 1000

    # Retention shortened so that it applies inside the run. The policy's
    # own rules: idempotency retention > maximum lifetime > minimum TTL,
    # history retention >= idempotency retention, audit >= history.
    r = args.retention_ms
    psql(args.db_url, "UPDATE lease.policy SET minimum_ttl_ms = 1000, default_ttl_ms = 2000,"
         f" maximum_ttl_ms = 5000, maximum_lifetime_ms = {r // 2},"
         f" idempotency_retention_ms = {r}, history_retention_ms = {r},"
         f" audit_retention_ms = {r}")
    cred = subprocess.run([args.leasectl, "credential", "create", "--database-url", args.db_url,
                           "--principal", "prn_soak", "--client", "client_soak", "--tenant", "bench",
                           "--program", "bench", "--actor", "*", "--capability", "targets:lease",
                           "--description", "tests/bench/soak"],
                          capture_output=True, text=True, check=True).stdout
    token = json.loads(cred)["token"]

    pg_log_offset = os.path.getsize(args.pg_log) if args.pg_log and os.path.exists(args.pg_log) else 0
    leased, base = start_leased(args, token)
    stop = threading.Event()
    samples = []
    load = None
    try:
        env = dict(os.environ, LEASE_TOKEN=token)
        # the load in --segments consecutive runs of http_load, so that the
        # latency of the first and the last can be compared
        seg_seconds = max(1, args.seconds // args.segments)
        segment_reports = []

        def start_segment(i):
            return subprocess.Popen([args.http_load, "--mode", "leased", "--url", base,
                                     "--clients", str(args.clients), "--seconds", str(seg_seconds),
                                     "--identities", str(args.identities), "--ttl-ms", "5000",
                                     "--tag", f"soak{i}"]
                                    + (["--rate", str(args.rate)] if args.rate else []),
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True)
        load = start_segment(0)
        segment = 0
        abandoners = [Abandoner(base, token, i, 1500, stop) for i in range(args.abandoners)]
        for a in abandoners:
            a.start()
        t0 = time.monotonic()
        while True:
            if load.poll() is not None:
                segment_reports.append(load.stdout.read().strip())
                segment += 1
                if segment >= args.segments:
                    break
                load = start_segment(segment)
            time.sleep(args.sample_seconds)
            s = sample(args, base, t0, interval_s)
            samples.append(s)
            print(f"t={s['t']:6.1f}s overdue={s['overdue']} past_retention={sum(s['past'].values())}"
                  f" db={s['db_bytes'] >> 20} MB " +
                  " ".join(f"{k}={v[0]}/{v[1] >> 10}kB" for k, v in s["tables"].items()),
                  flush=True)
        stop.set()
        # Two more intervals with the abandoned leases still to sweep.
        time.sleep(3 * interval_s + 1)
        final = sample(args, base, t0, interval_s)
    finally:
        stop.set()
        if load is not None and load.poll() is None:
            load.kill()
        leased.terminate()
        leased.wait(30)

    p99 = []
    for i, out in enumerate(segment_reports):
        line = out.splitlines()[-1] if out else "(no output)"
        print(f"http_load segment {i}:", line)
        m = re.search(r"p99_ms=([0-9.]+)", line)
        if m:
            p99.append(float(m.group(1)))
    failures = []
    if len(p99) >= 2:
        print(f"p99: first segment {p99[0]:.1f} ms, last {p99[-1]:.1f} ms, ratio {p99[-1] / p99[0]:.2f}")
    if args.rate:
        # paced: the rate must have been sustained (a cycle more than one
        # interval late is a sign it was not) and the p99 must stay flat
        for i, out in enumerate(segment_reports):
            kv = dict(f.split("=", 1) for f in (out.splitlines() or [""])[-1].split() if "=" in f)
            late, cycles = int(kv.get("late_cycles", -1)), int(kv.get("cycles", 0))
            if late < 0 or late > 0.01 * max(cycles, 1):
                failures.append(f"segment {i}: {late} of {cycles} cycles started late:"
                                f" {args.rate}/s is more than this machine sustains")
        if len(p99) < 2:
            failures.append("fewer than two segments reported a p99")
        elif p99[-1] > args.p99_ratio * p99[0]:
            failures.append(f"p99 grew {p99[-1] / p99[0]:.2f}x from the first segment to the"
                            f" last (at most {args.p99_ratio:g}x)")
    fm = final["metrics"]
    # 1. failures retried successfully within two intervals
    for step in ("expire", "purge"):
        streak = metric(fm, "leased_housekeeping_failure_streak_max", step=step)
        ok = metric(fm, "leased_housekeeping_successes_total", step=step)
        bad = metric(fm, "leased_housekeeping_failures_total", step=step)
        print(f"step {step}: {ok} successes, {bad} failures, longest failure streak {streak}")
        if streak is None:
            failures.append(f"{step}: leased exposes no leased_housekeeping_failure_streak_max")
        elif streak >= 2:
            failures.append(f"{step}: failed {streak:.0f} times in a row")
        if not ok:
            failures.append(f"{step}: never succeeded")
    print("sweep (old metrics): runs", fm.get("leased_sweep_runs_total"), "failures",
          fm.get("leased_sweep_failures_total"), "expired", fm.get("leased_sweep_expired_total"))
    # 2. every expired lease in history within two sweep intervals
    late = [(round(s["t"]), s["overdue"]) for s in samples + [final]
            if s["t"] > 2 * interval_s and s["overdue"] > 0]
    print(f"samples with leases active > {args.overdue_intervals:g} intervals past expiry:",
          late or "none")
    if late:
        failures.append(f"expired leases not in history within {args.overdue_intervals:g}"
                        f" intervals: {late[:5]}")
    expired_in_history = int(psql(args.db_url,
                                  "SELECT count(*) FROM lease.history WHERE state = 'expired'"))
    print("expired leases in history (within retention):", expired_in_history,
          "abandoned:", sum(a.acquired for a in abandoners))
    if sum(a.acquired for a in abandoners) and not expired_in_history:
        failures.append("no expired lease reached the history")
    # 3a. once retention applies, no row stays more than --slack-intervals
    #     past it (rate-independent: the purge keeps up)
    behind = [(round(s["t"]), {k: v for k, v in s["past"].items() if v})
              for s in samples if s["t"] > args.retention_ms / 1000 + 2 * interval_s
              and any(s["past"].values())]
    print(f"samples with rows > {args.slack_intervals:g} intervals past retention:", behind or "none")
    if behind:
        failures.append(f"rows past retention not purged: {behind[:5]}")
    # 3b. tables flat once retention applies: compare the mean row count of the
    #    last third of the samples taken after retention + 2 intervals with
    #    the third before it.
    settled = [s for s in samples if s["t"] > args.retention_ms / 1000 + 2 * interval_s + 5]
    third = len(settled) // 3
    for t in TABLES:
        if third < 1:
            failures.append("run too short for retention to apply")
            break
        before = [s["tables"][t][0] for s in settled[third:2 * third]]
        last = [s["tables"][t][0] for s in settled[2 * third:]]
        b, l = sum(before) / len(before), sum(last) / len(last)
        bb = sum(s["tables"][t][1] for s in settled[third:2 * third]) / len(before)
        lb = sum(s["tables"][t][1] for s in settled[2 * third:]) / len(last)
        print(f"table {t}: rows {b:.0f} -> {l:.0f}, bytes {bb / 1048576:.1f} -> {lb / 1048576:.1f} MB")
        # the target is the size on disk: it must not grow more
        # than --tolerance (rows are printed; they follow the request rate)
        if bb > 0 and lb - bb > args.tolerance * bb:
            failures.append(f"{t}: size grows once retention applies "
                            f"({bb / 1048576:.1f} -> {lb / 1048576:.1f} MB)")
    sf = serialization_failures(args.pg_log, pg_log_offset)
    if sf is not None:
        print("serialization failures in the server log:", sf[0], "reasons:", sf[1])
    if args.no_assert:
        print("(--no-assert)", failures)
        return 0
    for f in failures:
        print("FAIL:", f)
    print("soak:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
