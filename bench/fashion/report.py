"""Report of bench/fashion/run.sh: reads DIR/go.R.json and DIR/py.R.json (the JSON lines of
bench/fashion and of shared/peers/fashion_tta.py, rounds 1..ROUNDS), prints both times to the
target accuracy, the ratio and both curves, and plots the curves of the last round to PNG.
Usage: report.py DIR ROUNDS PNG"""
import json, statistics, sys

d, rounds, png = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = {k: [json.load(open(f"{d}/{k}.{r}.json")) for r in range(1, rounds + 1)] for k in ("go", "py")}
names = {"go": "godist MWMS 2x1", "py": "PyTorch DDP 2x1"}
target = runs["go"][0]["target"]

def reached(run):
    return run["reached"][1] if run["reached"] else None

for k in ("go", "py"):
    for r, run in enumerate(runs[k], 1):
        pts = " ".join(f"{int(s)}:{t:.1f}s:{a:.4f}" for s, t, a in run["curve"])
        extra = f", evaluation {run['eval_seconds']:.1f} s of it" if "eval_seconds" in run else ""
        got = f"step {int(run['reached'][0])} after {run['reached'][1]:.2f} s{extra}" if run["reached"] else "not reached"
        print(f"{names[k]} round {r} (global batch {run['global_batch']}): {target:.0%} {got}")
        print(f"  curve (step:seconds:accuracy): {pts}")

times = {k: [reached(run) for run in runs[k]] for k in runs}
if all(t is not None for k in times for t in times[k]):
    g, p = statistics.median(times["go"]), statistics.median(times["py"])
    ratios = [a / b for a, b in zip(times["go"], times["py"])]
    print(f"time to {target:.0%}: godist {g:.2f} s, DDP {p:.2f} s, ratio {g / p:.2f}x "
          f"(rounds: {', '.join(f'{x:.2f}x' for x in ratios)}; goal <= 0.5x: {'met' if g / p <= 0.5 else 'not met'})")
    # The two reach the target after different step counts (their initial weights and
    # shuffles differ): the time per step (training + evaluation) compares the engines alone.
    per = {k: statistics.median(run["reached"][1] / run["reached"][0] for run in runs[k]) for k in runs}
    print(f"per step to {target:.0%}: godist {1000 * per['go']:.1f} ms, DDP {1000 * per['py']:.1f} ms, ratio {per['go'] / per['py']:.2f}x")
else:
    print(f"time to {target:.0%}: not reached by " + ", ".join(names[k] for k in times if None in times[k]))

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    print(f"no plot: {e} (install python3-matplotlib)")
    sys.exit(0)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
for k, style in (("go", "o-"), ("py", "s--")):
    run = runs[k][-1]
    steps = [p[0] for p in run["curve"]]
    secs = [p[1] for p in run["curve"]]
    accs = [p[2] for p in run["curve"]]
    ax1.plot(secs, accs, style, label=names[k], markersize=3)
    ax2.plot(steps, accs, style, label=names[k], markersize=3)
for ax, xl in ((ax1, "wall time, training + evaluation (s)"), (ax2, "global step (batch 128)")):
    ax.axhline(target, color="gray", linewidth=0.8)
    ax.set_xlabel(xl)
    ax.set_ylabel("test accuracy (10,000 images)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
fig.suptitle("Fashion-MNIST, talk's CNN, Adam 1e-3, 2 workers x 1 thread")
fig.tight_layout()
fig.savefig(png, dpi=80)
print(f"plot: {png}")
