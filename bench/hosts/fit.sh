#!/usr/bin/env bash
# Training between simulated hosts: MultiWorkerMirroredStrategy's keras Fit of the peer CNN
# (bench/multiworker: shared/peers/model.py's model, per-worker batch 64, synthetic data, one
# compute thread a worker, GOMAXPROCS=1) with one worker process per host namespace
# (bench/hosts/hosts.sh), against PyTorch DDP over gloo (ddp_fit.py: the same model, batch,
# data and steps, one process per host, one thread) on the same hosts and links, alternated
# in ROUNDS rounds. The workers get TF_CONFIG naming the hosts' bridge addresses and
# GODIST_SHARED_MEMORY=0: namespaces share /dev/shm, so without it godist's workers would find
# each other's memory and skip the network; between hosts every byte crosses TCP, as here.
# Prints per link and host count the global samples/s of both (median over windows, then over
# rounds; and each round's), godist/DDP, the link rate, what the gradient's ring all-reduce
# takes at that rate (2(n-1)/n of the gradient's bytes each way a step, if nothing overlapped
# it) beside each step's time, each figure over the unshaped link's, the cores other processes
# used meanwhile (the machine is shared), and which rows are CPU-bound. The link "none:0" is
# the unshaped veth: what the CPUs allow.
#
#   LINKS="1gbit:0.2ms none:0"   RATE:DELAY pairs as run.sh takes them
#   HOSTS="2 4"  WINDOWS=3  STEPS=20 (a window; one more epoch of STEPS first, untimed)
#   ROUNDS=2     godist then DDP, ROUNDS times    DDP=1 (0: godist only)
#   PIN=1        rank i bound to CPU i mod nproc (godist and DDP alike; 0: unbound)
#   FIT_JSONL=P  also keeps every run's JSON line (with impl, rate, delay, n) in P
# The defaults take about 2 minutes on 2 vCPUs (a round about 55 s). On 2 vCPUs, 4 hosts are
# 4 training processes on 2 cores: those rows are CPU-bound whatever the link, marked so.
#
# Needs root, iproute2 and network namespaces (skipped with a line otherwise, as run.sh).
# A delay needs the kernel's netem qdisc: without it only the rate is applied (tbf) and the
# rows say "no delay".
set -euo pipefail
source "$(dirname "$0")/../lib.sh" # bench_machine
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
LINKS=${LINKS:-"1gbit:0.2ms none:0"}
HOSTS=${HOSTS:-"2 4"}
WINDOWS=${WINDOWS:-3}
STEPS=${STEPS:-20}
ROUNDS=${ROUNDS:-2}
DDP=${DDP:-1}
PIN=${PIN:-1}
export GDH_NAME=gdhfit-$$
hosts=(bash "$here/hosts.sh")

if ! why=$("${hosts[@]}" check 2>&1); then
  echo "--- hosts fit: skipped (${why#hosts.sh: })"
  exit 0
fi

tmp=$(mktemp -d)
trap '"${hosts[@]}" down; rm -rf "$tmp"' EXIT
bench_machine
(cd "$root" && go build -o "$tmp/mw" ./bench/multiworker)
# shared/peers beside the checkout; in a git worktree, beside the main checkout.
peers=$root/../shared/peers
[ -d "$peers" ] || peers=$(dirname "$(git -C "$root" rev-parse --path-format=absolute --git-common-dir)")/../shared/peers
have_ddp=no
if [ "$DDP" != 1 ]; then
  echo "--- DDP: skipped (DDP=0)"
elif [ ! -f "$peers/model.py" ]; then
  echo "--- DDP: skipped (no shared/peers/model.py beside the checkout)"
elif ! /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
  echo "--- DDP: skipped (/usr/bin/python3 without torch.distributed's gloo)"
else
  have_ddp=yes
fi
ncpu=$(nproc)

