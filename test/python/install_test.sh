#!/usr/bin/env bash
# The ways to install chorus: pip into a fresh virtual environment (the README's install), then
# 2-rank jobs in both modes and chorus.run using only what the install put on the PATH; and,
# for /usr/bin/python3, pip --target and cmake --install into scratch directories, each then a
# 1-rank init/size/allreduce from that copy alone (cmake --install also puts the commands in
# <prefix>/bin).
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

# A fresh virtual environment (torch from the system's packages, as Debian installs it).
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
CHORUS_CMAKE_BUILD_DIR=$build "$tmp/venv/bin/pip" install -q --no-build-isolation --no-deps \
  "$src/bindings/python"
cat > "$tmp/job.py" <<EOF
import chorus, chorus.torch as hvd, torch
hvd.init()
assert chorus.__file__.startswith("$tmp/venv/"), chorus.__file__
x = hvd.allreduce(torch.full((3,), float(hvd.rank() + 1)), op=hvd.Sum)
print("job rank %d of %d: %s" % (hvd.rank(), hvd.size(), x.tolist()), flush=True)
EOF
venv_run() {  # only the venv's bin and the system's on the PATH, nothing from the build tree
  (cd "$tmp" && env -u PYTHONPATH PATH="$tmp/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
     PYTHONDONTWRITEBYTECODE=1 "$@")
}
[[ $(venv_run sh -c 'command -v chorusrun') == "$tmp/venv/bin/chorusrun" ]] || {
  echo "venv: chorusrun on the PATH is '$(venv_run sh -c 'command -v chorusrun')'"; exit 1; }
version=$("$build/launcher/chorusrun" --version)
[[ $(venv_run chorusrun --version) == "$version" ]] || { echo "venv: chorusrun --version"; exit 1; }
venv_run chorus-timeline --help | grep -q "usage: chorus-timeline" || {
  echo "venv: chorus-timeline --help"; exit 1; }
for mode in --mpi --gloo; do
  out=$(venv_run chorusrun -np 2 $mode python job.py 2>&1) || {
    echo "venv: chorusrun $mode failed:"; echo "$out"; exit 1; }
  for r in 0 1; do
    grep -q "job rank $r of 2: \[3.0, 3.0, 3.0\]" <<<"$out" || {
      echo "venv: chorusrun $mode: no result from rank $r in:"; echo "$out"; exit 1; }
  done
done
for gloo in False True; do
  out=$(venv_run python -c "
import chorus
def f(k):
    import chorus.torch as hvd, torch
    hvd.init()
    return hvd.rank(), hvd.allreduce(torch.tensor([1.0 + hvd.rank()]), op=hvd.Sum).item() * k
print('run:', chorus.run(f, args=(2,), np=2, use_gloo=$gloo))" 2>&1) || {
    echo "venv: chorus.run (use_gloo=$gloo) failed:"; echo "$out"; exit 1; }
  grep -q "run: \[(0, 6.0), (1, 6.0)\]" <<<"$out" || {
    echo "venv: chorus.run (use_gloo=$gloo) returned:"; echo "$out"; exit 1; }
done

CHORUS_CMAKE_BUILD_DIR=$build /usr/bin/python3 -m pip install -q --no-build-isolation \
  --no-deps --target "$tmp/pip" "$src/bindings/python"
out=$(check "$tmp/pip")
[[ "$out" == "1 [1.0, 1.0, 1.0]" ]] || { echo "pip install: got '$out'"; exit 1; }
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
site=$tmp/prefix/$(/usr/bin/python3 "$src/bindings/python/install_dir.py")
out=$(check "$site")
[[ "$out" == "1 [1.0, 1.0, 1.0]" ]] || { echo "cmake --install: got '$out'"; exit 1; }
[[ $("$tmp/prefix/bin/chorusrun" --version) == "$version" ]] || {
  echo "cmake --install: chorusrun --version"; exit 1; }
"$tmp/prefix/bin/chorus-timeline" --help | grep -q "usage: chorus-timeline" || {
  echo "cmake --install: chorus-timeline"; exit 1; }
echo "pip into a fresh venv (chorusrun in both modes, chorus.run), pip --target and cmake --install work"
