#!/usr/bin/env bash
# Training throughput of 2 workers x 1 thread against 1 worker x 1 thread on the peer CNN
# (shared/peers/model.py, per-worker batch 64, synthetic data): godist's keras Fit under
# MultiWorkerMirroredStrategy (bench/multiworker) beside PyTorch DDP over gloo
# (ddp_throughput.py --world 2 --threads 1) in the same run. The machine is shared, so the
# runs alternate in ROUNDS rounds (default 6) of WINDOWS windows (default 5) of STEPS steps
# (default 30); figures are medians over all windows (and over "clean" windows, where other
# processes used under 0.1 cores, when there are any). Prints both speed-ups (goal: godist's
# at least 1.8x and above DDP's).
#
# It also measures the co-located bound: two independent one-worker processes run side by
# side (no communication), whose summed throughput is what two workers sharing these cores
# and their memory can reach, and prints MWMS's 2-worker throughput as a fraction of it. The
# machine's speed drifts by tens of percent within seconds (bench/RESULTS.md), so each round
# runs the pair just before and just after the 2-worker run and takes their mean as the
# round's bound;
# and, with each of the two pinned to its own core, the lockstep bound: twice the slower
# core's figure, the most that workers waiting for each other at every step can reach
# (the cores of a VM can differ: on 2026-11-26 one worker trained 46% faster on CPU 1).
#
# cluster.Launch binds each of the 2 workers to its own core (as the pair above is pinned);
# each round also runs them unbound (-nopin: LaunchSpec.NoPinning), right after.
#
# Each round also runs the 2 workers with keras.BalanceWorkers(true) (-balance: every global
# batch split by the workers' measured speeds) right after the plain 2-worker run, against
# the same bound.
#
# The peer's figure against the same kind of bound: each round runs two one-process PyTorch
# trainings (cnn_throughput.py --threads 1, no DDP) side by side, pinned like godist's pair,
# just before and just after the DDP run, and prints DDP's 2-process throughput as a
# fraction of their summed throughput (DDP's ranks are not pinned: torch.multiprocessing
# starts them as they are).
#
# The bound depends on the data: a one-worker process ran its steps 7-13% faster on the
# 16 batches of the peer's synthetic data (3 MB) than on 256 (51 MB) in 150-step windows
# (bench/RESULTS.md; the caches here keep 3-12 MiB a core: the limit printed first), and a worker of two
# holds twice a solo's data (it shards the global dataset). Each round therefore also runs
# the pair and the 2 workers on BIG batches a worker (default 256), as real data is, and
# prints that fraction of the bound beside the one on the peer's data.
#
# Each round also trains with the course's custom loop (-custom: strategy.Run of a step that
# takes a GradientTape's gradients and applies them with optimizer.ApplyGradients, the
# losses summed with strategy.Reduce), 1 worker then 2, and prints 2 vs 1; then the same on
# BIG batches a worker, where its garbage is collected 6x less often.
#
# Every godist worker runs its kernels on one thread (GODIST_KERNEL_THREADS=1) with
# GOMAXPROCS=PROCS (default 1; PROCS=2 leaves each worker a second P for its all-reduce
# goroutines, as DDP's gloo threads run beside its one compute thread: measured slower on
# 2 cores, see bench/RESULTS.md "multiworker").
set -euo pipefail
PROCS=${PROCS:-1}
BIG=${BIG:-256}
source "$(dirname "$0")/../lib.sh"
bench_setup 6
bench_build mw multiworker
bench_build limits limits
bench_machine
# What the caches hold for a core varies from hour to hour on a VM (other tenants share the
# last-level cache): measured in this run, before the rounds.
"$tmp/limits" -only cache -reps 2 | grep '^limit'
PIN=
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then PIN=1; fi
# The co-located bound: two independent one-worker processes side by side (no
# communication) share the cores and the memory as the two workers do.
# Each is pinned to its own core (a to CPU 0, b to CPU 1) where taskset and two cores are
# there, so that each core's speed is known: the cores of a VM need not be equally fast,
# and workers in lockstep all go at the slowest one's pace. Round $r's pairs go to
# solo$r.jsonl.
# "solos big -batches $BIG" runs the pair with those arguments into big$r.jsonl.
solos() {
  local name=${1:-solo}
  shift || true
  for side in a b; do
    pin=()
    if [ -n "$PIN" ]; then pin=(taskset -c "$([ $side = a ] && echo 0 || echo 1)"); fi
    GOMAXPROCS=$PROCS GODIST_KERNEL_THREADS=1 OPENBLAS_NUM_THREADS=1 "${pin[@]}" "$tmp/mw" -workers 1 -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" "$@" 2>/dev/null | grep '^{' >"$tmp/$name.$r.$side" &
  done
  wait
  cat "$tmp/$name.$r.a" "$tmp/$name.$r.b" >>"$tmp/$name$r.jsonl"
}
# The peer's co-located bound: two one-process PyTorch trainings side by side, pinned like
# solos' pair; round $r's pairs go to pysolo$r.jsonl (an empty line for a run bench_peer
# stopped).
pysolos() {
  for side in a b; do
    pin=()
    if [ -n "$PIN" ]; then pin=(taskset -c "$([ $side = a ] && echo 0 || echo 1)"); fi
    (cd "$peers" && OPENBLAS_NUM_THREADS=1 bench_peer 300 "${pin[@]}" /usr/bin/python3 cnn_throughput.py --threads 1 --windows "$WINDOWS" --steps "$STEPS" --warmup 30) | { grep '^{' || true; } >"$tmp/pysolo.$r.$side" &
  done
  wait
  for side in a b; do
    line=$(head -n 1 "$tmp/pysolo.$r.$side")
    echo "${line:-{\"config\": \"stopped (bench_peer)\", \"windows\": []\}}" >>"$tmp/pysolo$r.jsonl"
  done
}
for r in $(seq "$ROUNDS"); do
  GOMAXPROCS=$PROCS GODIST_KERNEL_THREADS=1 OPENBLAS_NUM_THREADS=1 "$tmp/mw" -workers 1 -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" 2>/dev/null | grep '^{' >>"$tmp/go1.jsonl"
  solos # before the 2-worker run
  OPENBLAS_NUM_THREADS=1 "$tmp/mw" -workers 2 -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" 2>/dev/null | grep '^{' >>"$tmp/go2.jsonl"
  OPENBLAS_NUM_THREADS=1 "$tmp/mw" -workers 2 -nopin -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" 2>/dev/null | grep '^{' >>"$tmp/go2free.jsonl"
  # keras.BalanceWorkers(true): every global batch split by the workers' measured speeds.
  OPENBLAS_NUM_THREADS=1 "$tmp/mw" -workers 2 -balance -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" 2>/dev/null | grep '^{' >>"$tmp/go2bal.jsonl"
  solos # and after them
  # The same on BIG batches a worker (data no cache here holds): pair, 2 workers, pair.
  solos big -batches "$BIG"
  OPENBLAS_NUM_THREADS=1 "$tmp/mw" -workers 2 -batches "$BIG" -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" 2>/dev/null | grep '^{' >>"$tmp/go2big.jsonl"
  solos big -batches "$BIG"
  # The course's custom loop (strategy.Run, GradientTape, optimizer.ApplyGradients,
  # strategy.Reduce) instead of Fit: 1 worker, then 2.
  GOMAXPROCS=$PROCS GODIST_KERNEL_THREADS=1 OPENBLAS_NUM_THREADS=1 "$tmp/mw" -custom -workers 1 -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" 2>/dev/null | grep '^{' >>"$tmp/go1custom.jsonl"
  OPENBLAS_NUM_THREADS=1 "$tmp/mw" -custom -workers 2 -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" 2>/dev/null | grep '^{' >>"$tmp/go2custom.jsonl"
  # The same on BIG batches a worker: a live heap of ~100 MB a worker instead of ~18, so
  # the custom loop's garbage (fresh gradients, as TF's tape gives) is collected every ~25
  # steps instead of every ~4 (bench/RESULTS.md). Its heap grows to ~220 MB first, on pages
  # never touched before, so these runs take a warm-up of 150 steps.
  GOMAXPROCS=$PROCS GODIST_KERNEL_THREADS=1 OPENBLAS_NUM_THREADS=1 "$tmp/mw" -custom -batches "$BIG" -workers 1 -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" -warmup $(( (150 + STEPS - 1) / STEPS )) 2>/dev/null | grep '^{' >>"$tmp/go1custombig.jsonl"
  OPENBLAS_NUM_THREADS=1 "$tmp/mw" -custom -batches "$BIG" -workers 2 -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" -warmup $(( (150 + STEPS - 1) / STEPS )) 2>/dev/null | grep '^{' >>"$tmp/go2custombig.jsonl"
  # The same without shared memory: the gradients cross loopback TCP, as between hosts.
  GODIST_SHARED_MEMORY=0 OPENBLAS_NUM_THREADS=1 "$tmp/mw" -workers 2 -procs "$PROCS" -windows "$WINDOWS" -steps "$STEPS" 2>/dev/null | grep '^{' >>"$tmp/go2tcp.jsonl"
  pysolos # before DDP
  (cd "$peers" && bench_peer 600 /usr/bin/python3 ddp_throughput.py --world 2 --threads 1 --windows "$WINDOWS" --steps "$STEPS" --warmup 30) | { grep '^{' || true; } >"$tmp/py.$r"
  for k in 1 2; do
    line=$(sed -n "${k}p" "$tmp/py.$r")
    echo "${line:-{\"config\": \"stopped (bench_peer)\", \"windows\": []\}}" >>"$tmp/py$k.jsonl"
  done
  pysolos # and after it
