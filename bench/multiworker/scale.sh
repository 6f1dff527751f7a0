#!/usr/bin/env bash
# Issue 15's many-core check, for a machine with cores but no Go (the GPU machine: 16 cores,
# PyTorch): godist's keras Fit under MultiWorkerMirroredStrategy with 1, 2, 4 and 8 worker
# processes x 1 thread on the CPU (bench/multiworker, each worker bound to its share of the
# CPUs by cluster.Launch) against PyTorch DDP over gloo with the same counts
# (shared/peers/ddp_throughput.py --threads 1), and the co-located bound of 8: eight
# independent one-worker processes side by side, each pinned to its own core. Goal: 8
# workers >= 7x one.
#
#   bash bench/multiworker/scale.sh build   here: compiles bench/multiworker into scalebin/
#                                           and copies the peer scripts beside it
#   bash bench/multiworker/scale.sh run     there, in the repository root, with scalebin/
#                                           carried (it is git-ignored: the device tool's
#                                           carry): the figures go to $OUT (or scalebin/out)
#
# WINDOWS (default 5) windows of STEPS (default 150) steps each; PY runs the peer (default:
# the first of python3 and /usr/bin/python3 that has torch). The whole run takes a few minutes.
set -uo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
build)
  peers=${PEERS:-../shared/peers}
  mkdir -p scalebin/peers
  CGO_ENABLED=0 go build -ldflags='-s -w' -o scalebin/mw ./bench/multiworker || exit 1
  install -m 644 "$peers"/model.py "$peers"/cpuacct.py "$peers"/cnn_throughput.py "$peers"/ddp_throughput.py scalebin/peers/ || exit 1
  echo "scalebin/: mw and the peer scripts; on the other machine: bash bench/multiworker/scale.sh run"
  ;;
run)
  out=${OUT:-scalebin/out}
  mkdir -p "$out"
  W=${WINDOWS:-5}
  S=${STEPS:-150}
  if [ -z "${PY:-}" ]; then
    for py in python3 /usr/bin/python3; do
      if "$py" -c 'import torch' 2>/dev/null; then PY=$py; break; fi
    done
  fi
  PY=${PY:-python3}
  cpus=$(nproc)
  pin() { taskset -c "$@"; }
  if ! command -v taskset >/dev/null; then
    echo "taskset not found: the one-worker processes run unpinned"
    pin() { shift; "$@"; }
  fi
  { echo "cpus: $cpus"; lscpu 2>/dev/null | grep -E 'Model name|^CPU\(s\)|Thread|MHz' || true; } | tee "$out/machine.txt"
  : >"$out/mw.jsonl"
  for n in 1 2 4 8; do
    if [ "$n" -gt "$cpus" ]; then
      echo "godist $n workers: skipped ($cpus CPUs)"
      continue
    fi
    if [ "$n" = 1 ]; then
      GOMAXPROCS=1 GODIST_KERNEL_THREADS=1 pin 0 ./scalebin/mw -workers 1 -windows "$W" -steps "$S" 2>"$out/mw1.err" | grep '^{' >>"$out/mw.jsonl"
    else
      timeout 300 ./scalebin/mw -workers "$n" -windows "$W" -steps "$S" 2>"$out/mw$n.err" | grep '^{' >>"$out/mw.jsonl"
    fi
    echo "godist $n worker(s): $(tail -n 1 "$out/mw.jsonl" | grep -o '"median_samples_per_s_all": *[0-9.]*')"
  done
  # The co-located bound of 8: eight independent one-worker processes, each on its own core.
  if [ "$cpus" -ge 8 ]; then
    for c in 0 1 2 3 4 5 6 7; do
      GOMAXPROCS=1 GODIST_KERNEL_THREADS=1 pin "$c" ./scalebin/mw -workers 1 -windows "$W" -steps "$S" 2>/dev/null | grep '^{' >"$out/solo8.$c" &
    done
    wait
    cat "$out"/solo8.? >"$out/solo8.jsonl"
  fi
  : >"$out/ddp.jsonl"
  for n in 2 4 8; do
    if [ "$n" -gt "$cpus" ]; then
      continue
    fi
    # Each run first measures one process without DDP (the peer's 1), then DDP with n ranks.
    (cd scalebin/peers && OMP_NUM_THREADS=1 timeout 600 "$PY" ddp_throughput.py --world "$n" --threads 1 --windows "$W" --steps "$S" --warmup 30 --port $((29600 + n))) 2>"$out/ddp$n.err" | grep '^{' >>"$out/ddp.jsonl"
    echo "DDP $n ranks: $(tail -n 1 "$out/ddp.jsonl" | grep -o '"median_samples_per_s_all": *[0-9.]*')"
  done
  "$PY" - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, statistics, sys
d = sys.argv[1]
def lines(name):
    try:
        return [json.loads(l) for l in open(os.path.join(d, name)) if l.strip()]
    except FileNotFoundError:
        return []
mw = {j["workers"]: j["median_samples_per_s_all"] for j in lines("mw.jsonl")}
one = mw.get(1)
for n in sorted(mw):
    print(f"godist MWMS {n} worker(s) x 1 thread: {mw[n]:.0f} samples/s" + (f", {mw[n] / one:.2f}x one" if one else ""))
ddp = lines("ddp.jsonl")
for single, multi in zip(ddp[0::2], ddp[1::2]):
    print(f"DDP gloo: {multi['config']}: {multi['median_samples_per_s_all']:.0f} samples/s, "
          f"{multi['median_samples_per_s_all'] / single['median_samples_per_s_all']:.2f}x one process ({single['median_samples_per_s_all']:.0f})")
solos = lines("solo8.jsonl")
if len(solos) == 8 and 8 in mw:
    bound = sum(j["median_samples_per_s_all"] for j in solos)
    print(f"co-located bound of 8 (8 one-worker processes side by side, one per core): {bound:.0f} samples/s; "
          f"MWMS 8 workers {mw[8] / bound:.2f} of it")
if one and 8 in mw:
    print(f"goal (8 workers >= 7x one): {'met' if mw[8] / one >= 7 else 'not met'} ({mw[8] / one:.2f}x)")
PY
  ;;
*)
  echo "usage: bash bench/multiworker/scale.sh build|run" >&2
  exit 2
  ;;
esac
