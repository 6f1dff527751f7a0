#!/usr/bin/env bash
# All-reduce bus bandwidth: godist's all-reduce over transport.GRPC (2 processes on one host)
# against PyTorch gloo (../shared/peers/allreduce_gloo.py), in the same run, for 1, 16 and 64
# MiB of float32. godist runs twice: as training runs it between workers of one host (the
# ranks share memory and read each other's buffers in place), and as between hosts (--no-shm:
# the ring over the TCP data path, every byte through loopback TCP, as gloo moves them).
# Prints both figures and the ratio godist/gloo of the median busbw (goal: >= 1.0x), and
# godist's busbw as a fraction of the loopback TCP bandwidth of one stream measured in the
# same run (bench/limits -only tcp; goal at 16 and 64 MiB: >= 0.9), and of the per-direction
# rate of one loopback connection carrying a stream each way at once (what a 2-rank ring
# does: each rank sends while it receives; on 2 cores this is the bound that applies).
set -euo pipefail
source "$(dirname "$0")/../lib.sh" # bench_peer
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
iters=${ITERS:-30}
bin=$(mktemp -d)/allreduce
trap 'rm -rf "$(dirname "$bin")"' EXIT
(cd "$root" && go build -o "$bin" ./bench/allreduce && go build -o "$bin.limits" ./bench/limits)
echo "--- godist, shared memory"
"$bin" --world 2 --iters "$iters" | tee "$bin.shm"
echo "--- godist, TCP ring (--no-shm)"
"$bin" --world 2 --iters "$iters" --no-shm | tee "$bin.godist"
echo "--- limits: loopback TCP (one stream; a stream each way), one thread's memory copy"
"$bin.limits" -only tcp,mem -reps 3 | tee "$bin.tcp"
/usr/bin/python3 - "$bin.tcp" "$bin.shm" "$bin.godist" <<'PY'
import json, sys
lim = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
tcp, ex, mc = lim["tcp_loopback_GBps"], lim["tcp_exchange_GBps"], lim["mem_copy_GBps"]
for name, path in (("shared memory", sys.argv[2]), ("TCP ring", sys.argv[3])):
  for line in open(path):
    if line.startswith("{"):
        d = json.loads(line)
        print(f"{d['size_MiB']:3g} MiB, {name}: godist busbw {d['busbw_GBps']:.3f} GB/s = {d['busbw_GBps'] / tcp:.2f} of one loopback TCP stream ({tcp:.2f} GB/s), "
              f"{d['busbw_GBps'] / ex:.2f} of a stream each way ({ex:.2f} GB/s per direction)"
              + (f", {d['busbw_GBps'] / mc:.2f} of one thread's memory copy ({mc:.2f} GB/s)" if name == "shared memory" else ""))
PY
peer="$root/../shared/peers/allreduce_gloo.py"
if [ ! -f "$peer" ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "--- gloo: skipped ($peer or /usr/bin/python3 with torch missing)"
  exit 0
fi
echo "--- gloo"
(cd "$(dirname "$peer")" && bench_peer 600 /usr/bin/python3 allreduce_gloo.py --world 2 --iters "$iters") | tee "$bin.gloo"
echo "--- ratio (busbw godist / gloo, medians over all iterations)"
/usr/bin/python3 - "$bin.gloo" "$bin.shm" "$bin.godist" <<'PY'
import json, sys
def load(path, key):
    out = {}
    for line in open(path):
        if line.startswith("{"):
            d = json.loads(line); out[d["size_MiB"]] = d[key]
    return out
p = load(sys.argv[1], "busbw_GBps_all")
for name, path in (("shared memory", sys.argv[2]), ("TCP ring", sys.argv[3])):
    g = load(path, "busbw_GBps")
    for mib in sorted(g):
        if mib in p and p[mib] > 0:
            print(f"{mib:3d} MiB, {name}: godist {g[mib]:.3f} GB/s, gloo {p[mib]:.3f} GB/s, ratio {g[mib]/p[mib]:.2f}x")
PY
