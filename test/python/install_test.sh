#!/usr/bin/env bash
# The two ways to install the chorus package for /usr/bin/python3 (pip and cmake --install),
# each into a scratch directory, then a 1-rank init/size/allreduce from that copy alone.
# Usage: install_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() {  # check DIR: import chorus from DIR only (not from the build tree)
  (cd "$tmp" && env -u PYTHONPATH PYTHONPATH="$1" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c "
import chorus, chorus.elastic, chorus.torch as hvd, torch
assert chorus.__file__.startswith('$1'), chorus.__file__
assert hvd.elastic.TorchState and hvd.elastic.ElasticSampler and chorus.elastic.State
assert hvd.elastic.__file__.startswith('$1'), hvd.elastic.__file__
hvd.init()
print(hvd.size(), hvd.allreduce(torch.ones(3), op=hvd.Sum).tolist())
hvd.shutdown()")
}
CHORUS_CMAKE_BUILD_DIR=$build /usr/bin/python3 -m pip install -q --no-build-isolation \
  --no-deps --target "$tmp/pip" "$src/bindings/python"
out=$(check "$tmp/pip")
[[ "$out" == "1 [1.0, 1.0, 1.0]" ]] || { echo "pip install: got '$out'"; exit 1; }
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
site=$tmp/prefix/$(/usr/bin/python3 "$src/bindings/python/install_dir.py")
out=$(check "$site")
[[ "$out" == "1 [1.0, 1.0, 1.0]" ]] || { echo "cmake --install: got '$out'"; exit 1; }
echo "pip install and cmake --install both work"
