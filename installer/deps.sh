#!/usr/bin/env bash
# Installs the Debian packages godist needs on a fresh machine: Jupyter (client, nbconvert,
# nbclient, console, notebook, the kernel conformance suite, ipykernel as the kernel
# benchmark's peer), OpenBLAS, Slurm and munge for the cluster tests, iproute2 for
# network-namespace tests and bench/hosts' links, iperf3 to check those links' rates, PyTorch
# for the peer benchmarks, and the full Fashion-MNIST
# (dataset-fashion-mnist: the IDX files in /usr/share/datasets/fashion-mnist, where
# datasets.LoadFashionMNIST looks by default), the Notebook 6 widget front end (ipywidgets 6:
# progress bars and the cluster panel), Chromium for the browser test, and matplotlib for
# bench/fashion's accuracy plot, and qemu-user for make cross (the linux/arm64 tests).
# It installs only what is missing and is safe to run again. Without apt (macOS) it says what
# to install instead and changes nothing.
set -euo pipefail
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  if [ "$(uname -s)" = Darwin ]; then
    echo "deps: no apt-get here (macOS): install Go and Jupyter with Homebrew: brew install go jupyterlab, then make install (README, macOS)"
  else
    echo "deps: no apt-get here: install Go 1.26 and Jupyter (jupyter-client, nbconvert, notebook) with this system's package manager, then make install"
  fi
  exit 0
fi
pkgs=(jupyter-client jupyter-nbconvert python3-nbclient jupyter-console jupyter-notebook
      python3-jupyter-kernel-test python3-ipykernel libopenblas-dev slurm-wlm munge iproute2 iperf3 python3-torch
      dataset-fashion-mnist python3-ipywidgets python3-widgetsnbextension
      jupyter-nbextension-jupyter-js-widgets chromium python3-matplotlib qemu-user)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all Debian packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}"
