#!/usr/bin/env bash
# Training throughput of the peer CNN (shared/peers/model.py), batch 64, one thread:
# godist (bench/cnn, GOMAXPROCS=1) against PyTorch (cnn_throughput.py --threads 1) in the
# same run. The machine is shared, so the two alternate in ROUNDS rounds (default 3) of
# WINDOWS windows each (default 5, STEPS steps per window, default 30) and the figures are
# medians over all their windows, plus over "clean" windows (other processes below 0.1 cores)
# when there are any. Prints both figures and the ratio. Because the machine is shared and
# often oversubscribed, each round also runs bench/cnn/peer_cpu.py (the same PyTorch step)
# to compare samples per second of each process's own CPU time, the steadier figure.
# Builds with TAGS (empty: the Go kernels, AVX-512 or AVX2 assembly as the CPU allows, as the
# Makefile builds). Each round also runs the other build (OpenBLAS when cblas.h exists and
# TAGS is empty; the Go kernels when TAGS=openblas), so both are measured in the same run.
# Each round also measures the core's fp32 peak (bench/limits, AVX2 and AVX-512 FMA loops,
# per thread CPU-second) just before and just after godist's run, and the step's GFLOP/s
# (2.86 MFLOP per sample: forward 1.08, backward 1.78) per own CPU-second is printed as a
# fraction of it: pooled over all rounds, and as the median of the rounds' fractions, each
# against the mean of its own two peaks (the machine's speed moves within minutes: on
# 2026-11-27 the peak went from 173 to 140 GFLOP/s between two runs ten minutes apart).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
bench_setup 3
bench_build cnn cnn
ALT=none
if [ -n "$TAGS" ]; then
  ALT=
elif [ -n "$HAVE_CBLAS" ]; then
  ALT=openblas
fi
if [ "$ALT" != none ]; then
  (cd "$root" && go build ${ALT:+-tags "$ALT"} -o "$tmp/cnn_alt" ./bench/cnn)
fi
(cd "$root" && go build -o "$tmp/limits" ./bench/limits)
bench_machine
: >"$tmp/gok.jsonl"
for r in $(seq "$ROUNDS"); do
  GOMAXPROCS=1 "$tmp/limits" -only fma -reps 3 -fma-time 100ms | grep '^{' >>"$tmp/limits.jsonl"
  GOMAXPROCS=1 OPENBLAS_NUM_THREADS=1 "$tmp/cnn" -windows "$WINDOWS" -steps "$STEPS" -warmup 30 >>"$tmp/go.jsonl"
  GOMAXPROCS=1 "$tmp/limits" -only fma -reps 3 -fma-time 100ms | grep '^{' >>"$tmp/limits_after.jsonl"
  if [ "$ALT" != none ]; then
    GOMAXPROCS=1 OPENBLAS_NUM_THREADS=1 "$tmp/cnn_alt" -windows "$WINDOWS" -steps "$STEPS" -warmup 30 >>"$tmp/gok.jsonl"
  fi
  (cd "$peers" && /usr/bin/python3 cnn_throughput.py --threads 1 --windows "$WINDOWS" --steps "$STEPS" --warmup 30) | grep '^{' >>"$tmp/py.jsonl"
  /usr/bin/python3 "$root/bench/cnn/peer_cpu.py" "$peers" --windows "$WINDOWS" --steps "$STEPS" --warmup 30 >>"$tmp/pycpu.jsonl"
done
echo "godist: $(tail -1 "$tmp/go.jsonl" | cut -c1-160)..."
echo "pytorch: $(tail -1 "$tmp/py.jsonl" | cut -c1-160)..."
/usr/bin/python3 - "$tmp/go.jsonl" "$tmp/py.jsonl" "$tmp/pycpu.jsonl" "$tmp/limits.jsonl" "$tmp/gok.jsonl" "$tmp/limits_after.jsonl" <<'PY'
import json, statistics, sys
def load(path):
    ws, cfg = [], ""
    for line in open(path):
        d = json.loads(line)
        ws += d["windows"]
        cfg = d["config"]
    return ws, cfg
