#!/usr/bin/env bash
# The main job: installs what is missing, builds in Release, then runs a 2-process chorus_bench
# of the ResNet-50 gradient set (chorus against raw MPI on the same bytes).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
scripts/build.sh build
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  build/bench/chorus_bench steps --tensor-set resnet50 --steps ${CHORUS_DEMO_STEPS:-20} --warmup 3
