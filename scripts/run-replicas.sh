#!/usr/bin/env bash
# `make run-replicas`: a throwaway local PostgreSQL and three gpuaas replicas on it, with the demo
# fleet, on 127.0.0.1:8080, :8081 and :8082. One of them leads (runs the controllers); every one
# serves the whole API and the dashboard. Kill the leader and watch another take over:
#
#   curl -s 127.0.0.1:8081/metrics | grep master_status     # 1 on the leader
#   kill -9 <the leader's pid>                                 # printed below
#
# Ctrl-C stops the replicas and removes the database. Usage: run-replicas.sh BINARY WEB_ROOT
set -euo pipefail

bin=${1:-build/release/src/exe/gpuaas}
web=${2:-web/dist}
dir=$(mktemp -d /tmp/gpuaas-replicas-XXXXXX)
chmod 755 "$dir"  # the database may run as the postgres user
pids=()
cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash scripts/throwaway-postgres.sh stop "$dir/pg"
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

db=$(bash scripts/throwaway-postgres.sh start "$dir/pg")
echo "PostgreSQL: $db (log $dir/pg/postgresql.log)"

start() {  # start N: replica rN on port 808N
  local n=$1
  "$bin" server --demo --db "$db" --listen "127.0.0.1:808$n" --replica-id "r$n" --web "$web" \
    >>"$dir/r$n.log" 2>&1 &
  pids[$n]=$!
}
start 0
# The first replica installs the demo (its project, pools and tokens); the others find them.
for _ in $(seq 1 300); do
  grep -q "export GPUAAS_TOKEN=" "$dir/r0.log" 2>/dev/null && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$dir/r0.log" >&2; exit 1; }
  sleep 0.1
done
start 1
start 2
for n in 1 2; do
  for _ in $(seq 1 300); do
    grep -q "serving http" "$dir/r$n.log" 2>/dev/null && break
    sleep 0.1
  done
done
grep -E "demo (operator|member) token|export GPUAAS_TOKEN" "$dir/r0.log" | sed 's/^/  /'
echo
for n in 0 1 2; do
  role=$(curl -s "127.0.0.1:808$n/metrics" | sed -n 's/^gpuaas_leader_election_master_status{[^}]*} //p')
  echo "replica r$n: http://127.0.0.1:808$n  pid ${pids[$n]}  $([ "$role" = 1 ] && echo leader || echo follower)  log $dir/r$n.log"
done
cat <<TEXT

Every replica serves the API and the dashboard. Kill the leader (kill -9 PID) and within about
17 s (the 15 s lease and a retry) another leads: watch its log, or
  watch -n1 'for p in 8080 8081 8082; do curl -s 127.0.0.1:\$p/metrics | grep master_status; done'
A killed replica is started again after 5 s, as its Deployment would start it.
Ctrl-C stops everything and removes the database.
TEXT
# Until Ctrl-C; a replica that dies (killed by hand) is reported, not restarted.
while true; do
  for n in 0 1 2; do
    if [ -n "${pids[$n]:-}" ] && ! kill -0 "${pids[$n]}" 2>/dev/null; then
      echo "replica r$n (pid ${pids[$n]}) stopped; starting it again in 5 s"
      sleep 5
      start "$n"
      echo "replica r$n restarted: pid ${pids[$n]}"
    fi
  done
  sleep 1
done
