# `nix run .#gate-interpreter [-- RUN-ARGS]`: nix/gate.sh on a machine without a GPU, in
# Triton's interpreter, from an environment of nixpkgs' CPU torch and Triton (source-built,
# nothing unfree, no CUDA library in the closure): `nix run .#gate` needs the CUDA
# environment built even for `--backend interpreter`, this app never does.
# nix/apps.nix puts this text before nix/gate.sh instead of nix/libcuda.sh.
for arg in "$@"; do
  case "$arg" in
    --backend | --backend=*)
      printf 'topp-gate: .#gate-interpreter runs only in Triton'"'"'s interpreter; for --backend use nix run .#gate\n' >&2
      exit 2
      ;;
  esac
done
set -- --backend interpreter "$@"
# No GPU driver is looked for: the interpreter needs none.
topp_gate_use_libcuda() { return 1; }
