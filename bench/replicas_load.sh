#!/usr/bin/env bash
# Load on replicas: wrk (Debian's) with 200 connections for 60 s against two gpuaas replicas on one
# PostgreSQL, and the same run against one server on SQLite, on the same machine in the same run.
# Four kinds of request, each from its own wrk processes (one per replica) so that each has its
# own latency figures: a single GPU (GET), a page of 100 GPUs, the fleet summary, and the pool
# lifecycle (request, approve, release; bench/load/pools.lua). The per-token rate limit is off
# (--requests-per-second all=0): this measures the server, not the limiter. Prints p50, p99,
# requests/s and non-2xx answers per kind and setup.
#
#   make build-release && bash bench/replicas_load.sh
#   GPUS=2000 DURATION=60 CONNECTIONS=200 bash bench/replicas_load.sh
set -euo pipefail
cd "$(dirname "$0")/.."

GPUS=${GPUS:-2000}
DURATION=${DURATION:-60}
CONNECTIONS=${CONNECTIONS:-200}
BIN=${BIN:-build/release/src/exe/gpuaas}
[ -x "$BIN" ] || { echo "build first: make build-release" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk missing: bash scripts/install-deps.sh" >&2; exit 1; }

work=$(mktemp -d /tmp/gpuaas-load-XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash scripts/throwaway-postgres.sh stop "$work/pg" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

export GPUAAS_TOKEN="load-operator-token-0123456789"
echo "$GPUAAS_TOKEN,load,operator" >"$work/tokens"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_server NAME DB: a server on a free port; sets `url` once it is ready. (Not called as
# $(...): the server's pid must reach `pids` in this shell, for the cleanup.)
start_server() {
  local name=$1 db=$2 port
  port=$(free_port)
  "$BIN" server --synthetic-gpus "$GPUS" --listen "127.0.0.1:$port" --db "$db" --replica-id "$name" \
    --log-level warn --token-auth-file "$work/tokens" --requests-per-second all=0 >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 1200); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$work/$name.log" >&2; exit 1; }
  url="http://127.0.0.1:$port"
}

# load SETUP URL...: the four kinds against every URL at once, CONNECTIONS in all.
load() {
  local setup=$1
  shift
  local urls=("$@") auth=(-H "Authorization: Bearer $GPUAAS_TOKEN")
  curl -sf "${auth[@]}" -H "Content-Type: application/json" -X POST "${urls[0]}/apis/gpuaas.io/v1/projects" \
    -d '{"apiVersion":"gpuaas.io/v1","kind":"Project","metadata":{"name":"bench"}}' >/dev/null || true
  local gpu
  gpu=$(curl -sf "${auth[@]}" "${urls[0]}/apis/gpuaas.io/v1/gpucapacities?limit=1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["metadata"]["name"])')
  local per=$((CONNECTIONS / 4 / ${#urls[@]}))
  [ "$per" -ge 1 ] || per=1
  local kinds=(single page summary pools) wpids=()
  for u in "${!urls[@]}"; do
    for kind in "${kinds[@]}"; do
      local path script=bench/load/read.lua
      case $kind in
        single) path="/apis/gpuaas.io/v1/gpucapacities/$gpu" ;;
        page) path="/apis/gpuaas.io/v1/gpucapacities?limit=100" ;;
        summary) path="/api/v1/summary" ;;
        pools) path="/" script=bench/load/pools.lua ;;
      esac
      BENCH_PREFIX="$setup$u" wrk -t1 -c"$per" -d"${DURATION}s" --timeout 10s --latency -s "$script" "${urls[$u]}$path" \
        >"$work/$setup-$kind-$u.txt" 2>&1 &
      wpids+=($!)
    done
  done
  wait "${wpids[@]}"
  for kind in "${kinds[@]}"; do
    python3 - "$setup" "$kind" "$work/$setup-$kind-"*.txt <<'PY'
import re, sys
setup, kind, files = sys.argv[1], sys.argv[2], sys.argv[3:]
def ms(v):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", v)
    if not m:
        sys.exit(f"{setup} {kind}: wrk printed a latency of {v!r}:\n{t}")
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[m.group(2)]
p50 = p99 = 0.0
rps = 0.0
bad = errors = 0
for f in files:
    t = open(f).read()
    if "Requests/sec" not in t:
        sys.exit(f"{setup} {kind}: wrk failed:\n{t}")
    p50 = max(p50, ms(re.search(r"^\s+50%\s+(\S+)", t, re.M).group(1)))
    p99 = max(p99, ms(re.search(r"^\s+99%\s+(\S+)", t, re.M).group(1)))
    rps += float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
    bad += int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", t)
    errors += sum(int(x) for x in m.groups()) if m else 0
print(f"{setup:22} {kind:8} p50 {p50:9.2f} ms  p99 {p99:9.2f} ms  {rps:9.1f} req/s  non-2xx {bad}  socket errors {errors}")
PY
  done
}

echo "load: $GPUS GPUs, $CONNECTIONS connections, ${DURATION} s per setup (worst p50/p99 over the replicas)"
db=$(bash scripts/throwaway-postgres.sh start "$work/pg")
start_server r1 "$db"
a=$url
start_server r2 "$db"
b=$url
load "postgresql-2-replicas" "$a" "$b"
# The replicas stop before the SQLite run: it gets the machine to itself.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait "${pids[@]}" 2>/dev/null || true
pids=()
start_server sqlite "sqlite:$work/sqlite.db"
load "sqlite-1-server" "$url"
