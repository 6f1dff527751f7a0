"""One rank of PyTorch DDP (gloo) training the peer CNN between hosts (bench/hosts/fit.sh starts
one per namespace): shared/peers/ddp_throughput.py's worker, with the rank, the world and the
master's address given instead of spawned on loopback.
Usage: /usr/bin/python3 ddp_fit.py --rank R --world N --master ADDR:PORT --peers DIR
       [--windows 3] [--steps 20] [--warmup 20] [--threads 1]
The model and data are shared/peers/model.py's (make_model, synthetic_batches(16, 64, seed=rank)),
per-rank batch 64 (global 64*N), Adam 1e-3. Rank 0 prints one JSON line: the global samples/s
of every timed window (a barrier before and after its steps), their median, and the gradient's
size in bytes (what each step all-reduces).
"""
import argparse, json, os, statistics, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--rank", type=int, required=True)
ap.add_argument("--world", type=int, required=True)
ap.add_argument("--master", required=True)
ap.add_argument("--peers", required=True, help="shared/peers (model.py, cpuacct.py)")
ap.add_argument("--windows", type=int, default=3)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--threads", type=int, default=1)
a = ap.parse_args()
sys.path.insert(0, a.peers)

# gloo binds the interface that carries the host's name; in a namespace that is eth0.
os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
import torch, torch.nn as nn, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from model import make_model, synthetic_batches
from cpuacct import system_busy_s

torch.set_num_threads(a.threads)
dist.init_process_group("gloo", init_method=f"tcp://{a.master}", rank=a.rank, world_size=a.world)
torch.manual_seed(0)
model = DDP(make_model())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
lossf = nn.CrossEntropyLoss()
xs, ys = synthetic_batches(16, 64, seed=a.rank)


def step(i):
    opt.zero_grad(set_to_none=True)
    loss = lossf(model(xs[i % 16]), ys[i % 16])
    loss.backward()
    opt.step()
    return loss


for i in range(a.warmup):
    step(i)
out = []
for w in range(a.windows):
    dist.barrier()
    b0, p0, t0 = system_busy_s(), time.process_time(), time.perf_counter()
    for i in range(a.steps):
        loss = step(i)
    dist.barrier()
    wall, own = time.perf_counter() - t0, torch.tensor([time.process_time() - p0], dtype=torch.float64)
    busy = system_busy_s() - b0
    dist.all_reduce(own)  # CPU of all ranks together
    out.append((a.steps * 64 * a.world / wall, max(0.0, busy - own.item()) / wall))
if a.rank == 0:
    rates = [r for r, _ in out]
    print(json.dumps({"config": f"PyTorch {torch.__version__} DDP gloo, {a.world} processes x {a.threads} thread(s), global batch {64 * a.world}",
                      "workers": a.world, "loss_last": round(float(loss), 4),
                      "grad_bytes": 4 * sum(p.numel() for p in model.parameters()),
                      "median_samples_per_s_all": round(statistics.median(rates), 1),
                      "windows": [[round(r, 1), round(o, 2)] for r, o in out]}), flush=True)
dist.barrier()
dist.destroy_process_group()
