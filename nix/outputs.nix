# The flake's outputs, as a function of its inputs (flake.nix passes them). Kept apart
# from flake.nix so tests can evaluate them against nix/stub with an old Nix.
{ self, nixpkgs }:
let
  system = "x86_64-linux";
  config = import ./nixpkgs-config.nix;
  pkgs = import nixpkgs { inherit system config; };
  pins = import ./pins.nix;
  src = self.outPath;

  toppGate = import ./topp-gate.nix { inherit pkgs src; };
  envs = import ./envs.nix { inherit pkgs toppGate; };
  sourcesFor = import ./vllm-sources.nix { inherit pkgs pins; };
  vllmSources = {
    stock = sourcesFor "stock";
    patched = sourcesFor "patched";
  };
  # Both trees in the layout `topp-gate ... --sources DIR` reads: DIR/<tree_sha256>/.
  vllmSourcesDir = pkgs.runCommand "topp-gate-vllm-sources" { } ''
    mkdir -p "$out"
    cp -r ${vllmSources.stock} "$out/${vllmSources.stock.tree_sha256}"
    cp -r ${vllmSources.patched} "$out/${vllmSources.patched.tree_sha256}"
  '';
  wrappers = import ./apps.nix { inherit pkgs envs vllmSourcesDir; };

  packages = {
    default = toppGate;
    topp-gate = toppGate;
    vllm-stock = vllmSources.stock;
    vllm-patched = vllmSources.patched;
    vllm-sources = vllmSourcesDir;
    gpu-env = envs.gpu;
    verifier-env = envs.verifier;
    gate = wrappers.gate;
    probe = wrappers.probe;
    verify = wrappers.verify;
  };
  apps = builtins.mapAttrs (_: program: {
    type = "app";
    inherit program;
  }) wrappers.programs;
  devShells = {
    # GPU: the kernel environment, a C compiler for Triton; run `topp-gate` directly.
    default = pkgs.mkShell {
      packages = [
        envs.gpu
        pkgs.stdenv.cc
      ];
      shellHook = ''
        export CC="${pkgs.stdenv.cc}/bin/cc"
        export TOPP_GATE_SOURCES="${vllmSourcesDir}"
        ${builtins.readFile ./libcuda.sh}
        topp_gate_use_libcuda || echo "topp-gate: no GPU found; use --backend interpreter" >&2
      '';
    };
    # CPU: the verifier and the test tools; no torch.
    cpu = pkgs.mkShell { packages = [ envs.cpuDev ]; };
  };
  structureProblems = import ./structure.nix {
    inherit packages apps devShells pins;
    config = pkgs.config;
  };
in
{
  packages.${system} = packages;
  apps.${system} = apps;
  devShells.${system} = devShells;
  checks.${system} = import ./checks.nix { inherit pkgs src envs structureProblems; };
}