done
PIN=$PIN BIG=$BIG /usr/bin/python3 - "$tmp" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
def load(name):
    ws, cfg = [], ""
    for line in open(f"{d}/{name}.jsonl"):
        j = json.loads(line)
        ws += j["windows"]
        cfg = j["config"]
    if not ws:  # the peer was stopped in every round (bench_peer)
        return cfg, float("nan"), None, "0/0"
    allr = statistics.median(r for r, _ in ws)
    clean = [r for r, o in ws if o < 0.1]
    return cfg, allr, (statistics.median(clean) if clean else None), f"{len(clean)}/{len(ws)}"
res = {k: load(k) for k in ("go1", "go2", "go2free", "go2bal", "go2tcp", "go2big", "go1custom", "go2custom", "go1custombig", "go2custombig", "py1", "py2")}
# Each round's median (nan for a round whose peer was stopped).
def per(name):
    out = []
    for l in open(f"{d}/{name}.jsonl"):
        w = json.loads(l)["windows"]
        out.append(statistics.median(x[0] for x in w) if w else float("nan"))
    return out
for k, (cfg, a, c, n) in res.items():
    print(f"{k} [{cfg}]: median {a:.0f} samples/s all windows, clean {c and round(c)} ({n})")
g, p = res["go2"][1] / res["go1"][1], res["py2"][1] / res["py1"][1]
print(f"godist 2 workers without shared memory (GODIST_SHARED_MEMORY=0, the all-reduce over loopback TCP): "
      f"{res['go2tcp'][1] / res['go1'][1]:.2f}x one worker")
