#!/usr/bin/env bash
# Builds the GPU Dashboard into web/dist: installs the npm packages the lock file pins (again
# only when the lock file changed), then bundles with esbuild. Needs node (>= 20) and npm.
set -euo pipefail
cd "$(dirname "$0")/../web"
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
node build.mjs
