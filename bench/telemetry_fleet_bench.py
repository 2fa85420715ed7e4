#!/usr/bin/env python3
"""Telemetry at fleet scale: one `gpuaas server` on a synthetic fleet, fed dcgm-exporter text for
every GPU every 15 s, writing to a VictoriaMetrics of its own by remote write; against the same
server without telemetry, in the same run.

Measures, for both runs:
  - the API's latency while the run lasts: GET /api/v1/summary and GET /api/v1/fleet/gpus?limit=50,
    one after the other every 100 ms, p50 and p99;
  - RSS at the end (and per 1,000 GPUs);
and for the run with telemetry:
  - samples pushed, stored and sent; the sender's lag, the newest sample queued minus the newest
    the receiver accepted, polled every 2 s (max and at the end), samples dropped or failed;
  - the rows VictoriaMetrics took in by remote write (its vm_rows_inserted_total).

Each GPU's text is what dcgm-exporter serves with its default counters (25 families, its labels);
the server stamps the readings (no timestamps in the text), so rounds are 15 s apart in real
time. Pushes go in bodies under the server's 1 MiB limit, as agents would, from one process. With
--nice (the default) that process and VictoriaMetrics run at the lowest CPU priority: on a
machine of two cores they would otherwise starve the server whose latency is measured. With
--pin the server runs alone on the first CPU and everything else (agents, VictoriaMetrics, the
latency probe) on the others, as on separate machines; --pin implies --no-nice.

  python3 bench/telemetry_fleet_bench.py --gpus 100000 --minutes 10
  python3 bench/telemetry_fleet_bench.py --gpus 100000 --minutes 10 --pin
  python3 bench/telemetry_fleet_bench.py --gpus 2000 --minutes 1      # a quick look
"""
import argparse
import json
import multiprocessing
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

PAGE = os.sysconf("SC_PAGE_SIZE")

# dcgm-exporter's default counters (etc/default-counters.csv): 25 families.
FAMILIES = [
    ("DCGM_FI_DEV_SM_CLOCK", 1980), ("DCGM_FI_DEV_MEM_CLOCK", 2619), ("DCGM_FI_DEV_MEMORY_TEMP", 45),
    ("DCGM_FI_DEV_GPU_TEMP", 38), ("DCGM_FI_DEV_POWER_USAGE", 412.5), ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 8.1e9),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 0), ("DCGM_FI_DEV_GPU_UTIL", 87), ("DCGM_FI_DEV_MEM_COPY_UTIL", 31),
    ("DCGM_FI_DEV_ENC_UTIL", 0), ("DCGM_FI_DEV_DEC_UTIL", 0), ("DCGM_FI_DEV_XID_ERRORS", 0),
    ("DCGM_FI_DEV_FB_FREE", 41000), ("DCGM_FI_DEV_FB_USED", 100000), ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 0),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", 0), ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 0),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 0), ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.81), ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.42),
    ("DCGM_FI_PROF_DRAM_ACTIVE", 0.35), ("DCGM_FI_PROF_PCIE_TX_BYTES", 1.2e8), ("DCGM_FI_PROF_PCIE_RX_BYTES", 9.5e7),
    ("DCGM_FI_PROF_SM_ACTIVE", 0.77),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def rss_mb(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE / 1e6


class Server:
    def __init__(self, binary, gpus, workdir, name, extra, cpus=None):
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "server", "--synthetic-gpus", str(gpus), "--listen", "127.0.0.1:0", "--db",
             "sqlite:" + os.path.join(workdir, f"{name}.db"), "--insecure-no-auth",
             "--telemetry-bytes-per-second", "all=1000000000", "--requests-per-second", "all=1000000"] + extra,
            stdout=self.log, stderr=subprocess.STDOUT,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        deadline = time.monotonic() + 900
        self.url = None
        while time.monotonic() < deadline and self.url is None:
            m = re.search(r"serving (http://127\.0\.0\.1:\d+)", open(self.log_path).read())
            if m:
                self.url = m.group(1)
            elif self.proc.poll() is not None:
                sys.exit(f"{name}: the server exited:\n{open(self.log_path).read()[-2000:]}")
            else:
                time.sleep(0.5)
        if self.url is None:
            sys.exit(f"{name}: no server within 15 minutes")
        while get(self.url + "/readyz")[0] != 200:
            time.sleep(0.5)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)


