#!/usr/bin/env bash
# kit.sh fetches and unpacks the parts of Debian bookworm's CUDA 11.8 toolkit that
# `go generate ./gpu/kernels` and check.sh need (nvcc, cicc, ptxas, libnvvm, headers) into a
# private cache directory, without changing the system's apt sources or installing anything.
# Usage: bash gpu/kernels/kit.sh        (prints the kit directory on its last line)
# Env:   GODIST_CUDA_KIT  kit directory (default ~/.cache/godist/cuda-kit)
set -euo pipefail

KIT="${GODIST_CUDA_KIT:-$HOME/.cache/godist/cuda-kit}"
if [[ -x "$KIT/usr/lib/nvidia-cuda-toolkit/bin/nvcc" && -f "$KIT/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile" && ! -L "$KIT/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile" && -x "$KIT/usr/bin/ptxas" ]]; then
  echo "kit.sh: kit already unpacked" >&2
  echo "$KIT"
  exit 0
fi
WORK="${KIT}.apt"
mkdir -p "$WORK/etc/preferences.d" "$WORK/state/lists/partial" "$WORK/cache/archives/partial" "$WORK/debs" "$KIT"

# A private sources list: the same bookworm archive with contrib and non-free.
cat > "$WORK/etc/sources.list" <<SRC
deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware
deb http://deb.debian.org/debian bookworm-updates main contrib non-free non-free-firmware
SRC

APT=(-o Dir::Etc::sourcelist="$WORK/etc/sources.list"
     -o Dir::Etc::sourceparts="-"
     -o Dir::Etc::preferencesparts="$WORK/etc/preferences.d"
     -o Dir::State="$WORK/state"
     -o Dir::State::status=/var/lib/dpkg/status
     -o Dir::Cache="$WORK/cache"
     -o Debug::NoLocking=1
     -o APT::Sandbox::User="$(id -un)")

echo "kit.sh: apt-get update (private lists in $WORK/state)" >&2
apt-get "${APT[@]}" -qq update

# The packages that hold nvcc, cicc, ptxas, libnvvm and the CUDA headers. nvcc is a
# wrapper in nvidia-cuda-toolkit that runs the binaries of nvidia-cuda-toolkit's deps.
PKGS=(nvidia-cuda-toolkit nvidia-cuda-dev libnvvm4 libcudart11.0)
cd "$WORK/debs"
echo "kit.sh: apt-get download ${PKGS[*]}" >&2
apt-get "${APT[@]}" -qq download "${PKGS[@]}"
for deb in ./*.deb; do
  case "$deb" in
  *nvidia-cuda-dev_*)
    # Only the headers: the package's 2.6 GB of static libraries are not needed for -ptx.
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$KIT" --wildcards './usr/include/*' ;;
  *) dpkg-deb -x "$deb" "$KIT" ;;
  esac
done
rm -f ./*.deb
BIN="$KIT/usr/lib/nvidia-cuda-toolkit/bin"
if [[ ! -x "$BIN/nvcc" || ! -x "$KIT/usr/bin/ptxas" || ! -x "$BIN/cicc" ]]; then
  echo "kit.sh: nvcc, cicc or ptxas missing under $KIT after unpacking; the package layout changed" >&2
  exit 1
fi
# The packaged nvcc.profile is a link to /etc/nvcc.profile with absolute paths; point the
# unpacked nvcc at the kit instead (_HERE_ is nvcc's own directory).
rm -f "$BIN/nvcc.profile"
cat > "$BIN/nvcc.profile" <<PROF
NVVMIR_LIBRARY_DIR = \$(_HERE_)/../libdevice
PATH += \$(_HERE_):$KIT/usr/bin:
INCLUDES += "-I$KIT/usr/include" \$(_SPACE_)
LIBRARIES =+ \$(_SPACE_) "-L$KIT/usr/lib/x86_64-linux-gnu"
PROF
du -sh "$KIT" >&2
echo "$KIT"
