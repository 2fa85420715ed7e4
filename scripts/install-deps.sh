#!/usr/bin/env bash
# Installs every Debian 12 package that gpuaas needs to build, test, benchmark and run.
# Idempotent: packages already present are skipped, so re-running is cheap.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  lld                                    # LLVM's linker: links the sanitized tests ~5x faster than GNU ld
  clang-14 libclang-rt-14-dev            # fuzz preset (libFuzzer), optional sanitizer runtimes
  libabsl-dev                            # Status/StatusOr, containers, synchronization
  nlohmann-json3-dev                     # JSON codecs
  libyaml-cpp-dev                        # fleet files, -o yaml
  libboost-dev                           # Boost.Beast: the HTTP server
  libcpp-httplib-dev libssl-dev zlib1g-dev libbrotli-dev   # HTTP client (CLI, tests)
  openssl                                # test: the README's self-signed certificate for kubectl over TLS
  libcli11-dev                           # command-line parsing
  libspdlog-dev libfmt-dev               # logging
  libsqlite3-dev sqlite3                 # embedded store
  libpq-dev postgresql-15                # the PostgreSQL store (libpq); tests start throwaway servers
  libgtest-dev libgmock-dev libbenchmark-dev   # tests and micro-benchmarks
  wrk nginx curl python3                  # API benchmark (load generator and baseline)
  prometheus                             # test: a real Prometheus scrapes gpuaas and receives its remote write
  victoria-metrics                       # test: the other remote-write receiver gpuaas writes to and reads back from
  libsnappy-dev                          # remote write: the snappy block around each WriteRequest
  libtinyxml2-dev                        # nvidia-smi -q -x reports (the agent's second source)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc   # the agent's kubelet PodResources client; remote write
  chromium fonts-noto-cjk                # dashboard browser tests (playwright-core drives Debian's Chromium)
)
# The dashboard is built with node (>= 20) and npm; Debian's own nodejs is taken only when the
# machine has none.
command -v node >/dev/null 2>&1 || packages+=(nodejs npm)
# Test: Debian's kubectl reads gpuaas objects; taken only when no kubectl is installed (another
# package may own /usr/bin/kubectl).
command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Package scripts must not start system services (nginx would grab port 80): the benchmark starts
# its own nginx on a loopback port. policy-rc.d is Debian's switch for that; remove ours afterwards.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  own_policy=1
fi
trap '[ $own_policy -eq 1 ] && $SUDO rm -f "$policy"' EXIT
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