# run_ranks N NAME CMD...: runs CMD on hosts 0..N-1 with RANK set (bound to CPU RANK mod
# nproc with PIN=1); rank 0's stdout goes to $tmp/NAME.out, every rank's stderr to
# $tmp/NAME.<rank>.err. Each rank is stopped after 5 minutes (a rank waiting for one that died).
run_ranks() {
  local n=$1 name=$2 pids=() i rc=0 pin
  shift 2
  for ((i = 0; i < n; i++)); do
    pin=()
    [ "$PIN" = 1 ] && command -v taskset >/dev/null && pin=(taskset -c $((i % ncpu)))
    timeout --kill-after=10 300 "${hosts[@]}" exec "$i" "${pin[@]}" env RANK="$i" "$@" \
      >"$([ "$i" = 0 ] && echo "$tmp/$name.out" || echo /dev/null)" 2>"$tmp/$name.$i.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  if [ "$rc" != 0 ]; then
    echo "$name: a rank failed (exit $rc); its last lines:" >&2
    tail -n 5 "$tmp/$name".*.err >&2
  fi
  return $rc
}

results=$tmp/results.jsonl

# record IMPL PREFIX: shows rank 0's JSON lines of $tmp/IMPL.out and appends them to
# $results with the implementation and the link ($rate, $delay, $applied, $n).
record() {
  grep '^{' "$tmp/$1.out" | sed "s/^/$2/"
  grep '^{' "$tmp/$1.out" | /usr/bin/python3 -c '
import json, sys
for l in sys.stdin:
    print(json.dumps({"impl": sys.argv[1], "rate": sys.argv[2], "delay": sys.argv[3], "applied": sys.argv[4], "n": int(sys.argv[5]), **json.loads(l)}))
' "$1" "$rate" "$delay" "$applied" "$n" >>"$results"
}

port=29700
for link in $LINKS; do
  rate=${link%%:*} delay=${link#*:}
  for n in $HOSTS; do
    "${hosts[@]}" up "$n" "$rate" "$delay" 2>"$tmp/up.err" || { cat "$tmp/up.err" >&2; exit 1; }
    applied=$(sed 's/.*delay_applied=//' "/run/$GDH_NAME/link")
    echo "--- link $rate, delay $delay$([ "$applied" = yes ] || echo ' (not applied: no netem in this kernel)'), $n hosts" \
      "($n training processes on $ncpu cores$([ "$n" -gt "$ncpu" ] && echo ': CPU-bound'))"
    for ((round = 1; round <= ROUNDS; round++)); do
      port=$((port + 2))
      cluster=$(for ((i = 0; i < n; i++)); do printf '%s"%s:%d"' "$([ "$i" = 0 ] && echo [ || echo ,)" "$("${hosts[@]}" addr "$i")" "$port"; done)]
      # bench/multiworker is one task of the cluster in TF_CONFIG when GODIST_BENCH_MW_TASK is
      # set (else it launches its workers itself, on loopback); worker 0 is the chief.
      if run_ranks "$n" godist env CLUSTER="$cluster" GODIST_BENCH_MW_TASK=1 GODIST_CLUSTER_TOKEN=bench \
        GODIST_SHARED_MEMORY=0 GOMAXPROCS=1 GODIST_KERNEL_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        sh -c 'export TF_CONFIG="{\"cluster\":{\"worker\":$CLUSTER},\"task\":{\"type\":\"worker\",\"index\":$RANK}}"; exec "$@"' sh \
        "$tmp/mw" -workers "$n" -windows "$WINDOWS" -steps "$STEPS" -warmup 1; then
        record godist "godist: "
      else
        echo "godist: failed on this link; no godist figures for this round" >&2
      fi
      if [ "$have_ddp" = yes ]; then
        master="$("${hosts[@]}" addr 0):$((port + 1))"
        if run_ranks "$n" ddp sh -c 'exec /usr/bin/python3 "$0" --rank "$RANK" "$@"' \
          "$here/ddp_fit.py" --world "$n" --master "$master" --peers "$peers" \
          --windows "$WINDOWS" --steps "$STEPS" --warmup "$STEPS"; then
          record ddp "DDP:    "
        else
          echo "DDP: failed on this link; no DDP figures for this round" >&2
        fi
      fi
    done
    "${hosts[@]}" down
  done