line = f"multiworker 2x1 vs 1x1: godist {g:.2f}x, DDP {p:.2f}x over all windows"
if all(res[k][2] for k in res):
    line += f"; clean windows: godist {res['go2'][2] / res['go1'][2]:.2f}x, DDP {res['py2'][2] / res['py1'][2]:.2f}x"
print(line)
# The bound two workers can reach on these cores: the summed throughput of two independent
# one-worker processes run side by side, median over the rounds.
def pair_bounds(name):
    bounds, sides = [], []  # sides: each round's pair sums before and after the 2-worker run
    r = 1
    while True:
        try:
            ws = [json.loads(l)["windows"] for l in open(f"{d}/{name}{r}.jsonl")]
        except FileNotFoundError:
            break
        # a (CPU 0), b (CPU 1) before the 2-worker run, then a, b after it: the mean of the two sums
        m = [statistics.median(x for x, _ in w) for w in ws]
        bounds.append(sum(m) / (len(m) / 2))
        sides.append((m[0] + m[1], sum(m[2:4])))
        r += 1
    return bounds, sides
bounds, sides = pair_bounds("solo")
bigb, _ = pair_bounds("big")
if bounds:
    b = statistics.median(bounds)
    print(f"co-located bound (2 independent 1-worker processes side by side): {b:.0f} samples/s "
          f"(rounds {', '.join(f'{x:.0f}' for x in bounds)}); MWMS 2 workers {res['go2'][1]:.0f} = {res['go2'][1] / b:.2f} of the bound "
          f"over all windows; without shared memory {res['go2tcp'][1] / b:.2f}")
    # Round by round (the machine's speed drifts between rounds; each round's runs are minutes apart at most).
    for i, (two, tcp, bound, (pre, post)) in enumerate(zip(per("go2"), per("go2tcp"), bounds, sides), 1):
        print(f"  round {i}: MWMS 2 workers {two:.0f}, without shared memory {tcp:.0f}, bound {bound:.0f} (pairs {pre:.0f} before, {post:.0f} after): {two / bound:.2f} and {tcp / bound:.2f} of the bound")
    # Workers in lockstep wait for the slower one at every step, so on cores of unequal speed
    # they can reach at most twice the slower core's figure: the lockstep bound.
    def core_means(i):
        m = [statistics.median(x for x, _ in json.loads(l)["windows"]) for l in open(f"{d}/solo{i}.jsonl")]
        return [statistics.mean(m[0::2]), statistics.mean(m[1::2])]  # CPU 0, CPU 1: before and after
    cores = [core_means(i) for i in range(1, len(bounds) + 1)]
    lock = [2 * min(c) for c in cores]
    lb = statistics.median(lock)
    print(f"one worker per core, side by side (CPU 0, CPU 1{'' if os.environ.get('PIN') else ', unpinned'}): "
          + "; ".join(f"round {i}: {c[0]:.0f}, {c[1]:.0f}" for i, c in enumerate(cores, 1))
          + f"; lockstep bound (twice the slower) {lb:.0f}: MWMS 2 workers {res['go2'][1] / lb:.2f} of it over all windows")
