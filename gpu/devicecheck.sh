#!/usr/bin/env bash
# The GPU checks of issue 13 as one script, for a machine with an NVIDIA GPU but no Go (the
# project's H100 test machine): `bash gpu/devicecheck.sh build` here compiles the test
# binaries into gpubin/ (no NVIDIA file needed); carry gpubin/ there and run
# `bash gpu/devicecheck.sh run` in the repository root. Each binary runs only its GPU tests
# (they skip without a GPU); the logs go to $OUT (or gpubin/out).
set -uo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
build)
  mkdir -p gpubin
  go test -c -ldflags='-s -w' -o gpubin/driver.test ./gpu/driver &&
  go test -c -ldflags='-s -w' -o gpubin/gpu.test ./gpu &&
  go test -c -ldflags='-s -w' -tags gpukerneltest -o gpubin/gpukern.test ./gpu/kernels &&
  echo "gpubin/: driver.test gpu.test gpukern.test; on the GPU machine: bash gpu/devicecheck.sh run"
  ;;
run)
  out=${OUT:-gpubin/out}
  mkdir -p "$out"
  (nvidia-smi || true) > "$out/nvidia-smi.txt" 2>&1
  status=0
  for b in driver gpu gpukern; do
    pkg=gpu; [ "$b" = driver ] && pkg=gpu/driver; [ "$b" = gpukern ] && pkg=gpu/kernels
    echo "=== $b ($pkg)"
    (cd "$pkg" && timeout 300 "$OLDPWD/gpubin/$b.test" -test.run 'GPU' -test.v -test.count=1) 2>&1 | tee "$out/$b.log" | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|_test.go' || true
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
  exit $status
  ;;
*)
  echo "usage: bash gpu/devicecheck.sh build|run" >&2
  exit 2
  ;;
esac
