# One system's outputs. Every system: the verifier. With `withGate` (x86_64-linux): also
# the kernel side, from nixpkgs imported with nix/nixpkgs-config.nix (unfree CUDA).
{
  nixpkgs,
  system,
  src,
  overlays,
  withGate,
}:
let
  pins = import ./pins.nix;
  # No CUDA, nothing unfree: the verifier, the dev shell and the CPU tests.
  cpuPkgs = import nixpkgs {
    inherit system;
    overlays = [ overlays.topp-gate ];
  };
  gpuPkgs = import nixpkgs {
    inherit system;
    config = import ./nixpkgs-config.nix;
    overlays = [
      overlays.topp-gate
      overlays.triton-libcuda
    ];
  };
  manifests = import ./manifests.nix { inherit src; };
  envs = import ./envs.nix ({ inherit cpuPkgs; } // (if withGate then { inherit gpuPkgs; } else { }));

  sourcesFor = import ./vllm-sources.nix {
    pkgs = cpuPkgs;
    inherit pins;
  };
  vllmSources = rec {
    stock = sourcesFor "stock";
    patched = sourcesFor "patched";
    # Both trees in the layout `topp-gate ... --sources DIR` reads: DIR/<tree_sha256>/.
    dir = cpuPkgs.runCommand "topp-gate-vllm-sources" { } ''
      mkdir -p "$out"
      cp -r ${stock} "$out/${stock.tree_sha256}"
      cp -r ${patched} "$out/${patched.tree_sha256}"
    '';
  };
  made = import ./apps.nix (
    {
      pkgs = cpuPkgs;
      inherit envs manifests;
    }
    // (
      if withGate then
        {
          inherit gpuPkgs;
          vllmSourcesDir = vllmSources.dir;
        }
      else
        { }
    )
  );
  wrappers = made.wrappers;

  # Sets TOPP_GATE_ROOT for the editable `topp-gate` (nix/envs.nix): the checkout you are in.
  editableHook = ''
    export TOPP_GATE_ROOT="$PWD"
    if [ ! -f "$TOPP_GATE_ROOT/harness/cli.py" ]; then
      echo "topp-gate: start the dev shell in the checkout: topp-gate runs $TOPP_GATE_ROOT/harness" >&2
    fi
  '';
  # bubblewrap (`bwrap`) for the tests that run kernel children in its sandbox
  # (harness/kernels/sandbox.py); nixpkgs builds it for Linux only.
  isLinux = builtins.match ".*-linux" system != null;
  cpuShell = cpuPkgs.mkShell {
    packages = [
      envs.cpuDev
      cpuPkgs.ruff
    ]
    ++ (if isLinux then [ cpuPkgs.bubblewrap ] else [ ]);
    shellHook = editableHook;
  };

  packages = {
    default = cpuPkgs.topp-gate;
    topp-gate = cpuPkgs.topp-gate;
    verifier-env = envs.verifier;
    inherit (wrappers) verify;
  }
  // (
    if withGate then
      {
        vllm-stock = vllmSources.stock;
        vllm-patched = vllmSources.patched;
        vllm-sources = vllmSources.dir;
        gpu-env = envs.gpu;
        interpreter-env = envs.interpreter;
        inherit (wrappers) gate gate-interpreter probe;
      }
    else
      { }
  );
  devShells = {
    # CPU: your edits (editable topp-gate), the verifier, the test tools, ruff and mypy.
    # `nix develop` gives it on every system: nothing unfree, no CUDA closure to build.
    cpu = cpuShell;
    default = cpuShell;
  }
  // (
    if withGate then
      {
        # `nix develop .#gpu`: the kernel environment with your edits, a C compiler for
        # Triton, libcuda found (unfree CUDA libraries; x86_64-linux only).
        gpu = gpuPkgs.mkShell {
          packages = [
            envs.gpuDev
            gpuPkgs.stdenv.cc
            gpuPkgs.ruff
            gpuPkgs.bubblewrap
          ];
          shellHook = editableHook + ''
            export CC="${gpuPkgs.stdenv.cc}/bin/cc"
            export TOPP_GATE_SOURCES="${vllmSources.dir}"
            ${builtins.readFile ./libcuda.sh}
            topp_gate_use_libcuda || echo "topp-gate: no GPU found; use --backend interpreter" >&2
          '';
        };
      }
    else
      { }
  );
  structureProblems = import ./structure.nix {
    inherit
      packages
      devShells
      pins
      withGate
      src
      ;
    inherit (made) apps;
    config = gpuPkgs.config;
  };
in
{
  inherit packages devShells;
  inherit (made) apps;
  checks = import ./checks.nix (
    {
      pkgs = cpuPkgs;
      inherit
        src
        envs
        wrappers
        structureProblems
        ;
    }
    // (if withGate then { inherit vllmSources; } else { })
  );
  # `nix fmt`: nixpkgs' nixfmt-tree (treefmt running nixfmt, the RFC 166 style, on every
  # .nix file of the tree). Plain nixfmt reads stdin when `nix fmt` passes no arguments,
  # as newer Nix does; nixfmt-tree's own description recommends it for `formatter`.
  formatter = cpuPkgs.nixfmt-tree;
}