# The goals, on ratios taken within each round (a round's runs are a minute apart; the
# machine's speed drifts by 20-45% between rounds, which ratios across rounds would mix in).
def ratios(a, b):
    return [x / y for x, y in zip(per(a), per(b))]
def med(xs):
    xs = [x for x in xs if x == x]  # rounds whose peer was stopped have none
    return statistics.median(xs) if xs else float("nan")
gs, ps = ratios("go2", "go1"), ratios("py2", "py1")
print(f"within rounds (median of the rounds' ratios): godist 2x1 vs 1x1 {med(gs):.2f}x (rounds {', '.join(f'{x:.2f}' for x in gs)}), "
      f"DDP {med(ps):.2f}x (rounds {', '.join(f'{x:.2f}' for x in ps)})")
print(f"goal (>= 1.8x and above DDP): {'met' if med(gs) >= 1.8 and med(gs) > med(ps) else 'not met'}")
cs = ratios("go2custom", "go1custom")
print(f"within rounds: the custom loop (Run, GradientTape, ApplyGradients, Reduce), 2 workers vs 1: {med(cs):.2f}x "
      f"(rounds {', '.join(f'{x:.2f}' for x in cs)}); one worker's custom loop {med(ratios('go1custom', 'go1')):.2f} of its Fit")
cb = ratios("go2custombig", "go1custombig")
print(f"within rounds, on {os.environ.get('BIG', '256')} batches a worker: the custom loop, 2 workers vs 1: {med(cb):.2f}x "
      f"(rounds {', '.join(f'{x:.2f}' for x in cb)}); 2 workers' custom loop {med(ratios('go2custombig', 'go2big')):.2f} of their Fit")
if bounds:
    fb = [two / bound for two, bound in zip(per("go2"), bounds)]
    fl = [two / l for two, l in zip(per("go2"), lock)]
    print(f"within rounds: MWMS 2 workers {med(fb):.2f} of the co-located bound (rounds {', '.join(f'{x:.2f}' for x in fb)}; goal >= 0.9: "
          f"{'met' if med(fb) >= 0.9 else 'not met'}), {med(fl):.2f} of the lockstep bound (rounds {', '.join(f'{x:.2f}' for x in fl)})")
    fg = [two / bound for two, bound in zip(per("go2big"), bigb)]
    print(f"within rounds, on {os.environ.get('BIG', '256')} batches a worker (data no cache holds): MWMS 2 workers {med(fg):.2f} of the co-located bound "
          f"(rounds {', '.join(f'{x:.2f}' for x in fg)}; bounds {', '.join(f'{x:.0f}' for x in bigb)}; goal >= 0.9: {'met' if med(fg) >= 0.9 else 'not met'})")
    fbf = [two / bound for two, bound in zip(per("go2free"), bounds)]
    print(f"within rounds: MWMS 2 workers unbound (-nopin) {med(fbf):.2f} of the co-located bound (rounds {', '.join(f'{x:.2f}' for x in fbf)})")
    # The peer against its own co-located bound, round by round: DDP's 2 processes over two
    # one-process PyTorch trainings side by side (before and after the DDP run).
    pyb = []
    for i in range(1, len(bounds) + 1):
        ws = [json.loads(l)["windows"] for l in open(f"{d}/pysolo{i}.jsonl")]
        pyb.append(sum(statistics.median(x for x, _ in w) for w in ws) / 2 if len(ws) == 4 and all(ws) else float("nan"))
    fp = [two / bound for two, bound in zip(per("py2"), pyb)]
    print(f"within rounds: DDP 2 processes {med(fp):.2f} of its co-located bound (two 1-process PyTorch trainings side by side: "
          f"{', '.join(f'{x:.0f}' for x in pyb)} samples/s; rounds {', '.join(f'{x:.2f}' for x in fp)}); MWMS {med(fb):.2f} of its own")
    fbb = [two / bound for two, bound in zip(per("go2bal"), bounds)]
    print(f"within rounds: MWMS 2 workers with BalanceWorkers {med(fbb):.2f} of the co-located bound (rounds {', '.join(f'{x:.2f}' for x in fbb)}; "
          f"goal >= 0.9: {'met' if med(fbb) >= 0.9 else 'not met'})")
PY
