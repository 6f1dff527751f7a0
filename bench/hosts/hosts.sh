#!/usr/bin/env bash
# A cluster of hosts on one machine: N network namespaces, each with one interface (eth0)
# plugged by a veth pair into a bridge in a namespace of its own, every host's link shaped to a
# set rate and latency with tc (netem; tbf for the rate where the kernel has no netem, and then
# no delay: `hosts.sh link` and a line on stderr say so). Nothing is added to the machine's own namespace.
#
#   hosts.sh up N RATE DELAY    (re)creates hosts 0..N-1 (addresses 10.252.0.1 ... 10.252.0.N/24);
#                               RATE as tc writes it (1gbit, 10gbit, 500mbit) or "none" for
#                               unshaped veths; DELAY is the one-way latency between two hosts
#                               (0.2ms, 2ms)
#   hosts.sh down               removes them (kills what runs inside); does nothing when absent
#   hosts.sh check              exits 0 where hosts can be made here, else prints why and
#                               exits 3 (the benches skip with that reason)
#   hosts.sh exec HOST CMD...   runs CMD on host HOST (0-based)
#   hosts.sh addr HOST          prints host HOST's address
#   hosts.sh link               prints the shaping in force: rate=... delay=... netem=yes|no
#                               delay_applied=yes|no
#   hosts.sh iperf [SECONDS [--bidir]]
#                               measures host 1 -> host 0 with iperf3 and prints the rate in
#                               Mbit/s (received), to check the shaping; --bidir: a stream each
#                               way at once, the slower direction's rate
#
# Shaping: each host's egress (its eth0) is limited to RATE, and the bridge's port towards the
# host (the host's downlink) to RATE plus DELAY. The delay sits on the bridge side so that a
# sender's socket is not charged for packets held in a qdisc (TCP small queues would then cap
# the rate on a long link). So host to host: one-way DELAY, round trip 2*DELAY, RATE each way
# at once (full duplex), as a switch port.
#
# GDH_NAME (default gdh; must start with gdh) names the set: namespaces GDH_NAME-h<i> and
# GDH_NAME-br, so that sets of concurrent runs do not collide with each other or with the
# tests' namespaces (internal/netns: godist-...). GDH_SUBNET (default 10.252.0) is the /24.
set -euo pipefail

name=${GDH_NAME:-gdh}
subnet=${GDH_SUBNET:-10.252.0}
case "$name" in gdh*) ;; *) echo "hosts.sh: GDH_NAME must start with gdh (got $name)" >&2; exit 2 ;; esac

need() {
  local missing=()
  [ "$(uname -s)" = Linux ] || { echo "hosts.sh: network namespaces need Linux" >&2; exit 3; }
  [ "$(id -u)" = 0 ] || { echo "hosts.sh: needs root (ip netns, tc)" >&2; exit 3; }
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || [ -x "/sbin/$c" ] || missing+=("$c")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "hosts.sh: missing ${missing[*]}: install Debian's iproute2 (ip, tc)$(printf '%s\n' "${missing[@]}" | grep -q iperf3 && echo ' and iperf3')" >&2
    exit 3
  fi
}
PATH=$PATH:/usr/sbin:/sbin

ns() { echo "$name-h$1"; }

down() {
  local n
  [ -d /run/netns ] || return 0
  for n in $(ls /run/netns); do
    [[ "$n" =~ ^${name}-(h[0-9]+|br)$ ]] || continue
    for pid in $(ip netns pids "$n" 2>/dev/null); do
      kill -9 "$pid" 2>/dev/null || true
    done
    ip netns del "$n" 2>/dev/null || true
  done
  rm -rf "/run/$name"
}

# bytes_per_s RATE: tc's rate ("1gbit", "500mbit", "100kbit") in bytes per second.
bytes_per_s() {
  local v=${1%[kKmMgG]bit} u
  u=${1#"$v"}
  case "${u,,}" in kbit) echo $((v * 125)) ;; mbit) echo $((v * 125000)) ;; gbit) echo $((v * 125000000)) ;;
    *) echo "hosts.sh: RATE $1: want a number with kbit, mbit or gbit after it, or none" >&2; exit 2 ;; esac
}

# have_netem: whether this kernel has the netem qdisc (a delay needs it; some kernels are built
# without it, and then only tbf's rate is applied).
have_netem() {
  local t="$name-probe" ok=1
  ip netns add "$t" 2>/dev/null || return 1
  ip -n "$t" link add p0 type veth peer name p1 &&
    tc -n "$t" qdisc add dev p0 root netem delay 1ms 2>/dev/null && ok=0
  ip netns del "$t"
  return $ok
}

