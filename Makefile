# The README's two commands. Each does its own set-up (packages, configure, build).
JOBS ?= 2
PRESET_TEST ?= $(if $(CI),ci,dev)
LISTEN ?= 127.0.0.1:8080
DB ?= sqlite:gpuaas-demo.db

.PHONY: run run-replicas test deps web build-release build-test bench fuzz clean

deps:
	bash scripts/install-deps.sh

# The GPU Dashboard (web/dist), served by the server at /.
web: deps
	bash scripts/build-web.sh

build-release: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

build-test: deps
	cmake --preset $(PRESET_TEST) >/dev/null
	cmake --build --preset $(PRESET_TEST) -j $(JOBS)

run: build-release web
	./build/release/src/exe/gpuaas server --demo --listen $(LISTEN) --db $(DB) --web web/dist

# Three replicas on a throwaway local PostgreSQL, ports 8080-8082: kill the leader, watch another
# take over (scripts/run-replicas.sh says how).
run-replicas: build-release web
	bash scripts/run-replicas.sh ./build/release/src/exe/gpuaas web/dist

test: build-test web
	ctest --preset $(PRESET_TEST) -j $(JOBS)

bench: build-release
	bash bench/api_bench.sh

fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)

clean:
	rm -rf build web/dist
