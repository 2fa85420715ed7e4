#!/usr/bin/env bash
# A throwaway local PostgreSQL for trying and measuring replicas (make run-replicas, the benches):
# a cluster in DIR, reached over a unix socket in DIR only (no TCP port), fast and not durable
# (fsync off). Not for data you want to keep.
#
#   scripts/throwaway-postgres.sh start DIR [DB]   # prints the store URL: postgresql:///DB?host=DIR...
#   scripts/throwaway-postgres.sh stop DIR         # stops it and removes DIR
set -euo pipefail

pgbin=/usr/lib/postgresql/15/bin
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start DIR [DB] | stop DIR" >&2; exit 2; }
as=()
# initdb refuses to run as root: the database then runs as the postgres user, in a folder it owns.
[ "$(id -u)" -eq 0 ] && as=(runuser -u postgres --)

case "$cmd" in
  start)
    db=${3:-gpuaas}
    [ -x "$pgbin/initdb" ] || { echo "PostgreSQL 15 is not installed (make deps installs it)" >&2; exit 1; }
    mkdir -p "$dir"
    [ ${#as[@]} -eq 0 ] || chown postgres: "$dir"
    "${as[@]}" "$pgbin/initdb" -D "$dir/data" -U gpuaas -A trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    "${as[@]}" "$pgbin/pg_ctl" -D "$dir/data" -w -s -l "$dir/postgresql.log" \
      -o "-k $dir -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -p 5432" start
    "${as[@]}" "$pgbin/createdb" -h "$dir" -p 5432 -U gpuaas "$db"
    echo "postgresql:///$db?host=$dir&port=5432&user=gpuaas"
    ;;
  stop)
    "${as[@]}" "$pgbin/pg_ctl" -D "$dir/data" -m fast -w -s stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start DIR [DB] | stop DIR" >&2
    exit 2
    ;;
esac
