#!/usr/bin/env bash
# What one core of this machine allows, measured in this run (bench/limits): fp32 peak of one
# core (AVX2 and AVX-512 FMA loops), single-thread memory bandwidth (streaming read, copy),
# the cache a core keeps (alone, and while CPU 1 loads as much), loopback TCP bandwidth of
# one stream (a Go loop; iperf3 too when it is installed). The
# other benches print their figures against these: bench/cnn runs the FMA loops itself, in
# its own run, and prints the CNN step's GFLOP/s as a fraction of the peak.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
bench_setup 1
(cd "$root" && go build -o "$tmp/limits" ./bench/limits)
bench_machine
"$tmp/limits" -reps "${REPS:-5}"
if command -v iperf3 >/dev/null; then
  iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
  sleep 0.5
  echo "limit: loopback TCP, one stream, iperf3: $(iperf3 -c 127.0.0.1 -p 5299 -t 3 -f g | grep receiver | awk '{print $7, $8}')"
else
  echo "limit: loopback TCP, one stream, iperf3: skipped (iperf3 not installed)"
fi
