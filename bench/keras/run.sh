#!/usr/bin/env bash
# Training throughput of distlib/keras's model.Fit on the peer CNN (shared/peers/model.py,
# batch 64 per replica, Adam, synthetic data repeated), in the same run:
#   1. one thread: godist keras Fit (GOMAXPROCS=1, no strategy) against PyTorch
#      (cnn_throughput.py --threads 1), wall samples/s and samples per own CPU-second
#      (PyTorch's from bench/cnn/peer_cpu.py, the same step). torch.set_num_threads(1) leaves
#      the OpenBLAS of Debian's PyTorch at 2 threads (about 2 busy cores), so PyTorch also
#      runs with OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 (as godist does), the one-core figure;
#   2. GOMAXPROCS=2: MirroredStrategy over 2 logical CPU devices against 1 device, where
#      "1 device" is one replica on one device of the same 2-way split (1 kernel thread) and,
#      for reference, one replica on the unsplit CPU (2 kernel threads). Goal: 2 replicas at
#      least 1.6x one replica.
# The machine is shared, so the runs alternate in ROUNDS rounds (default 3) of WINDOWS
# windows (default 5) of STEPS steps (default 30); figures are medians over all windows and
# over "clean" windows (other processes under 0.1 cores) when there are any.
# Builds with TAGS (empty: the Go kernels, as the Makefile builds; TAGS=openblas for OpenBLAS).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
bench_setup 3
bench_build keras keras
bench_machine
args=(-windows "$WINDOWS" -steps "$STEPS" -warmup 1)
for r in $(seq "$ROUNDS"); do
  GOMAXPROCS=1 OPENBLAS_NUM_THREADS=1 "$tmp/keras" -mode plain "${args[@]}" 2>/dev/null | grep '^{' >>"$tmp/go.jsonl"
  (cd "$peers" && /usr/bin/python3 cnn_throughput.py --threads 1 --windows "$WINDOWS" --steps "$STEPS" --warmup 30) | grep '^{' >>"$tmp/py.jsonl"
  (cd "$peers" && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 cnn_throughput.py --threads 1 --windows "$WINDOWS" --steps "$STEPS" --warmup 30) | grep '^{' >>"$tmp/py1.jsonl"
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 "$root/bench/cnn/peer_cpu.py" "$peers" --windows "$WINDOWS" --steps "$STEPS" --warmup 30 >>"$tmp/pycpu.jsonl"
  GOMAXPROCS=2 OPENBLAS_NUM_THREADS=1 "$tmp/keras" -mode mirrored -replicas 1 -split 2 "${args[@]}" 2>/dev/null | grep '^{' >>"$tmp/m1.jsonl"
  GOMAXPROCS=2 OPENBLAS_NUM_THREADS=1 "$tmp/keras" -mode mirrored -replicas 2 -split 2 "${args[@]}" 2>/dev/null | grep '^{' >>"$tmp/m2.jsonl"
  GOMAXPROCS=2 OPENBLAS_NUM_THREADS=1 "$tmp/keras" -mode mirrored -replicas 1 -split 1 "${args[@]}" 2>/dev/null | grep '^{' >>"$tmp/m1w.jsonl"
done
echo "machine after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$tmp" <<'PY'
import json, statistics, sys
d = sys.argv[1]
def load(name):
    ws, cfg = [], ""
    for line in open(f"{d}/{name}.jsonl"):
        j = json.loads(line)
        ws += j["windows"]
        cfg = j["config"]
    allr = statistics.median(w[0] for w in ws)
    clean = [w[0] for w in ws if w[-1] < 0.1]
    cpu = statistics.median(w[1] for w in ws) if len(ws[0]) == 3 else None
    cores = statistics.median(w[0] / w[1] for w in ws) if cpu else None  # own CPU-seconds per second
    return dict(cfg=cfg, all=allr, clean=statistics.median(clean) if clean else None, n=len(clean), t=len(ws), cpu=cpu, cores=cores)
def show(name, s):
    c = f"{s['clean']:.0f}" if s["clean"] else "none"
    cpu = f", {s['cpu']:.0f} per own CPU-second, {s['cores']:.2f} cores used" if s["cpu"] else ""
    print(f"{name} [{s['cfg']}]: median {s['all']:.0f} samples/s all windows, clean {c} ({s['n']}/{s['t']}){cpu}")
def ratio(a, b):
    line = f"{a['all'] / b['all']:.2f}x over all windows"
    if a["clean"] and b["clean"]:
        line += f", {a['clean'] / b['clean']:.2f}x over clean windows"
    return line
g, p, p1, pc = load("go"), load("py"), load("py1"), load("pycpu")
m1, m2, m1w = load("m1"), load("m2"), load("m1w")
show("godist keras", g)
show("pytorch --threads 1", p)
show("pytorch --threads 1, OPENBLAS_NUM_THREADS=1", p1)
print(f"keras Fit 1 thread vs pytorch --threads 1: {ratio(g, p)}")
print(f"keras Fit 1 thread vs pytorch --threads 1 with OPENBLAS_NUM_THREADS=1: {ratio(g, p1)}")
print(f"keras Fit 1 thread vs pytorch (OPENBLAS_NUM_THREADS=1), per own CPU-second: godist {g['cpu']:.0f}, pytorch {pc['cpu']:.0f} samples/s, "
      f"ratio {g['cpu'] / pc['cpu']:.2f}x")
show("mirrored 1 replica", m1)
show("mirrored 2 replicas", m2)
show("mirrored 1 replica, unsplit CPU", m1w)
print(f"mirrored 2 replicas vs 1 replica (GOMAXPROCS=2): {ratio(m2, m1)} (goal >= 1.6x)")
print(f"mirrored 2 replicas vs 1 replica on the unsplit CPU: {ratio(m2, m1w)}")
PY
