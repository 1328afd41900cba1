#!/usr/bin/env bash
# Fails when a C++/CUDA source file of the repository differs from what clang-format (with the
# repository's .clang-format) makes of it, and lists those files. Usage: scripts/check_format.sh
# To fix: git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')
unformatted=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then unformatted+=("$f"); fi
done
if ((${#unformatted[@]} > 0)); then
  echo "check_format: ${#unformatted[@]} file(s) are not clang-format clean:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "fix with: clang-format -i ${unformatted[*]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files clean"
