#!/bin/sh
# Keras Fit under ParameterServerStrategy with the ps and the workers as processes:
# 1 worker, then ROUNDS rounds (default 4) of 2 workers, each between two co-located
# bounds: two independent 1-worker jobs run side by side (no communication between them),
# whose summed throughput is what two workers sharing these cores can reach. The machine's
# speed drifts by tens of percent within seconds (bench/RESULTS.md), so a round's bound is
# the mean of the pair run just before and just after its 2-worker run; prints each round's
# 2-worker throughput as a fraction of it, and the median of those fractions (goal >= 0.9).
# Extra arguments go to the bench (e.g. -profile DIR).
set -e
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-4}
go build -o /tmp/godist-bench-ps ./bench/ps
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
median() { sed -n 's/^workers [0-9]*: median \([0-9]*\) examples.*/\1/p' "$1"; }
pair() {
  /tmp/godist-bench-ps -workers 1 "$@" >"$out/a" &
  /tmp/godist-bench-ps -workers 1 "$@" >"$out/b" &
  wait
  echo "$(median "$out/a") $(median "$out/b")"
}
/tmp/godist-bench-ps -workers 1 "$@" | tee "$out/one"
one=$(median "$out/one")
: >"$out/rounds"
for r in $(seq "$ROUNDS"); do
  pre=$(pair "$@")
  /tmp/godist-bench-ps -workers 2 "$@" | tee "$out/two"
  post=$(pair "$@")
  echo "$r $(median "$out/two") $pre $post" >>"$out/rounds"
done
awk -v one="$one" '
  NF == 6 && $2 != "" {
    bound = ($3 + $4 + $5 + $6) / 2
    r[++n] = $2 / bound
    printf "round %d: ps 2 workers %d examples/s (%.2fx one worker); co-located bound %d (pairs %d + %d before, %d + %d after): %.2f of the bound\n", $1, $2, $2 / one, bound, $3, $4, $5, $6, r[n]
  }
  END {
    if (n == 0) { print "co-located bound: not measured (a run printed no median)"; exit }
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
    m = (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
    printf "ps 2 workers: %.2f of the co-located bound (median of %d rounds; goal >= 0.9: %s)\n", m, n, (m >= 0.9) ? "met" : "not met"
  }' "$out/rounds"
