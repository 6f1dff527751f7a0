#!/usr/bin/env bash
# All-reduce bus bandwidth: godist's ring over transport.GRPC (gRPC handshake, TCP data path;
# 2 processes, loopback) against PyTorch gloo (../shared/peers/allreduce_gloo.py), in the same
# run, for 1, 16 and 64 MiB of float32.
# Prints both figures and the ratio godist/gloo of the median busbw (goal: >= 1.0x), and
# godist's busbw as a fraction of the loopback TCP bandwidth of one stream measured in the
# same run (bench/limits -only tcp; goal at 16 and 64 MiB: >= 0.9), and of the per-direction
# rate of one loopback connection carrying a stream each way at once (what a 2-rank ring
# does: each rank sends while it receives; on 2 cores this is the bound that applies).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=${ITERS:-30}
bin=$(mktemp -d)/allreduce
trap 'rm -rf "$(dirname "$bin")"' EXIT
(cd "$root" && go build -o "$bin" ./bench/allreduce && go build -o "$bin.limits" ./bench/limits)
echo "--- godist"
"$bin" --world 2 --iters "$iters" | tee "$bin.godist"
echo "--- limit: loopback TCP, one stream"
"$bin.limits" -only tcp -reps 3 | tee "$bin.tcp"
/usr/bin/python3 - "$bin.godist" "$bin.tcp" <<'PY'
import json, sys
lim = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")][-1]
tcp, ex = lim["tcp_loopback_GBps"], lim["tcp_exchange_GBps"]
for line in open(sys.argv[1]):
    if line.startswith("{"):
        d = json.loads(line)
        print(f"{d['size_MiB']:3d} MiB: godist busbw {d['busbw_GBps']:.3f} GB/s = {d['busbw_GBps'] / tcp:.2f} of one loopback TCP stream ({tcp:.2f} GB/s), "
              f"{d['busbw_GBps'] / ex:.2f} of a stream each way ({ex:.2f} GB/s per direction)")
PY
peer="$root/../shared/peers/allreduce_gloo.py"
if [ ! -f "$peer" ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "--- gloo: skipped ($peer or /usr/bin/python3 with torch missing)"
  exit 0
fi
echo "--- gloo"
(cd "$(dirname "$peer")" && /usr/bin/python3 allreduce_gloo.py --world 2 --iters "$iters") | tee "$bin.gloo"
echo "--- ratio (busbw godist / gloo, medians over all iterations)"
/usr/bin/python3 - "$bin.godist" "$bin.gloo" <<'PY'
import json, sys
def load(path, key):
    out = {}
    for line in open(path):
        if line.startswith("{"):
            d = json.loads(line); out[d["size_MiB"]] = d[key]
    return out
g, p = load(sys.argv[1], "busbw_GBps"), load(sys.argv[2], "busbw_GBps_all")
for mib in sorted(g):
    if mib in p and p[mib] > 0:
        print(f"{mib:3d} MiB: godist {g[mib]:.3f} GB/s, gloo {p[mib]:.3f} GB/s, ratio {g[mib]/p[mib]:.2f}x")
PY
