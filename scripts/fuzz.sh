#!/usr/bin/env bash
# Builds the libFuzzer targets of test/fuzz in build-fuzz/ (clang, ASan+UBSan, CHORUS_FUZZ=ON;
# only the sources they reach) and runs each one over its seed corpus and then for S more
# seconds (ctest label fuzz). Exits non-zero when a target crashes, hangs, leaks or fails one of
# its checks; the input that did it is under build-fuzz/test/fuzz/work/<target>/artifacts/
# (reproduce: build-fuzz/test/fuzz/<target>_fuzzer <that file>). What each target feeds, and how
# to keep a found input as a regression case: test/fuzz/README.md.
#
# Usage: scripts/fuzz.sh [--seconds S] [--jobs J] [--build-only] [TARGET...]
#   --seconds S  seconds of fuzzing per target after its seeds (default 5); CI runs the default,
#                a longer search is e.g. --seconds 600
#   --jobs J     targets run at once (default: the number of cores)
#   --build-only build the targets and stop
#   TARGET       only these targets (hosts, slurm, discovery, config, wire_codec, negotiation,
#                rendezvous_server, membership, ucx_address, args, config_file)
# New inputs the fuzzers find are kept in build-fuzz/test/fuzz/work/<target>/new/, so that a
# later run goes on from them.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=5
jobs=$(nproc)
build_only=0
targets=()
while (($# > 0)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "fuzz.sh: --seconds needs a whole number of seconds >= 1, not '$seconds'" >&2
  exit 2
fi

# -O1 with line tables: fast to build, fast enough to fuzz, and stack traces name lines.
flags="-O1 -gline-tables-only"
if [[ ! -f build-fuzz/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_C_FLAGS_RELEASE=$flags" "-DCMAKE_CXX_FLAGS_RELEASE=$flags" -DCHORUS_FUZZ=ON \
    -DCMAKE_UNITY_BUILD=ON \
    -DCHORUS_BUILD_TESTS=OFF -DCHORUS_BUILD_PYTHON=OFF -DCHORUS_WITH_CUDA=OFF \
    "-DCHORUS_FUZZ_SECONDS=$seconds" >/dev/null
else
  cmake -S . -B build-fuzz "-DCHORUS_FUZZ_SECONDS=$seconds" >/dev/null
fi
cmake --build build-fuzz -j "$(nproc)" --target chorus_fuzzers
((build_only == 0)) || exit 0

select=()
if ((${#targets[@]} > 0)); then
  select=(-R "^fuzz_($(IFS='|'; echo "${targets[*]}"))\$")
fi
ctest --test-dir build-fuzz -L fuzz -j "$jobs" --output-on-failure "${select[@]}"
