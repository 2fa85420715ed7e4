#!/usr/bin/env bash
# API benchmark: gpuaas serving a simulated fleet of 10,000 GPUs against nginx serving static files
# of the same sizes, in the same run, with the same load generator (wrk) on the same machine.
# Reports requests/s and p99 for single-object GETs and limit=100 pages, the ratio to nginx, and
# the time to fetch the full 10,000-GPU list.
#
#   make bench                      # builds the release binary, then runs this
#   GPUS=10000 DURATION=10 CONNECTIONS=32 bash bench/api_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

GPUS=${GPUS:-10000}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
BIN=${BIN:-build/release/src/exe/gpuaas}
[ -x "$BIN" ] || { echo "build first: make build-release" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk missing: bash scripts/install-deps.sh" >&2; exit 1; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

work=$(mktemp -d)
chmod 755 "$work"
cleanup() {
  [ -n "${gpid:-}" ] && kill "$gpid" 2>/dev/null || true
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
gport=$(free_port)
nport=$(free_port)

# Authenticated like a real client: every request carries a bearer token (nginx gets it too).
token="bench-operator-token-0123456789"
echo "$token,bench,operator" >"$work/tokens"
# The per-token rate limit off: one token sends tens of thousands of requests a second, and the
# bench measures the server, not the limiter (which would answer 429 to nearly all of them).
"$BIN" server --synthetic-gpus "$GPUS" --listen "127.0.0.1:$gport" --db "sqlite:$work/bench.db" \
  --log-level warn --sync-interval 3600 --token-auth-file "$work/tokens" --requests-per-second all=0 \
  >"$work/gpuaas.log" 2>&1 &
gpid=$!
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$gport/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$gport/readyz" >/dev/null || { cat "$work/gpuaas.log"; exit 1; }

g="http://127.0.0.1:$gport"
auth=(-H "Authorization: Bearer $token")
name=$(curl -sf "${auth[@]}" "$g/apis/gpuaas.io/v1/gpucapacities?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["metadata"]["name"])')
single="/apis/gpuaas.io/v1/gpucapacities/$name"
page="/apis/gpuaas.io/v1/gpucapacities?limit=100"
curl -sf "${auth[@]}" "$g$single" >"$work/single.json"
curl -sf "${auth[@]}" "$g$page" >"$work/page.json"
total=$(curl -sf "$g/api/v1/summary" | python3 -c 'import json,sys; print(json.load(sys.stdin)["physical"]["gpus"])')

user_line=""
[ "$(id -u)" -eq 0 ] && user_line="user root;"
mkdir -p "$work/html" "$work/tmp"
cp "$work/single.json" "$work/page.json" "$work/html/"
cat >"$work/nginx.conf" <<CONF
$user_line
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $work/tmp; proxy_temp_path $work/tmp; fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp; scgi_temp_path $work/tmp;
  default_type application/json;
  server { listen 127.0.0.1:$nport; root $work/html; }
}
CONF
"$NGINX" -c "$work/nginx.conf" -p "$work"
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$nport/single.json" >/dev/null 2>&1 && break; sleep 0.1; done

# run NAME URL -> "rps p99_ms"
run() {
  local out
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "${auth[@]}" "$2")
  local rps p99
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {v=$2; if (v ~ /us$/) {sub("us","",v); v=v/1000} else if (v ~ /ms$/) {sub("ms","",v)} else if (v ~ /s$/) {sub("s","",v); v=v*1000}; print v}')
  if echo "$out" | grep -q "Non-2xx"; then echo "$1: non-2xx responses" >&2; echo "$out" >&2; exit 1; fi
  echo "$rps $p99"
}

echo "gpuaas $("$BIN" --client-version 2>/dev/null || true), fleet of $total GPUs; wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s on $(nproc) cores"
printf '%-26s %9s %12s %10s %12s %10s %8s\n' test bytes gpuaas_rps gpuaas_p99 nginx_rps nginx_p99 ratio
for kind in single page; do
  if [ "$kind" = single ]; then path="$single"; else path="$page"; fi
  bytes=$(wc -c <"$work/$kind.json")
  read -r grps gp99 < <(run "gpuaas $kind" "$g$path")
  read -r nrps np99 < <(run "nginx $kind" "http://127.0.0.1:$nport/$kind.json")
  ratio=$(python3 -c "print(f'{$grps/$nrps*100:.0f}%')")
  printf '%-26s %9s %12s %8sms %12s %8sms %8s\n' "GET $kind" "$bytes" "$grps" "$gp99" "$nrps" "$np99" "$ratio"
done

# The full list, one request at a time: median and max of 10.
times=()
for _ in $(seq 1 10); do
  times+=("$(curl -s "${auth[@]}" -o "$work/full.json" -w '%{time_total}' "$g/apis/gpuaas.io/v1/gpucapacities")")
done
items=$(python3 -c "import json; print(len(json.load(open('$work/full.json'))['items']))")
python3 - "$items" "$(wc -c <"$work/full.json")" "${times[@]}" <<'PY'
import statistics, sys
items, size, ts = sys.argv[1], int(sys.argv[2]), [float(t) * 1000 for t in sys.argv[3:]]
print(f"full list: {items} GPUs, {size/1e6:.1f} MB, median {statistics.median(ts):.1f} ms, max {max(ts):.1f} ms over {len(ts)} requests")
PY
rss=$(awk '/VmRSS/ {print $2}' "/proc/$gpid/status")
echo "gpuaas server RSS: $((rss / 1024)) MiB"