def summary(ws):
    allr = statistics.median(w[0] for w in ws)
    clean = [w[0] for w in ws if w[-1] < 0.1]
    return allr, (statistics.median(clean) if clean else None), len(clean), len(ws)
(gw, gc), (pw, pc) = load(sys.argv[1]), load(sys.argv[2])
ga, gcl, gn, gt = summary(gw)
pa, pcl, pn, pt = summary(pw)
print(f"godist [{gc}]: median {ga:.0f} samples/s all windows, clean {gcl and round(gcl)} ({gn}/{gt})")
print(f"pytorch [{pc}]: median {pa:.0f} samples/s all windows, clean {pcl and round(pcl)} ({pn}/{pt})")
line = f"cnn 1 thread: ratio {ga / pa:.2f}x over all windows"
if gcl and pcl:
    line += f", {gcl / pcl:.2f}x over clean windows"
print(line)
cw, _ = load(sys.argv[3])
gcpu = statistics.median(w[1] for w in gw)
pcpu = statistics.median(w[1] for w in cw)
print(f"cnn 1 thread, per own CPU-second: godist {gcpu:.0f}, pytorch {pcpu:.0f} samples/s, ratio {gcpu / pcpu:.2f}x "
      f"(pytorch wall median in those rounds {statistics.median(w[0] for w in cw):.0f})")
MFLOP = 2.86  # per sample: forward 1.08, backward 1.78 (conv 3x3x1x32 on 28x28, dense 5408x64, dense 64x10)
lim = [json.loads(l) for l in open(sys.argv[4])]
peak = statistics.median(d["peak_gflops"] for d in lim if "peak_gflops" in d) if any("peak_gflops" in d for d in lim) else None
avx2 = [d["fma_avx2_gflops"] for d in lim if "fma_avx2_gflops" in d]
def frac(name, sps):
    gf = sps * MFLOP / 1e3
    if peak:
        print(f"cnn 1 thread, {name}: {gf:.1f} GFLOP/s per own CPU-second = {100 * gf / peak:.1f}% of the core's fp32 peak "
              f"{peak:.0f} GFLOP/s (best FMA loop, median of {len(lim)} rounds; AVX2 loop {statistics.median(avx2) if avx2 else 0:.0f}); "
              f"pytorch {pcpu * MFLOP / 1e3:.1f} GFLOP/s = {100 * pcpu * MFLOP / 1e3 / peak:.1f}%")
    else:
        print(f"cnn 1 thread, {name}: {gf:.1f} GFLOP/s per own CPU-second (no FMA loop for this CPU: peak not measured)")
frac(gc.split("kernels ")[-1], gcpu)
# Each round's godist figure against the peak measured just before and just after it.
after = [json.loads(l) for l in open(sys.argv[6])]
rounds = [json.loads(l)["windows"] for l in open(sys.argv[1])]
fr = []
for ws, b, a in zip(rounds, lim, after):
    if "peak_gflops" in b and "peak_gflops" in a:
        gf = statistics.median(w[1] for w in ws) * MFLOP / 1e3
        fr.append((gf / ((b["peak_gflops"] + a["peak_gflops"]) / 2), b["peak_gflops"], a["peak_gflops"]))
if fr:
    print(f"cnn 1 thread, {gc.split('kernels ')[-1]}, within rounds: {100 * statistics.median(f[0] for f in fr):.1f}% of the "
          f"core's fp32 peak (median of {len(fr)} rounds, each against the peak just before and after it: "
          + ", ".join(f"{100 * f[0]:.1f}% of {f[1]:.0f}-{f[2]:.0f}" for f in fr) + "; goal >= 30%)")
ok = [json.loads(l) for l in open(sys.argv[5]) if l.startswith("{")]
if ok:
    kw = [w for d in ok for w in d["windows"]]
    kcpu = statistics.median(w[1] for w in kw)
    print(f"godist [{ok[-1]['config']}]: median {statistics.median(w[0] for w in kw):.0f} samples/s all windows, "
          f"{kcpu:.0f} per own CPU-second, ratio to pytorch {kcpu / pcpu:.2f}x per own CPU-second")
    frac(ok[-1]["config"].split("kernels ")[-1], kcpu)
PY