# shape DEV NS RATE DELAY: DEV's egress limited to RATE, delayed by DELAY (netem when the
# kernel has it, else tbf for the rate and no delay).
shape() {
  local dev=$1 n=$2 rate=$3 delay=$4 args=() bps burst
  [ "$rate" = none ] && [ "$delay" = 0 ] && return 0
  ip -n "$n" link set "$dev" txqueuelen 10000
  if [ "$netem" = yes ]; then
    [ "$delay" != 0 ] && args+=(delay "$delay")
    [ "$rate" != none ] && args+=(rate "$rate")
    tc -n "$n" qdisc replace dev "$dev" root netem "${args[@]}" limit 100000
  elif [ "$rate" != none ]; then
    # burst: at least one GSO packet (64 KiB) and 2 ms at RATE (a smaller bucket starves TCP
    # below the rate); queue: 20 ms.
    bps=$(bytes_per_s "$rate")
    burst=$((bps / 500 > 65536 ? bps / 500 : 65536))
    tc -n "$n" qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" limit $((bps / 50 > 4 * burst ? bps / 50 : 4 * burst))
  fi
}

up() {
  local count=$1 rate=$2 delay=$3 br="$name-br" i
  [[ "$count" =~ ^[0-9]+$ ]] && [ "$count" -ge 1 ] && [ "$count" -le 250 ] || { echo "hosts.sh: N must be 1..250" >&2; exit 2; }
  down
  netem=no
  have_netem && netem=yes
  [ "$rate" = none ] || bytes_per_s "$rate" >/dev/null
  if [ "$netem" = no ] && [ "$delay" != 0 ]; then
    echo "hosts.sh: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): rate $rate applied with tbf, delay $delay NOT applied" >&2
  fi
  mkdir -p "/run/$name" && echo "rate=$rate delay=$delay netem=$netem delay_applied=$([ "$netem" = yes ] || [ "$delay" = 0 ] && echo yes || echo no)" >"/run/$name/link"
  ip netns add "$br"
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  for ((i = 0; i < count; i++)); do
    ip netns add "$(ns "$i")"
    ip link add eth0 netns "$(ns "$i")" type veth peer name "h$i" netns "$br"
    ip -n "$br" link set "h$i" master br0
    ip -n "$br" link set "h$i" up
    ip -n "$(ns "$i")" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$(ns "$i")" link set eth0 up
    ip -n "$(ns "$i")" link set lo up
    shape eth0 "$(ns "$i")" "$rate" 0
    shape "h$i" "$br" "$rate" "$delay"
  done
  # Wait (bounded) for the carriers, so that the first packets are not lost.
  for ((i = 0; i < count; i++)); do
    for _ in $(seq 50); do
      ip -n "$(ns "$i")" -o link show eth0 | grep -q LOWER_UP && break
      sleep 0.05
    done
  done
}

cmd=${1:-}
shift || true
case "$cmd" in
  up)
    [ $# -eq 3 ] || { echo "usage: hosts.sh up N RATE DELAY" >&2; exit 2; }
    need ip tc
    trap 'down' ERR
    up "$@"
    ;;
  down)
    need ip
    down
    ;;
  check)
    need ip tc
    if ! ip netns add "$name-try" 2>/dev/null; then
      echo "hosts.sh: creating a network namespace is not permitted here" >&2
      exit 3
    fi
    ip netns del "$name-try"
    ;;
  exec)
    [ $# -ge 2 ] || { echo "usage: hosts.sh exec HOST CMD..." >&2; exit 2; }
    need ip
    h=$1
    shift
    exec ip netns exec "$(ns "$h")" "$@"
    ;;
  link)
    cat "/run/$name/link"
    ;;
  addr)
    echo "$subnet.$(($1 + 1))"
    ;;
  iperf)
    need ip iperf3
    secs=${1:-3}
    # iperf H PORT TO: an iperf3 server on host TO, and its client on host H (the rate it got,
    # in bits/s, on stdout).
    iperf() {
      timeout $((secs + 20)) ip netns exec "$(ns "$3")" iperf3 -s -1 -p "$2" -B "$subnet.$(($3 + 1))" >/dev/null 2>&1 &
      local srv=$!
      for _ in $(seq 100); do
        ip netns exec "$(ns "$3")" ss -ltn 2>/dev/null | grep -q ":$2 " && break
        sleep 0.05
      done
      timeout $((secs + 15)) ip netns exec "$(ns "$1")" iperf3 -c "$subnet.$(($3 + 1))" -p "$2" -t "$secs" -J |
        /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])'
      wait "$srv" || true
    }
    if [ "${2:-}" = --bidir ]; then
      # A stream each way at once (what a ring does), from two iperf3 processes (iperf3 before
      # 3.16 runs --bidir in one thread); the slower direction is printed.
      iperf 1 5201 0 >"/run/$name/iperf.a" &
      iperf 0 5202 1 >"/run/$name/iperf.b"
      wait
      cat "/run/$name/iperf.a" "/run/$name/iperf.b" | /usr/bin/python3 -c 'import sys; print(round(min(float(l) for l in sys.stdin)/1e6, 1))'
    else
      iperf 1 5201 0 | /usr/bin/python3 -c 'import sys; print(round(float(sys.stdin.read())/1e6, 1))'
    fi
    ;;
  *)
    echo "usage: hosts.sh up N RATE DELAY | down | exec HOST CMD... | addr HOST | link | iperf [SECONDS [--bidir]]" >&2
    exit 2
    ;;
esac
