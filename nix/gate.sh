# `nix run .#gate [-- RUN-ARGS]`: the predeclared gate from any directory, with nothing
# prepared (README "Two commands", as scripts/gate does without Nix):
#   - the signing key: --key, else $TOPP_GATE_KEY, else
#     ${XDG_CONFIG_HOME:-~/.config}/topp-gate/signing.key, made on first use (mode 0600);
#   - the frozen manifest: --manifest, else the flake's own copy of
#     evidence/manifests/h200-forced-logit-gate.json when a CUDA GPU is usable, else
#     smoke-interpreter.json in Triton's interpreter (said so, and named so in the bundle);
#   - the bundle: --out, else a fresh ./topp-gate-runs/<manifest>-<UTC time>/ (announced);
#   - the vLLM sources: the Nix-built trees, unless --sources is given.
# Then the new bundle is verified against the frozen manifest, and the exit code is the
# verdict's: 0 PASS, 1 STOP (both verified); 2 refused before a run; 4 verification failed.
# Give options as full names (--manifest X or --manifest=X).
#
# nix/apps.nix puts nix/libcuda.sh before this text and replaces the three store paths
# below; tests/unit/test_nix_wrappers.py does the same with its own paths and runs it.
manifests="@manifests@"
h200_manifest="$manifests/h200-forced-logit-gate.json"
smoke_manifest="$manifests/smoke-interpreter.json"
# Triton compiles a small launcher with the C compiler at run time.
export CC="@cc@"
# The pinned vLLM sources, built from harness/data/pins.json (nix/vllm-sources.nix).
export TOPP_GATE_SOURCES="@vllmSources@"

say() { printf 'topp-gate: %s\n' "$*" >&2; }

manifest="" backend="" out="" key="" sources=(--sources "$TOPP_GATE_SOURCES") prev=""
for arg in "$@"; do
  case "$prev" in
    --manifest) manifest=$arg ;;
    --backend) backend=$arg ;;
    --out) out=$arg ;;
    --key) key=$arg ;;
  esac
  # `topp-gate run` (argparse) would take an abbreviation such as --man X for --manifest X,
  # past this wrapper's own reading of the options (and so past the FlashInfer refusal
  # below, issue 38): an abbreviation of an option read here is refused, in one line
  case "$prev:$arg" in
    --manifest:* | --backend:* | --out:* | --key:* | --sources:*) ;;
    *:--?*)
      for full in --manifest --backend --out --key --sources --help; do
        if [ "${arg%%=*}" != "$full" ] && [ "${full#"${arg%%=*}"}" != "$full" ]; then
          say "${arg%%=*}: give options as full names ($full): the Nix gate reads $full itself"
          exit 2
        fi
      done
      ;;
  esac
  case "$arg" in
    -h | --help) exec topp-gate run --help ;;
    --manifest=*) manifest=${arg#*=} ;;
    --backend=*) backend=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --key=*) key=${arg#*=} ;;
    --sources | --sources=*) sources=() ;;
  esac
  prev=$arg
done

# The Nix gate carries the vLLM kernel families only (vllm-triton, vllm-pytorch): FlashInfer
# needs its pinned wheel and nvcc for its JIT, which this flake does not build (docs/nix.md).
# A manifest naming another family is refused here, in one line, before anything is made.
if [ -n "$manifest" ] && [ -f "$manifest" ]; then
  other=$(python3 -c '
import json, re, sys
try:
    sides = json.load(open(sys.argv[1], encoding="utf-8"))["sources"]["sides"].values()
    found = sorted({s.get("family") or "vllm-triton" for s in sides} - {"vllm-triton", "vllm-pytorch"})
except Exception:  # not a manifest: topp-gate run says why
    found = []
# escaped for the terminal: a family id is [a-z][a-z0-9-]*, anything else shows as ?
print(" ".join(re.sub(r"[^A-Za-z0-9._-]", "?", str(f)) for f in found)[:80])
' "$manifest" 2>/dev/null || true)
  if [ -n "$other" ]; then
    say "the Nix gate runs only the vLLM kernel families; this manifest names $other (not in the flake: docs/nix.md); run it with scripts/gate or topp-gate run outside Nix"
    exit 2
  fi
fi

# True when torch (from the kernel environment) sees a CUDA device.
cuda_usable() {
  python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null
}

# The manifest, and the GPU driver when the run needs one.
if [ -z "$manifest" ] && [ "$backend" = interpreter ]; then
  manifest=$smoke_manifest
  say "--backend interpreter: running the frozen smoke manifest in Triton's interpreter"
elif [ -z "$manifest" ] && [ "$backend" = cuda ]; then
  manifest=$h200_manifest
  topp_gate_use_libcuda || exit 2
elif [ -z "$manifest" ]; then
  if topp_gate_use_libcuda 2>/dev/null && cuda_usable; then
    manifest=$h200_manifest
  else
    manifest=$smoke_manifest
    say "no usable CUDA GPU (libcuda.so.1 not found, or torch sees no device): running the"
    say "  frozen SMOKE manifest in Triton's interpreter, not the H200 gate (slow; the bundle"
    say "  and its receipt say backend interpreter). For the GPU gate: TOPP_GATE_LIBCUDA_DIR=DIR"
  fi
elif [ "$backend" != interpreter ]; then
  # The user's manifest: the driver is needed unless it runs in the interpreter.
  if ! topp_gate_use_libcuda 2>/dev/null; then
    if [ "$backend" = cuda ]; then
      topp_gate_use_libcuda || exit 2
    fi
    say "no libcuda.so.1 found: only a manifest for the interpreter can run"
  fi
fi

defaults=(--manifest "$manifest")
if [ -z "$key" ]; then
  key=${TOPP_GATE_KEY:-${XDG_CONFIG_HOME:-$HOME/.config}/topp-gate/signing.key}
  if [ ! -e "$key" ]; then
    case "$key" in
      *.key) ;;
      *)
        say "cannot create the signing key $key: its name must end in .key"
        exit 2
        ;;
    esac
    say "no signing key yet: creating $key (mode 0600) and ${key%.key}.pub"
    topp-gate keygen --out "${key%.key}" >&2
  fi
  defaults+=(--key "$key")
fi
if [ -z "$out" ]; then
  out=topp-gate-runs/$(basename "$manifest" .json)-$(date -u +%Y%m%dT%H%M%SZ)
  defaults+=(--out "$out")
fi
case "$out" in
  /*) say "the bundle goes to $out" ;;
  *) say "the bundle goes to $PWD/$out" ;;
esac

set +o errexit
topp-gate run "${defaults[@]}" "${sources[@]}" "$@"
rc=$?
set -o errexit
if [ "$rc" -gt 1 ]; then exit "$rc"; fi # refused or failed: no bundle to verify

say "verifying $out against the frozen manifest $manifest"
set +o errexit
topp-gate verify "$out" --pubkey "${key%.key}.pub" --frozen-manifest "$manifest"
verify_rc=$?
set -o errexit
if [ "$verify_rc" -gt 1 ]; then exit "$verify_rc"; fi
# 0 PASS or 1 STOP from both; a STOP from either one is the answer.
if [ "$rc" -gt "$verify_rc" ]; then exit "$rc"; fi
exit "$verify_rc"
