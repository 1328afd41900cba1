#!/usr/bin/env bash
# Fails when a C++/CUDA source file of the repository differs from what clang-format (with the
# repository's .clang-format) makes of it, and lists those files. Usage: scripts/check_format.sh
# To fix: git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')
# One clang-format per batch of files, a batch per core: it names each file that needs changes.
status=0
report=$(printf '%s\0' "${files[@]}" |
  xargs -0 -n 64 -P "$(nproc)" clang-format --dry-run --Werror 2>&1 >/dev/null) || status=$?
mapfile -t unformatted < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
  <<<"$report" | sort -u)
if ((status != 0 && ${#unformatted[@]} == 0)); then
  echo "check_format: clang-format failed:" >&2
  echo "$report" >&2
  exit 1
fi
if ((${#unformatted[@]} > 0)); then
  echo "check_format: ${#unformatted[@]} file(s) are not clang-format clean:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "fix with: clang-format -i ${unformatted[*]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files clean"