class Latency(threading.Thread):
    """GETs the summary and a page of the fleet, one after the other, every 100 ms."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.stop, self.took = url, threading.Event(), []

    def run(self):
        paths = ["/api/v1/summary", "/api/v1/fleet/gpus?limit=50"]
        i = 0
        while not self.stop.is_set():
            t = time.perf_counter()
            get(self.url + paths[i % 2])
            self.took.append((time.perf_counter() - t) * 1000)
            i += 1
            self.stop.wait(0.1)

    def figures(self):
        s = sorted(self.took)
        return {"requests": len(s), "p50_ms": round(statistics.median(s), 2),
                "p99_ms": round(s[max(0, int(len(s) * 0.99) - 1)], 2)}


def bodies(server_url, limit=1 << 20):
    """dcgm-exporter text for every GPU of the fleet, in bodies under `limit` bytes."""
    status, raw = get(server_url + "/apis/gpuaas.io/v1/gpucapacities", timeout=600)
    gpus = json.loads(raw)["items"]
    out, cur = [], []
    size = 0
    for g in gpus:
        spec = g["spec"]
        labels = (f'gpu="{spec["index"]}",UUID="{spec["uuid"]}",pci_bus_id="00000000:{spec["index"]:02X}:00.0",'
                  f'device="nvidia{spec["index"]}",modelName="NVIDIA {spec["model"]}",Hostname="{spec["node"]}",'
                  'DCGM_FI_DRIVER_VERSION="550.54.15",container="",namespace="",pod=""')
        text = "".join(f"{name}{{{labels}}} {value}\n" for name, value in FAMILIES)
        if size + len(text) > limit - 1024 and cur:
            out.append("".join(cur).encode())
            cur, size = [], 0
        cur.append(text)
        size += len(text)
    if cur:
        out.append("".join(cur).encode())
    return len(gpus), out


def push(url, body):
    req = urllib.request.Request(url + "/api/v1/telemetry", data=body, method="POST",
                                 headers={"Content-Type": "text/plain; version=0.0.4"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def push_rounds(url, chunks, rounds, nice, totals):
    """The agents: every GPU's text every 15 s, for `rounds` rounds (a process of its own, at the
    lowest CPU priority with --nice)."""
    if nice:
        os.nice(19)
    pushed = stored = 0
    push_s = []
    next_round = time.monotonic()
    for _ in range(rounds):
        time.sleep(max(0.0, next_round - time.monotonic()))
        t = time.monotonic()
        for b in chunks:
            res = push(url, b)
            pushed += res["samples"]
            stored += res["stored"]
        push_s.append(time.monotonic() - t)
        next_round += 15
    totals.put((pushed, stored, len(push_s), push_s))


def server_p99_ms(url):
    """The server's own p99 for the probe's two routes, from its request histogram: the upper
    bound of the bucket holding it (the probe's times include the client, which shares a CPU
    with the agents and VictoriaMetrics)."""
    text = get(url + "/metrics")[1].decode()
    buckets = {}
    for m in re.finditer(r'gpuaas_http_request_duration_seconds_bucket\{method="GET",route="([^"]+)",le="([^"]+)"\} (\S+)', text):
        if m.group(1) in ("/api/v1/summary", "/api/v1/fleet/gpus"):
            le = float("inf") if m.group(2) == "+Inf" else float(m.group(2))
            buckets[le] = buckets.get(le, 0) + float(m.group(3))
    if not buckets:
        return None
    total = buckets[max(buckets)]
    for le in sorted(buckets):
        if buckets[le] >= 0.99 * total:
            return le * 1000
    return None


def sender(url):
    """The remote-write figures of /metrics."""
    text = get(url + "/metrics")[1].decode()
    out = {}
    for name in ["samples_total", "samples_failed_total", "samples_retried_total", "samples_dropped_total",
                 "samples_pending", "highest_timestamp_in_seconds", "queue_highest_sent_timestamp_seconds"]:
        m = re.search(r"gpuaas_remote_storage_" + name + r"\{[^}]*\} (\S+)", text)
        out[name] = float(m.group(1)) if m else None
    return out


def run(args, workdir, with_telemetry, vm_url, minutes):
    name = "telemetry" if with_telemetry else "baseline"
    # The queue sized as docs/monitoring.md says: 30 s of the fleet's samples (13 stored series a
    # GPU every 15 s), so that a slow moment of the sender drops nothing.
    extra = ["--telemetry-remote-write", vm_url + "/api/v1/write",
             "--telemetry-remote-write-queue", str(max(500000, args.gpus * 26))] if with_telemetry else []
    t0 = time.monotonic()
    srv = Server(args.binary, args.gpus, workdir, name, extra, args.server_cpus)
    ready_s = time.monotonic() - t0
    result = {"run": name, "ready_s": round(ready_s, 1)}
    gpus, chunks = bodies(srv.url) if with_telemetry else (args.gpus, [])
    lat = Latency(srv.url)
    lat.start()
    rounds = int(minutes * 60 / 15)
    pusher, totals = None, multiprocessing.Queue()
    if with_telemetry:
        pusher = multiprocessing.Process(target=push_rounds, args=(srv.url, chunks, rounds, args.nice, totals))
        pusher.start()
    max_lag = 0.0
    end = time.monotonic() + minutes * 60
    while time.monotonic() < end:
        if with_telemetry:
            s = sender(srv.url)
            if s["highest_timestamp_in_seconds"] and s["queue_highest_sent_timestamp_seconds"] is not None:
                max_lag = max(max_lag, s["highest_timestamp_in_seconds"] - s["queue_highest_sent_timestamp_seconds"])
        time.sleep(2)
    pushed = stored = r = 0
    push_s = []
    if pusher:
        pushed, stored, r, push_s = totals.get()
        pusher.join()
    lat.stop.set()
    lat.join()
    result.update(lat.figures())
    result["server_p99_ms_at_most"] = server_p99_ms(srv.url)
    rss = rss_mb(srv.proc.pid)
    result.update({"rss_mb": round(rss), "rss_mb_per_1000_gpus": round(rss / gpus * 1000, 1)})
    if with_telemetry:
        # Let the queue drain, then the figures.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (sender(srv.url)["samples_pending"] or 0) > 0:
            time.sleep(1)
        s = sender(srv.url)
        # What VictoriaMetrics took in by remote write, from its own /metrics (a query over every
        # series would pass its -search.maxUniqueTimeseries).
        vm_metrics = get(vm_url + "/metrics")[1].decode()
        m = re.search(r'vm_rows_inserted_total\{type="promremotewrite"\} (\S+)', vm_metrics)
        result.update({
            "rounds": r, "samples_pushed": pushed, "samples_stored": stored,
            "push_s_per_round_max": round(max(push_s), 2) if push_s else None,
            "samples_sent": s["samples_total"], "samples_failed": s["samples_failed_total"],
            "samples_retried": s["samples_retried_total"], "samples_dropped": s["samples_dropped_total"],
            "lag_s_max": round(max_lag, 1),
            "lag_s_end": round((s["highest_timestamp_in_seconds"] or 0) - (s["queue_highest_sent_timestamp_seconds"] or 0), 1),
            "victoria_metrics_rows_inserted": float(m.group(1)) if m else None,
        })
    srv.stop()
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, default=100000)
    p.add_argument("--minutes", type=float, default=10, help="how long the run with telemetry lasts")
    p.add_argument("--baseline-minutes", type=float, default=None, help="how long the run without (default: as long)")
    p.add_argument("--binary", default="build/release/src/exe/gpuaas")
    p.add_argument("--nice", action=argparse.BooleanOptionalAction, default=True,
                   help="run the agents' pushes and VictoriaMetrics at the lowest CPU priority, so that on a small "
                        "machine they do not starve the server under test (as on their own machines they would not)")
    p.add_argument("--pin", action="store_true",
                   help="the server alone on the first CPU, everything else on the others")
    args = p.parse_args()
    args.server_cpus = None
    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            sys.exit("--pin needs at least two CPUs")
        args.server_cpus, args.nice = {cpus[0]}, False
        os.sched_setaffinity(0, set(cpus[1:]))  # this process and all it starts, but the server
    if not shutil.which("victoria-metrics"):
        sys.exit("victoria-metrics is not installed (scripts/install-deps.sh)")
    workdir = tempfile.mkdtemp(prefix="gpuaas-fleet-")
    vm_port = free_port()
    vm_log = open(os.path.join(workdir, "vm.log"), "w")
    vm = subprocess.Popen(["victoria-metrics", f"-httpListenAddr=127.0.0.1:{vm_port}",
                           "-storageDataPath=" + os.path.join(workdir, "vm"), "-dedup.minScrapeInterval=1ms",
                           "-search.latencyOffset=0s"], stdout=vm_log, stderr=subprocess.STDOUT,
                          preexec_fn=(lambda: os.nice(19)) if args.nice else None)
    vm_url = f"http://127.0.0.1:{vm_port}"
    try:
        for _ in range(100):
            try:
                if get(vm_url + "/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        if args.pin:
            print(json.dumps({"server_cpus": sorted(args.server_cpus), "others": sorted(os.sched_getaffinity(0))}))
        print(json.dumps(run(args, workdir, False, vm_url, args.baseline_minutes or args.minutes)), flush=True)
        result = run(args, workdir, True, vm_url, args.minutes)
        result["victoria_metrics_rss_mb"] = round(rss_mb(vm.pid))
        print(json.dumps(result), flush=True)
    finally:
        vm.terminate()
        vm.wait()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
