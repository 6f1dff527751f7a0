#!/usr/bin/env bash
# gen.sh compiles kernels.cu to PTX for sm_80 and sm_90 with the CUDA 11.8 kit's nvcc (kit.sh
# fetches the kit when it is missing). Run by `go generate ./gpu/kernels`; commit the .ptx.
# Even with -ptx nvcc runs the host compiler to preprocess, and nvcc 11.8 refuses gcc 12 (and
# the kit's gcc wrapper looks only for gcc 6..11): -ccbin names the system g++ and
# -allow-unsupported-compiler lets nvcc use it (it only preprocesses device code here).
set -euo pipefail
cd "$(dirname "$0")"
KIT="$(bash ./kit.sh | tail -n 1)"
NVCC="$KIT/usr/lib/nvidia-cuda-toolkit/bin/nvcc"
for sm in 80 90; do
  "$NVCC" -ptx -ccbin "$(command -v "${CXX:-g++}")" -allow-unsupported-compiler -std=c++14 -O3 -fmad=false \
    -arch=compute_$sm -code=sm_$sm -o "kernels_sm$sm.ptx.tmp" kernels.cu
  # Drop the compiler's build stamp so regenerating gives the same file.
  grep -v '^// Cuda compilation tools\|^// Based on \|^// Compiler Build ID' "kernels_sm$sm.ptx.tmp" > "kernels_sm$sm.ptx"
  rm -f "kernels_sm$sm.ptx.tmp"
  echo "gen.sh: wrote gpu/kernels/kernels_sm$sm.ptx ($(grep -c '^.visible .entry' "kernels_sm$sm.ptx") kernels)"
done
