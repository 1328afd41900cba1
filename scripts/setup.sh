#!/usr/bin/env bash
# Installs the Debian 12 packages chorus builds, tests and runs with. Idempotent: apt-get runs
# only when something is missing. Run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang clang-format
  lld  # the linker CMake picks where it is there (CHORUS_USE_LLD)
  libclang-rt-14-dev  # libFuzzer (scripts/fuzz.sh); clang only recommends it
  libopenmpi-dev openmpi-bin
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libabsl-dev libucx-dev libxxhash-dev openssh-client
  openssh-server iproute2  # the multi-host test cluster (test/cluster/)
  catch2
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev
  libeigen3-dev  # autotune's Gaussian process
  pybind11-dev python3-dev python3-pytest python3-torch python3-numpy python3-torchvision
  libtorch-dev  # torch's C++ headers: chorus.torch._fields (bindings/python/src/torch_fields.h)
  python3-mpi4py python3-pip python3-setuptools python3-wheel
  python3-venv  # the install test: pip into a fresh virtual environment
  python3-cloudpickle  # chorus.run sends the function to the workers
  python3-prometheus-client  # chorus.metrics (CHORUS_METRICS_PORT)
  prometheus  # the server metrics_prometheus_e2e scrapes chorus with
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "chorus setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
