#!/usr/bin/env bash
# One call on the lent NVIDIA H200 (no network): the frozen H200 gate run (issue 6), then
# the kernel suite (issue 3) with the time left. Everything it needs is carried in ignored
# folders:
#   .whl/      wheels the GPU image lacks (jsonschema, cryptography, rfc8785, pyzmq, ...)
#   .carry/    sources/ (topp-gate sources export) and the evidence signing key
# Results go to $OUT (the tool returns at most 8 files of 16 MiB): gate.log, the bundle as
# 15 MiB tar parts, suite.log and suite.json.
#
#   device run: bash scripts/device_gate.sh   (carry: .whl .carry)
set -uo pipefail
OUT=${OUT:?set by the device tool}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-170}
SUITE_ARGS=${SUITE_ARGS:-}          # e.g. --no-interpreter (the image's Triton 3.6 interpreter fails)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
log=$OUT/gate.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  echo "== frozen H200 gate (issue 6)"
} > "$log" 2>&1
bundle=/tmp/h200-forced-logit-gate-cuda
chmod 600 .carry/topp-gate-evidence.key   # run refuses a key others may read (as ssh)
timeout 380 python3 -m harness run --manifest evidence/manifests/h200-forced-logit-gate.json \
  --out "$bundle" --key .carry/topp-gate-evidence.key --sources .carry/sources \
  --repeats 5 >> "$log" 2>&1
echo "run rc=$?" >> "$log"
python3 -m harness verify "$bundle" --pubkey evidence/keys/topp-gate-evidence.pub >> "$log" 2>&1
echo "verify rc=$? (0 verified PASS, 1 verified STOP, 4 refused)" >> "$log"
if [ -d "$bundle" ]; then
  tar -C /tmp -cf /tmp/bundle.tar "$(basename "$bundle")"
  sha256sum /tmp/bundle.tar >> "$log"
  split -b 15M -d /tmp/bundle.tar "$OUT/bundle.tar.part-"
fi
date -u >> "$log"

echo "== kernel suite (issue 3), timeout ${SUITE_TIMEOUT}s" > "$OUT/suite.log"
timeout "$SUITE_TIMEOUT" python3 scripts/gpu_kernel_suite.py --sources .carry/sources \
  --out /tmp/suite --repeats 20 $SUITE_ARGS >> "$OUT/suite.log" 2>&1
echo "suite rc=$?" >> "$OUT/suite.log"
cp /tmp/suite/suite.json "$OUT/suite.json" 2>/dev/null
ls -la "$OUT"
