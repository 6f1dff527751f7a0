"""One rank of a gloo all-reduce between hosts (bench/hosts/run.sh starts one per namespace).
Usage: /usr/bin/python3 gloo_allreduce.py --rank R --world N --master ADDR:PORT [--sizes 1,16,64]
       [--iters 5] [--warmup 2]
Rank 0 prints one JSON line per size with the figures bench/allreduce prints: time per
iteration the max over ranks, median over iterations, algbw = bytes/time,
busbw = algbw * 2(n-1)/n, GB/s = 1e9 B/s.
"""
import argparse, json, os, statistics, time

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--rank", type=int, required=True)
ap.add_argument("--world", type=int, required=True)
ap.add_argument("--master", required=True)
ap.add_argument("--sizes", default="1,16,64")
ap.add_argument("--iters", type=int, default=5)
ap.add_argument("--warmup", type=int, default=2)
a = ap.parse_args()

# gloo binds the interface that carries the host's name; in a namespace that is eth0.
os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://{a.master}", rank=a.rank, world_size=a.world)
n = a.world
for mib in [int(s) for s in a.sizes.split(",")]:
    t = torch.ones(mib * 1024 * 1024 // 4, dtype=torch.float32)
    for _ in range(a.warmup):
        dist.all_reduce(t)
    times = []
    for _ in range(a.iters):
        dist.barrier()
        s = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - s)
    tt = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(tt, op=dist.ReduceOp.MAX)
    c = torch.full((4,), float(a.rank + 1))
    dist.all_reduce(c)
    if not bool(torch.all(c == n * (n + 1) / 2)):
        raise SystemExit("gloo sum check failed")
    if a.rank == 0:
        med = statistics.median(tt.tolist())
        alg = mib * 1024 * 1024 / med / 1e9
        print(json.dumps({"size_MiB": mib, "median_ms": round(med * 1e3, 3), "algbw_GBps": round(alg, 3),
                          "busbw_GBps": round(alg * 2 * (n - 1) / n, 3), "min_ms": round(min(tt.tolist()) * 1e3, 3)}), flush=True)
dist.barrier()
dist.destroy_process_group()
