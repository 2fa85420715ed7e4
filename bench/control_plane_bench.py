#!/usr/bin/env python3
"""Fleet-scale control-plane benchmark: one `gpuaas server` on a synthetic fleet, driven over its API.

Measures, for each binary given (the code under test and a baseline build of an earlier commit,
in the same run):
  - ready: seconds from process start to /readyz answering 200, and the process CPU time in the
    --after-ready seconds after it, before anything is asked (work left over from the start);
  - a loaded, idle fleet: Ready pools (2 full H100 GPUs each, 10 running workloads each through
    time slicing) and approved pools waiting for capacity (one B200 each; the fleet's 16 B200s,
    two nodes of the first cluster, are all held by one filler pool); then process CPU time over
    --idle seconds (utime + stime from /proc) and RSS;
  - GET /api/v1/summary latency (median of 20);
  - approval to Ready of a 1-GPU full pool, one at a time, polled every 2 ms: p50 and p99;
  - release to allocation: the filler pool is released and the time until the first and the
    last of the waiting pools that now fit (16) are Allocated is taken.
No telemetry simulation (no --demo). Loopback only; everything is bounded in count and time.

  python3 bench/control_plane_bench.py --gpus 10000 --clusters 2 \
      --binary build/release/src/exe/gpuaas --baseline /tmp/base/build/release/src/exe/gpuaas
  python3 bench/control_plane_bench.py --gpus 100000 --postgresql   # SQLite and PostgreSQL, same run
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


class ThrowawayPostgres:
    """A local PostgreSQL for one run (scripts/throwaway-postgres.sh): unix socket only, fsync off."""

    def __init__(self, workdir, name):
        self.dir = os.path.join(workdir, name)
        os.chmod(workdir, 0o755)  # the database may run as the postgres user
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "throwaway-postgres.sh")
        self.script = script
        self.url = subprocess.run(["bash", script, "start", self.dir], check=True, capture_output=True,
                                  text=True).stdout.strip().splitlines()[-1]

    def stop(self):
        subprocess.run(["bash", self.script, "stop", self.dir], check=False)


class Server:
    def __init__(self, binary, fleet, workdir, name, db_url=None):
        self.log_path = os.path.join(workdir, f"{name}.log")
        db = db_url or "sqlite:" + os.path.join(workdir, f"{name}.db")
        self.log = open(self.log_path, "w")
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            [binary, "server", "--fleet", fleet, "--listen", "127.0.0.1:0", "--db", db,
             "--insecure-no-auth"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and self.port is None:
            m = re.search(r"serving http://127\.0\.0\.1:(\d+)", open(self.log_path).read())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None:
                raise RuntimeError("server exited: " + open(self.log_path).read()[-2000:])
            else:
                time.sleep(0.02)
        if self.port is None:
            raise RuntimeError("server did not start")
        while self.get("/readyz", raw=True)[0] != 200:
            time.sleep(0.02)
        self.ready_s = time.monotonic() - self.start

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url(path), data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def get(self, path, raw=False):
        code, body = self.request("GET", path)
        return (code, body) if raw else json.loads(body)

    def post(self, path, body):
        code, out = self.request("POST", path, body)
        if code not in (200, 201):
            raise RuntimeError(f"POST {path}: {code} {out[:300]}")

    def put(self, path, body):
        code, out = self.request("PUT", path, body)
        if code != 200:
            raise RuntimeError(f"PUT {path}: {code} {out[:300]}")

    def cpu_s(self):
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_mb(self):
        return int(open(f"/proc/{self.proc.pid}/statm").read().split()[1]) * PAGE / 2**20

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


POOLS = "/apis/gpuaas.io/v1/namespaces/bench/gpupools"


def pool_body(name, model, count, slicing=0):
    spec = {"items": [{"model": model, "profile": "full", "count": count}]}
    if slicing:
        spec["sharing"] = {"timeSlicing": {"replicas": slicing}}
    return {"apiVersion": "gpuaas.io/v1", "kind": "GpuPool", "metadata": {"name": name}, "spec": spec}


def cond(pool, kind):
    for c in pool.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return c["status"]
    return None


def note(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def wait(pred, timeout_s, what):
    note("waiting for " + what)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def gpus_of(s, model):
    for c in s.get("/api/v1/summary")["physical"]["byModel"]:
        if c["model"] == model:
            return c["gpus"]
    return 0


def fleet_file(gpus, clusters, path):
    """A uniform fleet of about `gpus` GPUs in `clusters` clusters: H200, H100 and A100 nodes of 8,
    a quarter of each in MIG (the shape of `gpuaas server --synthetic-gpus`), written as a fleet
    file so that every binary, old or new, reads the same one."""
    nodes = max(1, (gpus + 7) // 8)
    kinds = [("h200", "H200-SXM-141GB", "3g.71gb@0 2g.35gb@4 1g.18gb@6"),
             ("h100", "H100-SXM5-80GB", "3g.40gb@0 3g.40gb@4"),
             ("a100", "A100-80GB", "2g.20gb@0 2g.20gb@2 2g.20gb@4 1g.10gb@6")]
    out = {"clusters": []}
    for c in range(clusters):
        share = nodes // clusters + (1 if c < nodes % clusters else 0)
        pools = []
        for k, (name, model, layout) in enumerate(kinds):
            count = share // 3 + (1 if k < share % 3 else 0)
            if count:
                pools.append({"name": name, "count": count, "model": model, "gpusPerNode": 8, "cpuCores": 128,
                              "memoryGiB": 1024, "migNodes": count // 4, "migLayouts": [layout]})
        if c == 0:  # a scarce model: the capacity that waiting pools wait for
            pools.append({"name": "b200", "count": 2, "model": "B200-180GB", "gpusPerNode": 8, "cpuCores": 128,
                          "memoryGiB": 2048})
        out["clusters"].append({"name": f"bench-{c + 1}", "region": "bench", "nodePools": pools})
    with open(path, "w") as f:
        json.dump(out, f)


def run(binary, args, workdir, name, db_url=None):
    out = {"binary": name}
    fleet = os.path.join(workdir, "fleet.json")
    fleet_file(args.gpus, args.clusters, fleet)
    s = Server(binary, fleet, workdir, name, db_url)
    out["ready_s"] = round(s.ready_s, 2)
    try:
        cpu = s.cpu_s()
        time.sleep(args.after_ready)
        out["cpu_s_after_ready"] = round(s.cpu_s() - cpu, 2)
        s.post("/apis/gpuaas.io/v1/projects", {"apiVersion": "gpuaas.io/v1", "kind": "Project",
                                                "metadata": {"name": "bench"}})
        # Ready pools with their workloads.
        for i in range(args.ready_pools):
            s.post(POOLS, pool_body(f"ready-{i}", "H100-SXM5-80GB", 2, slicing=5))
            s.put(f"{POOLS}/ready-{i}/approval", {"approve": True, "reason": "bench"})
        wait(lambda: sum(cond(p, "Ready") == "True" for p in s.get(POOLS)["items"]) >= args.ready_pools,
             900, "the Ready pools")
        for i in range(args.workloads):
            s.post("/apis/gpuaas.io/v1/namespaces/bench/workloads",
                   {"apiVersion": "gpuaas.io/v1", "kind": "Workload", "metadata": {"name": f"w-{i}"},
                    "spec": {"pool": f"ready-{i % args.ready_pools}", "resources": {"nvidia.com/gpu": 1}}})
        wait(lambda: sum(w.get("status", {}).get("phase") == "Running"
                         for w in s.get("/apis/gpuaas.io/v1/namespaces/bench/workloads")["items"]) >= args.workloads,
             900, "the running workloads")
        # Every B200 held by one pool; pools that want one more wait.
        scarce = gpus_of(s, "B200-180GB")
        s.post(POOLS, pool_body("filler", "B200-180GB", scarce))
        s.put(f"{POOLS}/filler/approval", {"approve": True, "reason": "bench"})
        wait(lambda: cond(s.get(f"{POOLS}/filler"), "Ready") == "True", 1800, "the filler pool")
        for i in range(args.waiting_pools):
            s.post(POOLS, pool_body(f"wait-{i}", "B200-180GB", 1))
            s.put(f"{POOLS}/wait-{i}/approval", {"approve": True, "reason": "bench"})
        wait(lambda: sum(cond(p, "Allocated") == "False" for p in s.get(POOLS)["items"]) >= args.waiting_pools,
             300, "the waiting pools")
        time.sleep(5)  # let start-up work settle before measuring idle
        cpu0, t0 = s.cpu_s(), time.monotonic()
        time.sleep(args.idle)
        cpu1, t1 = s.cpu_s(), time.monotonic()
        out["idle_cpu_pct"] = round(100 * (cpu1 - cpu0) / (t1 - t0), 2)
        out["rss_mb"] = round(s.rss_mb(), 1)
        out["rss_mb_per_1000_gpus"] = round(s.rss_mb() / (args.gpus / 1000), 2)
        lat = []
        for _ in range(20):
            a = time.monotonic()
            s.get("/api/v1/summary")
            lat.append(time.monotonic() - a)
        out["summary_ms_p50"] = round(1000 * statistics.median(lat), 2)
        # Approval to Ready, one pool at a time.
        times = []
        for i in range(args.approvals):
            s.post(POOLS, pool_body(f"approve-{i}", "H100-SXM5-80GB", 1))
            a = time.monotonic()
            s.put(f"{POOLS}/approve-{i}/approval", {"approve": True, "reason": "bench"})
            while cond(s.get(f"{POOLS}/approve-{i}"), "Ready") != "True":
                if time.monotonic() - a > 120:
                    raise RuntimeError(f"approve-{i} not Ready in 120 s")
                time.sleep(0.002)
            times.append(time.monotonic() - a)
        times.sort()
        out["approve_to_ready_ms_p50"] = round(1000 * times[len(times) // 2], 1)
        out["approve_to_ready_ms_p99"] = round(1000 * times[min(len(times) - 1, int(len(times) * 0.99))], 1)
        out["approvals"] = len(times)
        # Release to allocation of the waiting pools.
        a = time.monotonic()
        code, body = s.request("POST", f"{POOLS}/filler/release", {})
        if code != 200:
            raise RuntimeError(f"release: {code} {body[:200]}")
        first = last = None
        while time.monotonic() - a < 120:
            n = sum(cond(p, "Allocated") == "True" for p in s.get(POOLS)["items"] if p["metadata"]["name"].startswith("wait-"))
            if n > 0 and first is None:
                first = time.monotonic() - a
            if n == min(args.waiting_pools, scarce):
                last = time.monotonic() - a
                break
            time.sleep(0.002)
        out["release_to_first_allocated_ms"] = None if first is None else round(1000 * first, 1)
        out["release_to_all_allocated_ms"] = None if last is None else round(1000 * last, 1)
    finally:
        s.stop()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=10000)
    ap.add_argument("--clusters", type=int, default=2)
    ap.add_argument("--binary", default="build/release/src/exe/gpuaas")
    ap.add_argument("--baseline", help="a gpuaas binary of an earlier commit, measured in the same run")
    ap.add_argument("--baseline-approvals", type=int, help="approvals for the baseline (default: --approvals)")
    ap.add_argument("--ready-pools", type=int, default=100)
    ap.add_argument("--waiting-pools", type=int, default=20)
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--approvals", type=int, default=100)
    ap.add_argument("--idle", type=float, default=60)
    ap.add_argument("--after-ready", type=float, default=10,
                    help="seconds after /readyz over which the CPU the server still spends is taken")
    ap.add_argument("--postgresql", action="store_true",
                    help="also run the binary on a throwaway local PostgreSQL (scripts/throwaway-postgres.sh), "
                         "beside its run on SQLite")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="gpuaas-cp-bench-") as d:
        results.append(run(args.binary, args, d, "current"))
        print(json.dumps(results[-1]), flush=True)
        if args.postgresql:
            pg = ThrowawayPostgres(d, "pg")
            try:
                results.append(run(args.binary, args, d, "postgresql", pg.url))
            finally:
                pg.stop()
            print(json.dumps(results[-1]), flush=True)
        if args.baseline:
            if args.baseline_approvals:
                args.approvals = args.baseline_approvals
            results.append(run(args.baseline, args, d, "baseline"))
            print(json.dumps(results[-1]), flush=True)
    keys = [k for k in results[0] if k != "binary"]
    print(f"\n{args.gpus} GPUs in {args.clusters} clusters, {args.ready_pools} Ready pools, "
          f"{args.waiting_pools} waiting, {args.workloads} workloads")
    print(f"{'figure':34}" + "".join(f"{r['binary']:>14}" for r in results))
    for k in keys:
        print(f"{k:34}" + "".join(f"{str(r.get(k)):>14}" for r in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
