# Shared by tests/bench/sessions/held and expiry (sourced, not run): a
# database of the test cluster per case, credentials, a leased per database,
# and sessions filled with leases by SQL (the fast way to hold many; what a
# holder does over HTTP is measured, not the set-up).
#
# Needs, set by the caller: state (a tests/harness/pgcluster state file),
# build (the build directory), work (a temporary folder).
. "$state"
export PATH=$PG_BIN:$PATH
digest=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
leased_pids=()
dbs=()

sessions_cleanup() {
  set +e
  for p in "${leased_pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  [ -n "${refresher_pid:-}" ] && kill "$refresher_pid" 2>/dev/null
  psql -X -q -d "$PG_URL" -c "ALTER SYSTEM RESET fsync" -c "ALTER SYSTEM RESET synchronous_commit" \
    -c "SELECT pg_reload_conf()" >/dev/null 2>&1
  for d in "${dbs[@]}"; do psql -X -q -d "$PG_URL" -c "DROP DATABASE IF EXISTS $d" >/dev/null 2>&1; done
  rm -rf "$work"
}

db_url() { printf '%s' "$PG_URL" | sed -E "s#^(postgres(ql)?://[^/]*/)[^?]*#\1$1#"; }
app_url() { db_url "$1" | sed 's/user=postgres/user=leased_app/'; }

# new_db NAME IDENTITIES: a copy of the migrated template with IDENTITIES
# free traffic identities (tenant bench, tests/bench/seed.sql) and leases
# allowed to live 12 hours (a held lease's own bound is its maximum lifetime)
new_db() {
  psql -X -q -d "$PG_URL" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1 TEMPLATE $PG_TEMPLATE"
  dbs+=("$1")
  psql -X -q -v ON_ERROR_STOP=1 -d "$(db_url "$1")" \
    -c "UPDATE lease.policy SET maximum_ttl_ms = 300000, maximum_lifetime_ms = 43200000"
  psql -X -q -d "$(db_url "$1")" -v n="$2" -v idem=1 -v hist=1 -v audit=1000 -f "$here/../seed.sql" >/dev/null
}

durable_on() {
  psql -X -q -d "$PG_URL" -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = on" \
    -c "SELECT pg_reload_conf()" >/dev/null
}

# credential DB PRINCIPAL TENANT: prints "credential_id token"
credential() {
  local out
  out=$("$build/leasectl" credential create --database-url "$(db_url "$1")" --principal "$2" \
    --client "cl_$2" --tenant "$3" --program bench --actor '*' --capability targets:lease \
    --description "tests/bench/sessions")
  printf '%s %s\n' "$(printf '%s' "$out" | grep -o '"credential_id":"[^"]*"' | cut -d'"' -f4)" \
    "$(printf '%s' "$out" | grep -o '"token":"lsk_[^"]*"' | cut -d'"' -f4)"
}

# start_leased VAR DB LOG [NAME=VALUE...]: starts leased on DB (as
# tests/bench/run and fleet/run start it: 8 threads, 8 connections, log
# level info as shipped, admission limits out of the way) and sets VAR to
# its URL (not in a subshell: its pid is kept for the cleanup)
start_leased() {
  local var=$1 db=$2 log=$3 port=""
  shift 3
  env $(env | sed -n 's/^\(LEASE_[A-Z_]*\)=.*/-u \1/p') \
    LEASE_DATABASE_URL="$(app_url "$db")" LEASE_LISTEN=127.0.0.1:0 LEASE_LOG_LEVEL=info \
    LEASE_RATE_LIMIT=1000000/s LEASE_SOURCE_RATE_LIMIT=1000000/s LEASE_MAX_INFLIGHT=4096 \
    LEASE_MAX_INFLIGHT_PER_CREDENTIAL=4096 LEASE_MAX_INFLIGHT_PER_TENANT=4096 \
    LEASE_HTTP_THREADS=8 LEASE_DB_POOL_SIZE=8 "$@" "$build/leased" >"$log" 2>&1 &
  leased_pids+=($!)
  for _ in $(seq 300); do
    port=$(grep -o 'listening on [0-9.]*:[0-9]*' "$log" 2>/dev/null | head -1 | sed 's/.*://') || true
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "leased did not start: $(tail -5 "$log")" >&2; exit 1; }
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
  printf -v "$var" '%s' "http://127.0.0.1:$port"
}

sql_serializable() { PGOPTIONS='-c default_transaction_isolation=serializable' psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# open_session DB TENANT PRINCIPAL CREDENTIAL_ID TTL_MS REQUEST_ID: prints its id
open_session() {
  sql_serializable -d "$(db_url "$1")" -c \
    "SELECT lease.session_open('$2','si-hold',$5,'$3','$4','worker','$6','$digest','2099-01-01T00:00:00Z',NULL,NULL,NULL) #>> '{session,session_id}'"
}

# fill_session DB TENANT PRINCIPAL CREDENTIAL_ID SESSION PREFIX N: acquires
# N leases in the session (the service's typed call with session_id, one
# transaction), targets PREFIX-1..N of tenant TENANT; fails unless every
# one answered lease_acquired
fill_session() {
  local got
  got=$(sql_serializable -d "$(db_url "$1")" -c \
    "SELECT count(*) FROM generate_series(1, $7) g,
            LATERAL lease.acquire_brief_typed(
              ROW('$2', 'bench', 'bench', '$6-' || g, 'bench', 'default', NULL, NULL)::lease.identity,
              ROW('si-hold', 'e' || g, 'j', NULL, 30000, NULL, NULL, '$3', 'cl_$3', '$4', 'worker', 'a$6-' || g, '$digest', '2099-01-01T00:00:00Z', NULL, NULL, NULL, '$5')::lease.acquire_request, true) r
      WHERE r ->> 'code' = 'lease_acquired'")
  [ "$got" = "$7" ] || { echo "session $5: $got of $7 leases acquired" >&2; return 1; }
}

# keep_alive_by_sql DB TENANT PRINCIPAL CREDENTIAL_ID FILE: every 5 s, one
# keep-alive of each session in FILE, in the background (refresher_pid):
# the sessions must outlive their filling, which takes longer than a TTL
keep_alive_by_sql() {
  local url
  url=$(db_url "$1")
  (
    while :; do
      sed "s/.*/SELECT lease.session_keepalive('&','$2','$3','$4','2099-01-01T00:00:00Z') ->> 'code';/" "$5" |
        sql_serializable -d "$url" | grep -v lease_renewed && { echo "a session was lost while filling" >&2; }
      sleep 5
    done
  ) &
  refresher_pid=$!
}

stop_keep_alive_by_sql() {
  kill "$refresher_pid" 2>/dev/null || true
  wait "$refresher_pid" 2>/dev/null || true
  refresher_pid=""
}

# p99 (ms) of the latency files given (microseconds, one a line)
p99_of() {
  cat "$@" | sort -n | awk '{ v[NR] = $1 } END { if (!NR) { print "nan"; exit }
    r = int(0.99 * NR + 0.999999999); if (r < 1) r = 1; printf "%.1f\n", v[r] / 1000 }'
}

field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
