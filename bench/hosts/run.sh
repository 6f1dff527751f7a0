#!/usr/bin/env bash
# All-reduce between simulated hosts: network namespaces on this machine whose links have a set
# rate and latency (bench/hosts/hosts.sh), one process per host. For each link and host count,
# godist's ring all-reduce over transport.GRPC's TCP data path (bench/allreduce's ranks, as
# between hosts: --no-shm) and gloo's (PyTorch, gloo_allreduce.py) on the same links, with
# algbw, busbw = algbw*2(n-1)/n, the link rate (the bound busbw cannot pass), busbw/link, the
# rate iperf3 reaches on the link (one TCP stream; and a stream each way at once, as a ring
# sends while it receives), and godist/gloo. The link "none:0" is the unshaped veth: what the
# CPUs allow, to tell a CPU-bound figure from a link-bound one.
# Goals (issue 35): busbw >= 0.9 of the link at 64 MiB on 1 Gbit/s; godist >= gloo on every link.
#
#   LINKS="1gbit:0.2ms 10gbit:0.2ms none:0"  RATE:DELAY pairs (1gbit:2ms, 10gbit:2ms, ...)
#   HOSTS="2 4"  SIZES=1,16,64 (MiB)  ITERS=5  WARMUP=2  GLOO=1 (0: godist only)
#   ROUNDS=1     godist then gloo, ROUNDS times; the summary takes the median over rounds
#   FIT=1        then bench/hosts/fit.sh: MWMS Fit against DDP gloo on 2 and 4 hosts (0: not);
#                FIT_LINKS, FIT_HOSTS, FIT_ROUNDS (default 2) are its LINKS, HOSTS, ROUNDS
#   ELASTIC=1    then bench/hosts/elastic.sh: the elastic re-form, 4 hosts to 3 (0: not);
#                ELASTIC_LINKS, ELASTIC_ROUNDS (default 3) are its LINKS, ROUNDS
# The defaults take about 2 minutes on 2 vCPUs (bench/RESULTS.md, hosts, ran ROUNDS=3), and
# fit.sh's about 2 more.
#
# Needs root, iproute2 (ip, tc) and a kernel that allows network namespaces; prints why and
# exits 0 without figures otherwise. A delay needs the kernel's netem qdisc: without it the
# rate is still applied (tbf) and the rows say "delay not applied".
set -euo pipefail
source "$(dirname "$0")/../lib.sh" # bench_machine
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
LINKS=${LINKS:-"1gbit:0.2ms 10gbit:0.2ms none:0"}
HOSTS=${HOSTS:-"2 4"}
SIZES=${SIZES:-1,16,64}
ITERS=${ITERS:-5}
ROUNDS=${ROUNDS:-1}
WARMUP=${WARMUP:-2}
GLOO=${GLOO:-1}
FIT=${FIT:-1}
ELASTIC=${ELASTIC:-1}
export GDH_NAME=gdh-$$
hosts=(bash "$here/hosts.sh")

if ! why=$("${hosts[@]}" check 2>&1); then
  echo "--- hosts: skipped (${why#hosts.sh: })"
  exit 0
fi

tmp=$(mktemp -d)
trap '"${hosts[@]}" down; rm -rf "$tmp"' EXIT
bench_machine
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
(cd "$root" && go build -o "$tmp/allreduce" ./bench/allreduce)
have_gloo=no
if [ "$GLOO" = 1 ] && /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
  have_gloo=yes
else
  echo "--- gloo: skipped (GLOO=0, or /usr/bin/python3 without torch.distributed's gloo)"
fi
have_iperf=$(command -v iperf3 >/dev/null && echo yes || echo no)
[ "$have_iperf" = yes ] || echo "--- iperf3: missing (Debian's iperf3): no measured link rate"

# run_ranks N OUT CMD...: runs CMD on hosts 0..N-1 with RANK set; rank 0's stdout goes to OUT.
# Each rank is stopped after 10 minutes (a rank waiting for one that died).
run_ranks() {
  local n=$1 out=$2 pids=() i rc=0
  shift 2
  for ((i = 0; i < n; i++)); do
    if [ "$i" = 0 ]; then
      timeout --kill-after=10 600 "${hosts[@]}" exec "$i" env RANK="$i" "$@" >"$out" &
    else
      timeout --kill-after=10 600 "${hosts[@]}" exec "$i" env RANK="$i" "$@" >/dev/null &
    fi
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}

