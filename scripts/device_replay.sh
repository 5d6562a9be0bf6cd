#!/usr/bin/env bash
# One call on the lent GPU machine (no network): replay upstream sampler bugs (issue 36) with
# `topp-gate replay REPLAY --backend cuda`, each run's bundle signed with $KEY
# (scripts/device_common.sh; here evidence key 6), then packed as the device's own .tar.xz.
#
#   device run: REPLAYS="vllm-42684" bash scripts/device_replay.sh   (carry: .whl .carry)
#
# Carry (git-ignored), made on this machine:
#   .whl/                        the wheels scripts/device_common.sh installs (jsonschema and
#                                its deps, cryptography, cffi, pycparser, rfc8785, pyzmq;
#                                apache-tvm-ffi for FlashInfer)
#   .carry/bubblewrap.deb        apt-get download bubblewrap (the sandbox; the image has none)
#   .carry/replay-sources.tar.xz 'topp-gate sources export DIR --pin P ...' of the vLLM pins
#                                the replays name, as a tar.xz of DIR
#   .carry/fi06-sources.tar.xz   the same of FlashInfer 0.6.0 and 0.6.1 (when a FlashInfer
#                                replay runs; its JIT builds with this machine's nvcc)
#   .carry/topp-gate-evidence-6.key
# Each kernel child runs in bubblewrap's sandbox when it works on this machine; where it does
# not, the run is --unsandboxed (released code only) and the log and the evidence say so.
# Results in $OUT: replay.log, and each replay's folder as replay-ID.tar.xz in 15 MiB parts.
set -uo pipefail
KEY=${KEY:-.carry/topp-gate-evidence-6.key}
. scripts/device_common.sh
REPLAYS=${REPLAYS:?name the replays, as in REPLAYS="vllm-42684"}
mkdir -p /tmp/replay-trees
for sources in .carry/replay-sources.tar.xz .carry/fi06-sources.tar.xz; do
  [ -f "$sources" ] && { tar -C /tmp/replay-trees -xJf "$sources" || exit 1; }
done
log=$OUT/replay.log
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "sm", torch.cuda.get_device_properties(0).multi_processor_count)'
  nvcc --version | tail -2
  unsandboxed=
  if python3 -c 'from harness.kernels import sandbox; print(sandbox.probe().record())'; then
    echo "sandbox: bubblewrap works here"
  else
    unsandboxed=--unsandboxed
    echo "sandbox: bubblewrap does not work here; running --unsandboxed (released code only)"
  fi
  for id in $REPLAYS; do
    echo "== replay $id"
    start=$(date +%s)
    timeout 420 python3 -m harness replay "evidence/replays/$id/replay.json" --backend cuda \
      --key "$KEY" --out "/tmp/replay-$id" --sources /tmp/replay-trees $unsandboxed
    echo "exit $? after $(( $(date +%s) - start )) s"
    [ -d "/tmp/replay-$id" ] && device_tar "replay-$id" "/tmp/replay-$id"
  done
  date -u
} > "$log" 2>&1
cat "$log"