done

[ -z "${FIT_JSONL:-}" ] || cp "$results" "$FIT_JSONL"
echo "--- summary: global samples/s (per-worker batch 64), median over windows, then over rounds"
touch "$results"
NCPU=$ncpu /usr/bin/python3 - "$results" <<'PY'
import json, os, statistics, sys
ncpu = int(os.environ["NCPU"])
runs, other = {}, {}  # other: the cores other processes used in each window
grad = None
for l in open(sys.argv[1]):
    r = json.loads(l)
    runs.setdefault((r["impl"], r["rate"], r["delay"], r["applied"], r["n"]), []).append(r["median_samples_per_s_all"])
    other.setdefault((r["impl"], r["rate"], r["delay"], r["applied"], r["n"]), []).extend(w[-1] for w in r["windows"])
    grad = r.get("grad_bytes", grad)
grad = grad or 4 * (32 * 9 + 32 + 5408 * 64 + 64 + 64 * 10 + 10)  # the peer CNN's parameters
med = {k: statistics.median(v) for k, v in runs.items()}
def bps(rate):  # the link in bytes/s, per direction
    if rate == "none":
        return None
    v, u = rate[:-4], rate[-4:].lower()
    return float(v) * {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[u] / 8
free = {(k[0], k[4]): v for k, v in med.items() if k[1] == "none"}
print(f"gradient {grad / 1e6:.2f} MB a step; ring all-reduce at the link rate = 2(n-1)/n of it each way / rate")
print("| link | hosts | godist samples/s | DDP samples/s | godist/DDP | link rate | all-reduce at link rate, ms/step | godist step ms | DDP step ms | of unshaped: godist, DDP | rounds: godist; DDP | other cores: godist, DDP | bound |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
keys = sorted({(k[1], k[2], k[3], k[4]) for k in med}, key=lambda k: (k[0] == "none", k[0], k[3]))
fmt = lambda x, p=0: "-" if x is None else f"{x:.{p}f}"
for rate, delay, applied, n in keys:
    g, d = med.get(("godist", rate, delay, applied, n)), med.get(("ddp", rate, delay, applied, n))
    link = bps(rate)
    name = rate + ("/" + delay if delay != "0" else "") + ("" if applied == "yes" else " (no delay)")
    ar = grad * 2 * (n - 1) / n / link * 1e3 if link else None
    step = lambda x: 64 * n / x * 1e3 if x else None
    # The figure on this link over the unshaped veth's (same training, same host count).
    of = lambda i, x: x / free[(i, n)] if x and link and (i, n) in free else None
    og, od = of("godist", g), of("ddp", d)
    # CPU-bound: the unshaped veth (nothing but the CPUs), more processes than cores, or a
    # shaped row where both trainings reach 0.9 of their unshaped figure.
    why = []
    if n > ncpu:
        why.append(f"{n} procs on {ncpu} cores")
    if not link:
        why.append("unshaped")
    elif [x for x in (og, od) if x] and all(x >= 0.9 for x in (og, od) if x):
        why.append("0.9 of unshaped")
    bound = "CPU (" + ", ".join(why) + ")" if why else "link"
    ratio = f"{g / d:.2f}x" if g and d else "-"
    rs = lambda i: ", ".join(f"{x:.0f}" for x in runs.get((i, rate, delay, applied, n), [])) or "-"
    ot = lambda i: fmt(statistics.median(other[(i, rate, delay, applied, n)]), 2) if other.get((i, rate, delay, applied, n)) else "-"
    print(f"| {name} | {n} | {fmt(g)} | {fmt(d)} | {ratio} | "
          f"{'unshaped' if not link else f'{link * 8 / 1e9:g} Gbit/s'} | {fmt(ar, 1)} | {fmt(step(g), 1)} | {fmt(step(d), 1)} | "
          f"{fmt(og, 2)}, {fmt(od, 2)} | {rs('godist')}; {rs('ddp')} | {ot('godist')}, {ot('ddp')} | {bound} |")
PY
