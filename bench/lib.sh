# Shared by the bench run.sh scripts: source it after `set -euo pipefail`.
#
#   bench_setup DEFAULT_ROUNDS   sets root (the checkout), peers (../shared/peers), ROUNDS,
#                                WINDOWS (default 5), STEPS (default 30), TAGS (empty: the Go
#                                kernels, as the Makefile builds; TAGS=openblas for OpenBLAS),
#                                HAVE_CBLAS (yes when cblas.h exists) and tmp (a directory
#                                removed on exit)
#   bench_build NAME PKG         builds ./bench/PKG with $TAGS into $tmp/NAME
#   bench_machine                prints the cores, the load average and the time
#   bench_peer SECONDS CMD...    runs a peer's command (PyTorch) with a time limit: a peer
#                                that hangs (a DDP rank waiting for one that died, seen
#                                2026-11-26) is stopped with its child processes, a line on
#                                stderr says so, and the round goes on without its figures

bench_setup() {
  root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
  peers="$root/../shared/peers"
  ROUNDS=${ROUNDS:-$1}
  WINDOWS=${WINDOWS:-5}
  STEPS=${STEPS:-30}
  TAGS=${TAGS:-}
  HAVE_CBLAS=$( { [ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || [ -e /usr/include/openblas/cblas.h ]; } && echo yes || true)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}

bench_build() {
  (cd "$root" && go build ${TAGS:+-tags "$TAGS"} -o "$tmp/$1" "./bench/$2")
}

bench_machine() {
  echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
}

bench_peer() {
  local limit=$1 rc=0
  shift
  timeout --kill-after=10 "$limit" "$@" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "peer: $* ran past ${limit} s and was stopped; this round has no peer figures" >&2
    return 0
  fi
  return "$rc"
}