results=$tmp/results.jsonl
port=29600
for link in $LINKS; do
  rate=${link%%:*} delay=${link#*:}
  iperf="" bidir=""
  for n in $HOSTS; do
    "${hosts[@]}" up "$n" "$rate" "$delay" 2>"$tmp/up.err" || { cat "$tmp/up.err" >&2; exit 1; }
    applied=$(sed 's/.*delay_applied=//' "/run/$GDH_NAME/link")
    if [ -z "$iperf" ] && [ "$have_iperf" = yes ] && [ "$n" -ge 2 ]; then
      iperf=$("${hosts[@]}" iperf 3 || echo 0)
      bidir=$("${hosts[@]}" iperf 3 --bidir || echo 0)
    fi
    echo "--- link $rate, delay $delay$([ "$applied" = yes ] || echo ' (not applied: no netem in this kernel)'), $n hosts;" \
      "iperf3 host 1 -> 0: ${iperf:-?} Mbit/s, a stream each way at once: ${bidir:-?} Mbit/s per direction"
    # Rounds alternate godist and gloo, so that a slow spell of a shared machine hits both.
    for ((round = 1; round <= ROUNDS; round++)); do
      addrs=$(for ((i = 0; i < n; i++)); do printf '%s%s:%d' "$([ "$i" = 0 ] || echo ,)" "$("${hosts[@]}" addr "$i")" "$port"; done)
      # bench/allreduce runs as one rank when ALLREDUCE_BENCH_RANK is set; env maps RANK to it.
      run_ranks "$n" "$tmp/godist.out" sh -c 'ALLREDUCE_BENCH_RANK=$RANK exec "$@"' sh \
        env ALLREDUCE_BENCH_ADDRS="$addrs" ALLREDUCE_BENCH_TOKEN=bench \
        "$tmp/allreduce" --no-shm --sizes "$SIZES" --iters "$ITERS" --warmup "$WARMUP"
      sed 's/^/godist: /' "$tmp/godist.out"
      /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l); print(json.dumps({"impl": "godist", "rate": sys.argv[2], "delay": sys.argv[3], "applied": sys.argv[4], "n": int(sys.argv[5]), "iperf_Mbps": float(sys.argv[6] or 0), "bidir_Mbps": float(sys.argv[7] or 0), **d}))
' "$tmp/godist.out" "$rate" "$delay" "$applied" "$n" "$iperf" "$bidir" >>"$results"
      if [ "$have_gloo" = yes ]; then
        master="$("${hosts[@]}" addr 0):$((port + 1))"
        if run_ranks "$n" "$tmp/gloo.out" sh -c 'exec /usr/bin/python3 "$0" --rank "$RANK" "$@"' \
          "$here/gloo_allreduce.py" --world "$n" --master "$master" --sizes "$SIZES" --iters "$ITERS" --warmup "$WARMUP"; then
          sed 's/^/gloo:   /' "$tmp/gloo.out"
          /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l); print(json.dumps({"impl": "gloo", "rate": sys.argv[2], "delay": sys.argv[3], "n": int(sys.argv[4]), **d}))
' "$tmp/gloo.out" "$rate" "$delay" "$n" >>"$results"
        else
          echo "gloo: failed on this link; no gloo figures for it" >&2
        fi
      fi
    done
    "${hosts[@]}" down
  done
done

