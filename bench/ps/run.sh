#!/bin/sh
# Keras Fit under ParameterServerStrategy with the ps and the workers as processes:
# 2 workers against 1 (see main.go), then the co-located bound: two independent 1-worker
# jobs run side by side (no communication between them), whose summed throughput is what
# two workers sharing these cores can reach; prints the 2-worker throughput as a fraction
# of it. Extra arguments go to the bench (e.g. -profile DIR).
set -e
cd "$(dirname "$0")/../.."
go build -o /tmp/godist-bench-ps ./bench/ps
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
/tmp/godist-bench-ps "$@" | tee "$out/main"
/tmp/godist-bench-ps -workers 1 "$@" >"$out/a" &
/tmp/godist-bench-ps -workers 1 "$@" >"$out/b" &
wait
two=$(sed -n 's/^workers 2: median \([0-9]*\) examples.*/\1/p' "$out/main")
a=$(sed -n 's/^workers 1: median \([0-9]*\) examples.*/\1/p' "$out/a")
b=$(sed -n 's/^workers 1: median \([0-9]*\) examples.*/\1/p' "$out/b")
if [ -n "$two" ] && [ -n "$a" ] && [ -n "$b" ]; then
  awk -v two="$two" -v a="$a" -v b="$b" 'BEGIN {
    bound = a + b
    printf "co-located bound (2 independent 1-worker jobs side by side): %d examples/s (%d + %d); ps 2 workers %d = %.2f of the bound (goal >= 0.9: %s)\n",
      bound, a, b, two, two / bound, (two / bound >= 0.9) ? "met" : "not met"
  }'
else
  echo "co-located bound: not measured (a run printed no median)"
fi
