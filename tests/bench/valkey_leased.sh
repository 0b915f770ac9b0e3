# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # sets its caller's variables; $root is the caller's
# Sourced by tests/bench/valkey_split and tests/bench/valkey_rounds: the
# throwaway world both measure, started one way so that their figures are
# of the same leased. A redis-server (tests/harness/valkeyserver:
# appendonly yes, appendfsync always, as leased requires), migrated and
# given the bench credential by the real leasectl, and leased on it with
# tests/bench/run's limits (rates and in-flight bounds far above the load,
# so that the load measures the path, not the door), every other LEASE_
# variable of the calling shell unset.
#
#   valkey_leased_start WORK BUILD_DIR DESCRIPTION [NAME=VALUE...]
#     (NAME=VALUE: more of leased's environment, e.g. LEASE_VALKEY_COMBINE_ITEMS=1)
#   sets vport, url, redis_pid, token, lport and leased_pid; the caller
#   stops leased (kill "$leased_pid") and the server
#   ("$root/tests/harness/valkeyserver" stop WORK/valkey.state) in its own
#   cleanup. Needs $root and tests/harness/free_port.sh sourced.
valkey_leased_start() {
  local work=$1 build_dir=$2 description=$3
  shift 3
  "$root/tests/harness/valkeyserver" start "$work/valkey.state" >"$work/valkey.log" 2>&1 ||
    { cat "$work/valkey.log" >&2; return 1; }
  vport=$("$root/tests/harness/valkeyserver" port "$work/valkey.state")
  url=redis://127.0.0.1:$vport
  redis_pid=$(redis-cli -p "$vport" INFO server | tr -d '\r' | sed -n 's/^process_id://p')
  "$build_dir/leasectl" migrate --database-url "$url" >/dev/null
  token=$("$build_dir/leasectl" credential create --database-url "$url" --principal prn_bench \
    --client client_bench --tenant bench --program bench --actor '*' --capability targets:lease \
    --description "$description" | grep -o '"token":"lsk_[^"]*"' | cut -d'"' -f4)
  lport=$(free_port)
  # shellcheck disable=SC2046 # one "-u NAME" per LEASE_ variable of this shell
  env $(env | sed -n 's/^\(LEASE_[A-Z_]*\)=.*/-u \1/p') \
    LEASE_STORE_URL="$url" LEASE_LISTEN="127.0.0.1:$lport" LEASE_LOG_LEVEL=info \
    LEASE_RATE_LIMIT=1000000/s LEASE_SOURCE_RATE_LIMIT=1000000/s LEASE_MAX_INFLIGHT=4096 \
    LEASE_MAX_INFLIGHT_PER_CREDENTIAL=4096 LEASE_MAX_INFLIGHT_PER_TENANT=4096 \
    "$@" "$build_dir/leased" >"$work/leased.log" 2>&1 &
  leased_pid=$!
  local _
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$lport/readyz" >/dev/null && return 0; sleep 0.1; done
  echo "leased on Valkey did not become ready: $(tail -n 5 "$work/leased.log")" >&2
  return 1
}
