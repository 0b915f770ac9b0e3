# shellcheck shell=bash
# proc_running PID: whether the process still runs. Not `kill -0` alone: a
# server that daemonized (redis-server, pgbouncer -d, a detached postmaster,
# or a child of an earlier invocation of a harness script) has PID 1 as its
# parent, and once stopped it stays a zombie until PID 1 reaps it (on these
# machines about two seconds later). kill -0 counts a zombie as alive, so
# every stop waited those two seconds; a zombie holds no port, file or
# memory any more.
#
#   . tests/harness/proc_running.sh; while proc_running "$pid"; do sleep 0.05; done
proc_running() {
  local st
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}
