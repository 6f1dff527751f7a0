#!/usr/bin/env bash
# Runs every benchmark suite under bench/*/run.sh, each printing godist's figure, the peer's
# figure measured in the same run, and the ratio. Results go to bench/out/. bench/limits runs
# first: what one core allows (fp32 FMA peak, memory and loopback TCP bandwidth, the cache a
# core keeps) in this run. bench/multiworker/scale.sh (not run here) is the many-core check
# for a machine without Go (build here, run there).
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p out
status=0
for s in limits/run.sh $(ls */run.sh | grep -v '^limits/'); do
  echo "=== bench/$s"
  bash "$s" 2>&1 | tee "out/$(dirname "$s").log" || status=1
done
exit $status
