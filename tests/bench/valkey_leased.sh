# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # sets its caller's variables; $root is the caller's
# Sourced by tests/bench/run (its http_valkey case), tests/bench/valkey_split
# and tests/bench/valkey_rounds: the throwaway world they measure, started
# one way so that their figures are of the same leased. A redis-server
# (tests/harness/valkeyserver: appendonly yes, appendfsync always, as
# leased requires), migrated and given the bench credential by the real
# leasectl, and leased on it with the benchmark's limits (rates and
# in-flight bounds far above the load, so that the load measures the path,
# not the door), every other LEASE_ variable of the calling shell unset.
#
#   valkey_leased_start WORK BUILD_DIR DESCRIPTION [NAME=VALUE...]
#     NAME=VALUE: more of leased's environment (e.g. LEASE_VALKEY_COMBINE_ITEMS=1)
#
# Sets valkey_state (the server's, for valkeyserver stop), valkey_redis_url,
# valkey_redis_pid, valkey_token (the credential's bearer token),
# valkey_leased_pid and valkey_url (leased's base URL). The caller stops
# leased and the server in its own cleanup, started or not. On a failure it
# says what failed on stderr and returns 1 (each step checked here: a caller
# may call it in a condition, where set -e does not apply).
valkey_leased_start() {
  local work=$1 build_dir=$2 description=$3 port="" _
  shift 3
  valkey_state=$work/valkey.state
  "$root/tests/harness/valkeyserver" start "$valkey_state" >"$work/valkey.log" 2>&1 ||
    { echo "redis-server did not start: $(tail -n 5 "$work/valkey.log")" >&2; return 1; }
  valkey_redis_url=redis://127.0.0.1:$("$root/tests/harness/valkeyserver" port "$valkey_state")
  valkey_redis_pid=$(redis-cli -u "$valkey_redis_url" INFO server | tr -d '\r' | sed -n 's/^process_id://p')
  "$build_dir/leasectl" migrate --database-url "$valkey_redis_url" >"$work/valkey-migrate.log" 2>&1 ||
    { echo "leasectl migrate on Valkey: $(tail -n 5 "$work/valkey-migrate.log")" >&2; return 1; }
  valkey_token=$("$build_dir/leasectl" credential create --database-url "$valkey_redis_url" \
    --principal prn_bench --client client_bench --tenant bench --program bench --actor '*' \
    --capability targets:lease --description "$description" |
    grep -o '"token":"lsk_[^"]*"' | cut -d'"' -f4) || true
  [ -n "$valkey_token" ] || { echo "leasectl credential create on Valkey gave no token" >&2; return 1; }
  # port 0: leased picks a free port and logs it (no race for the port)
  : >"$work/leased-valkey.log"
  # shellcheck disable=SC2046 # one "-u NAME" per LEASE_ variable of this shell
  env $(env | sed -n 's/^\(LEASE_[A-Z_]*\)=.*/-u \1/p') \
    LEASE_STORE_URL="$valkey_redis_url" LEASE_LISTEN=127.0.0.1:0 LEASE_LOG_LEVEL=info \
    LEASE_RATE_LIMIT=1000000/s LEASE_SOURCE_RATE_LIMIT=1000000/s LEASE_MAX_INFLIGHT=4096 \
    LEASE_MAX_INFLIGHT_PER_CREDENTIAL=4096 LEASE_MAX_INFLIGHT_PER_TENANT=4096 \
    "$@" "$build_dir/leased" >"$work/leased-valkey.log" 2>&1 &
  valkey_leased_pid=$!
  for _ in $(seq 300); do
    port=$(grep -o 'listening on [0-9.]*:[0-9]*' "$work/leased-valkey.log" | head -1 | sed 's/.*://') || true
    [ -n "$port" ] && break
    kill -0 "$valkey_leased_pid" 2>/dev/null ||
      { echo "leased on Valkey exited: $(tail -n 5 "$work/leased-valkey.log")" >&2; return 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "leased on Valkey did not listen within 30 s" >&2; return 1; }
  valkey_url=http://127.0.0.1:$port
  for _ in $(seq 300); do
    curl -sf "$valkey_url/readyz" >/dev/null && return 0
    sleep 0.1
  done
  echo "leased on Valkey is not ready: $(curl -s "$valkey_url/readyz")" >&2
  return 1
}
