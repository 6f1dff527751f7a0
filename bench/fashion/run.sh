#!/usr/bin/env bash
# Time to 90% test accuracy on the full Fashion-MNIST (Debian's dataset-fashion-mnist,
# 60k/10k) with the talk's model (seed 003) and Adam 1e-3, batch 64 per worker, two
# MultiWorkerMirrored worker processes of one thread each (bench/fashion: keras Fit), against
# PyTorch DDP with two processes of one thread each (../shared/peers/fashion_tta.py --world 2
# --threads 1) in the same run. Both shuffle every epoch, evaluate the full test set every
# 200 global steps and time training + evaluation, data loading excluded. Prints both times,
# the ratio (goal: godist <= 0.5x DDP) and both curves, and writes bench/fashion/accuracy.png
# (accuracy vs wall time and vs step). ROUNDS (default 1) alternates the two; the figures are
# the medians over the rounds.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
bench_setup 1
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
if [ ! -e "$DATA/train-images-idx3-ubyte.gz" ]; then
  echo "fashion: skipped: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist, installer/deps.sh)"
  exit 0
fi
bench_build fashion fashion
bench_machine
for r in $(seq "$ROUNDS"); do
  OPENBLAS_NUM_THREADS=1 "$tmp/fashion" -workers 2 -data "$DATA" | grep '^{' >"$tmp/go.$r.json"
  (cd "$peers" && OPENBLAS_NUM_THREADS=1 bench_peer 1800 /usr/bin/python3 fashion_tta.py --world 2 --threads 1 --data "$DATA") | grep '^{' >"$tmp/py.$r.json"
done
bench_machine
/usr/bin/python3 "$root/bench/fashion/report.py" "$tmp" "$ROUNDS" "$root/bench/fashion/accuracy.png"
