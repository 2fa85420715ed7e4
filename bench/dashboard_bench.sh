#!/usr/bin/env bash
# The dashboard on 10,000 GPUs with the release build: the overview and the fleet page from
# navigation to usable (each twice: a cold and a warm visit), held under a second, and the rows
# kept in the page while scrolling the GPU table. Needs `make build-release web` first.
# Usage: bench/dashboard_bench.sh [GPUS]
set -euo pipefail
cd "$(dirname "$0")/.."
export GPUAAS_BIN="${GPUAAS_BIN:-$PWD/build/release/src/exe/gpuaas}"
export GPUAAS_TIMING=strict
export GPUAAS_SCALE_GPUS="${1:-10000}"
cd web
node --test --test-concurrency=1 --test-reporter=spec test/browser/scale.test.mjs 2>&1 | grep -E "scale:|✔|✖|pass|fail"
