#!/usr/bin/env bash
# check.sh assembles each committed PTX with the kit's ptxas for its target (sm_80, sm_90)
# and prints each kernel's registers, shared memory and spills; it fails when ptxas rejects
# a file or a kernel spills. Usage: bash gpu/kernels/check.sh
set -euo pipefail
cd "$(dirname "$0")"
KIT="$(bash ./kit.sh | tail -n 1)"
PTXAS="$KIT/usr/bin/ptxas"
status=0
for sm in 80 90; do
  out="$(mktemp)"
  if ! "$PTXAS" -arch=sm_$sm -v -o /dev/null "kernels_sm$sm.ptx" 2>"$out"; then
    cat "$out" >&2
    echo "check.sh: ptxas rejected kernels_sm$sm.ptx for sm_$sm" >&2
    status=1
    continue
  fi
  echo "== sm_$sm: kernels_sm$sm.ptx"
  awk -v q="'" '/Compiling entry function/ { name = $0; sub(".*function " q, "", name); sub(q ".*", "", name) }
       /bytes stack frame/ { spill = $0 }
       /Used [0-9]+ registers/ { printf "  %-24s %s | %s\n", name, $0, spill }' "$out" |
    sed 's/ptxas info    : //g'
  if grep -E '[1-9][0-9]* bytes spill (stores|loads)' "$out" >/dev/null; then
    echo "check.sh: a kernel spills registers for sm_$sm (see above)" >&2
    status=1
  fi
  rm -f "$out"
done
exit $status
