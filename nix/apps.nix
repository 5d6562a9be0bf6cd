# Wrappers behind `nix run .#gate`, `.#probe` and `.#verify`: each maps to one CLI verb.
# gate and probe run kernels: they find the host's libcuda (nix/libcuda.sh), give Triton
# a C compiler and point topp-gate at the Nix-built vLLM sources.
{
  pkgs,
  envs,
  vllmSourcesDir,
}:
let
  tritonDriver = "${pkgs.python3Packages.triton-bin}/${pkgs.python3.sitePackages}/triton/backends/nvidia/driver.py";
  kernelWrapper =
    verb:
    pkgs.writeShellApplication {
      name = "topp-gate-${verb}";
      runtimeInputs = [
        envs.gpu
        pkgs.stdenv.cc
        pkgs.coreutils
        pkgs.gnugrep
        pkgs.gnused
      ];
      text = ''
        ${builtins.readFile ./libcuda.sh}
        # Triton compiles a small launcher with the C compiler at run time.
        export CC="${pkgs.stdenv.cc}/bin/cc"
        export TOPP_GATE_TRITON_DRIVER_PY="${tritonDriver}"
        # The pinned vLLM sources, built from harness/data/pins.json (nix/vllm-sources.nix),
        # unless the caller names other ones.
        export TOPP_GATE_SOURCES="${vllmSourcesDir}"
        sources=(--sources "$TOPP_GATE_SOURCES")
        for arg in "$@"; do
          case "$arg" in --sources | --sources=*) sources=() ;; esac
        done
        if ! topp_gate_needs_no_gpu "$@"; then
          topp_gate_use_libcuda || exit 2
        fi
        exec topp-gate ${verb} "''${sources[@]}" "$@"
      '';
    };
in
rec {
  gate = kernelWrapper "run";
  probe = kernelWrapper "probe";
  verify = pkgs.writeShellApplication {
    name = "topp-gate-verify";
    runtimeInputs = [ envs.verifier ];
    text = ''exec topp-gate verify "$@"'';
  };
  programs = {
    gate = "${gate}/bin/topp-gate-run";
    probe = "${probe}/bin/topp-gate-probe";
    verify = "${verify}/bin/topp-gate-verify";
  };
}