echo "--- summary (GB/s = 1e9 B/s; link = the rate set, per direction; busbw cannot pass it)"
/usr/bin/python3 - "$results" <<'PY'
import json, sys
import statistics
rounds = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    rounds.setdefault((r["impl"], r["rate"], r["delay"], r["n"], r["size_MiB"]), []).append(r)
rows = []
for rs in rounds.values():  # the round of median time
    rs.sort(key=lambda r: r["median_ms"])
    rows.append(rs[(len(rs) - 1) // 2])
for r in rows:  # from the median time, unrounded
    r["algbw_GBps"] = r["size_MiB"] * 1048576 / (r["median_ms"] / 1e3) / 1e9
    r["busbw_GBps"] = r["algbw_GBps"] * 2 * (r["n"] - 1) / r["n"]
def bps(rate):
    if rate == "none":
        return None
    v, u = rate[:-4], rate[-4:].lower()
    return float(v) * {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[u] / 8e9
gloo = {(r["rate"], r["delay"], r["n"], r["size_MiB"]): r for r in rows if r["impl"] == "gloo"}
free = {(r["n"], r["size_MiB"]): r["busbw_GBps"] for r in rows if r["impl"] == "godist" and r["rate"] == "none"}
print("| link | hosts | MiB | godist algbw | godist busbw | link | busbw/link | iperf3/link | iperf3 each way/link | gloo busbw | godist/gloo | bound |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["impl"] != "godist":
        continue
    link = bps(r["rate"])
    g = gloo.get((r["rate"], r["delay"], r["n"], r["size_MiB"]))
    name = r["rate"] + ("/" + r["delay"] if r["delay"] != "0" else "") + ("" if r["applied"] == "yes" else " (no delay)")
    ratio = r["busbw_GBps"] / link if link else None
    ip = r["iperf_Mbps"] / 8e3 / link if link and r["iperf_Mbps"] else None
    bi = r["bidir_Mbps"] / 8e3 / link if link and r["bidir_Mbps"] else None
    # CPU-bound: short of the link where iperf3's stream each way at once (a ring's traffic)
    # cannot fill it either, or within 10% of what the unshaped veth gives; "ring" when the
    # CPUs could fill it and the ring does not.
    f = free.get((r["n"], r["size_MiB"]))
    bound = "-" if not link else ("link" if ratio >= 0.85 else
             ("CPU" if (bi and bi < 0.85) or (f and r["busbw_GBps"] >= 0.9 * f) else "ring"))
    fmt = lambda x, p=2: "-" if x is None else f"{x:.{p}f}"
    print(f"| {name} | {r['n']} | {r['size_MiB']:g} | {r['algbw_GBps']:.3f} | {r['busbw_GBps']:.3f} | {fmt(link, 3)} | {fmt(ratio)} | {fmt(ip)} | {fmt(bi)} | "
          f"{fmt(g['busbw_GBps'] if g else None, 3)} | {fmt(r['busbw_GBps'] / g['busbw_GBps'] if g and g['busbw_GBps'] else None)}x | {bound} |")
one = [r for r in rows if r["impl"] == "godist" and r["rate"] == "1gbit" and r["size_MiB"] == 64]
if one:
    worst = min(r["busbw_GBps"] / bps("1gbit") for r in one)
    print(f"goal busbw >= 0.9 of a 1 Gbit/s link at 64 MiB: {'met' if worst >= 0.9 else 'not met'} (lowest {worst:.3f})")
pairs = [(r, gloo[k]) for r in rows if r["impl"] == "godist" and r["rate"] != "none" and (k := (r["rate"], r["delay"], r["n"], r["size_MiB"])) in gloo]
if pairs:
    worst = min(pairs, key=lambda p: p[0]["busbw_GBps"] / p[1]["busbw_GBps"])
    w = worst[0]["busbw_GBps"] / worst[1]["busbw_GBps"]
    print(f"goal godist >= gloo on every shaped link: {'met' if w >= 1.0 else 'not met'} (lowest godist/gloo {w:.3f}x:"
          f" {worst[0]['rate']}, {worst[0]['n']} hosts, {worst[0]['size_MiB']:g} MiB)")
PY

if [ "$FIT" = 1 ]; then
  "${hosts[@]}" down
  echo "--- MWMS Fit between hosts (bench/hosts/fit.sh)"
  LINKS=${FIT_LINKS:-} HOSTS=${FIT_HOSTS:-} ROUNDS=${FIT_ROUNDS:-2} bash "$here/fit.sh"
fi

if [ "$ELASTIC" = 1 ]; then
  "${hosts[@]}" down
  echo "--- elastic re-form between hosts (bench/hosts/elastic.sh)"
  LINKS=${ELASTIC_LINKS:-} ROUNDS=${ELASTIC_ROUNDS:-3} bash "$here/elastic.sh"
fi
