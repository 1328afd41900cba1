#!/usr/bin/env bash
# The main job: installs what is missing, builds in Release, then runs
#   1. a 2-process chorus_bench of the ResNet-50 gradient set (chorus against raw MPI on the
#      same bytes), and
#   2. a 2-process PyTorch training demo (examples/pytorch_mnist.py on synthetic data) through
#      chorusrun, printing loss and throughput per epoch, with every rank recording a timeline;
#      the ranks' timelines are merged into build/demo/timeline.json (open it in
#      chrome://tracing or ui.perfetto.dev) and summarised.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
scripts/build.sh build
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  build/bench/chorus_bench steps --tensor-set resnet50 --steps ${CHORUS_DEMO_STEPS:-20} --warmup 3
out=build/demo
mkdir -p "$out"
rm -f "$out"/timeline*.json
PYTHONPATH=$PWD/build/python${PYTHONPATH:+:$PYTHONPATH} build/launcher/chorusrun -np 2 \
  --timeline-filename "$out/timeline.{rank}.json" \
  /usr/bin/python3 examples/pytorch_mnist.py --epochs ${CHORUS_DEMO_EPOCHS:-2}
build/bin/chorus-timeline merge "$out/timeline.0.json" "$out/timeline.1.json" -o "$out/timeline.json"
build/bin/chorus-timeline summary "$out/timeline.json" --top 5
echo "timeline: $out/timeline.json (open it in chrome://tracing or https://ui.perfetto.dev)"
