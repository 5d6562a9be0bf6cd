#!/usr/bin/env bash
# One call on the lent GPU machine (no network), for issue 35's "once on the H200": the
# untrusted-change attack tests (tests/integration/test_pr_untrusted_change.py) through
# `topp-gate pr --backend cuda`, each change's code in bubblewrap's sandbox with the GPU's device
# nodes bound, then the sandbox's cost on CUDA (benchmarks/sandbox_bench.py --backend cuda).
# Run on 2026-12-05 on an H100 (evidence/device-runs/2026-12-05-h100-issue36/).
#
# Carry (all under .carry/, which git ignores), made on this machine:
#   .carry/bubblewrap.deb     apt-get download bubblewrap   (Debian's bwrap; the image has none)
#   .carry/pr-sources.tar.xz  the pinned vLLM 0.33.0 tree, as scripts/device_pr.sh carries it
#   .whl/                     the wheels scripts/device_common.sh installs
#
#   device run: bash scripts/device_untrusted.sh tests   (carry: .whl .carry), then
#               bash scripts/device_untrusted.sh bench   (each well inside one 9-minute call)
# Results in $OUT: untrusted-tests.log (pytest's report) or untrusted-bench.log.
set -uo pipefail
. scripts/device_common.sh
mkdir -p /tmp/cache/trees
tar -C /tmp/cache/trees -xJf .carry/pr-sources.tar.xz || exit 1
export TOPP_GATE_CACHE=/tmp/cache TOPP_GATE_SOURCES=/tmp/cache/trees TOPP_GATE_TEST_BACKEND=cuda
part=${1:?say tests or bench}
log=$OUT/untrusted-$part.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; bwrap --version
  python3 -c 'from harness.kernels import sandbox; print(sandbox.probe().record())'
  case $part in
    tests)
      timeout 480 python3 -m pytest -q -p no:cacheprovider -o addopts= \
        tests/integration/test_pr_untrusted_change.py tests/unit/kernels/test_sandbox.py
      echo "pytest exit $?" ;;
    bench)
      timeout 480 python3 benchmarks/sandbox_bench.py --backend cuda --rounds 1
      echo "benchmark exit $?" ;;
    *) echo "unknown part $part" ;;
  esac
} > "$log" 2>&1
