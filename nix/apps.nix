# The wrappers behind `nix run .#verify`, `.#gate` and `.#probe`. Their text lives in
# nix/verify.sh, nix/gate.sh (after nix/libcuda.sh) and here (probe); `render` puts the
# store paths in, exactly as tests/unit/test_nix_wrappers.py does with its own paths.
{
  pkgs,
  envs,
  manifests,
  # the kernel side (x86_64-linux): nixpkgs with CUDA, and the Nix-built vLLM sources
  gpuPkgs ? null,
  vllmSourcesDir ? null,
}:
let
  render =
    file: values:
    builtins.replaceStrings (map (n: "@${n}@") (builtins.attrNames values)) (builtins.attrValues values) (
      builtins.readFile file
    );
  libcuda = builtins.readFile ./libcuda.sh;
  app = drv: description: {
    type = "app";
    program = "${drv}/bin/${drv.meta.mainProgram}";
    meta = { inherit description; };
  };
  verify = pkgs.writeShellApplication {
    name = "topp-gate-verify";
    runtimeInputs = [ envs.verifier ];
    text = render ./verify.sh { manifests = "${manifests}"; };
  };
  # bubblewrap (`bwrap`) in both: kernel children run only in its sandbox
  # (harness/kernels/sandbox.py); without it topp-gate refuses in one line.
  kernelInputs = [
    envs.gpu
    gpuPkgs.stdenv.cc
    gpuPkgs.coreutils
    gpuPkgs.gnugrep
    gpuPkgs.gnused
    gpuPkgs.bubblewrap
  ];
  # Triton's interpreter on nixpkgs' CPU torch and Triton: no CUDA closure (nix/envs.nix).
  interpreterInputs = [
    envs.interpreter
    pkgs.stdenv.cc
    pkgs.coreutils
    pkgs.gnugrep
    pkgs.gnused
    pkgs.bubblewrap
  ];
in
if vllmSourcesDir == null then
  {
    wrappers = { inherit verify; };
    apps.verify = app verify "Verify a topp-gate evidence bundle offline (no GPU, no torch)";
  }
else
  rec {
    wrappers = {
      inherit verify;
      gate = gpuPkgs.writeShellApplication {
        name = "topp-gate-run";
        runtimeInputs = kernelInputs;
        text =
          libcuda
          + "\n"
          + render ./gate.sh {
            manifests = "${manifests}";
            vllmSources = "${vllmSourcesDir}";
            cc = "${gpuPkgs.stdenv.cc}/bin/cc";
          };
      };
      gate-interpreter = pkgs.writeShellApplication {
        name = "topp-gate-run-interpreter";
        runtimeInputs = interpreterInputs;
        text =
          builtins.readFile ./gate-interpreter.sh
          + "\n"
          + render ./gate.sh {
            manifests = "${manifests}";
            vllmSources = "${vllmSourcesDir}";
            cc = "${pkgs.stdenv.cc}/bin/cc";
          };
      };
      probe = gpuPkgs.writeShellApplication {
        name = "topp-gate-probe";
        runtimeInputs = kernelInputs;
        text = libcuda + ''

          # `nix run .#probe -- ...` = topp-gate probe with the Nix-built vLLM sources.
          export CC="${gpuPkgs.stdenv.cc}/bin/cc"
          sources=(--sources "${vllmSourcesDir}")
          for arg in "$@"; do
            case "$arg" in --sources | --sources=*) sources=() ;; esac
          done
          if ! topp_gate_needs_no_gpu "$@"; then
            topp_gate_use_libcuda || exit 2
          fi
          exec topp-gate probe "''${sources[@]}" "$@"
        '';
      };
    };
    apps = {
      verify = app wrappers.verify "Verify a topp-gate evidence bundle offline (no GPU, no torch)";
      gate = app wrappers.gate "Run the predeclared split top-p gate, sign the bundle and verify it";
      gate-interpreter = app wrappers.gate-interpreter "Run the gate in Triton's interpreter on CPU torch and Triton (no CUDA closure)";
      probe = app wrappers.probe "Run topp-gate's breakage probes on the pinned vLLM kernels";
    };
  }
