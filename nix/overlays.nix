# The flake's overlays (`overlays.*`); nix/outputs.nix applies both to its own nixpkgs.
#   topp-gate       pkgs.topp-gate (the `topp-gate` command) and python3Packages.topp-gate
#                   (the verifier package; the kernel side needs the `gpu` extras too);
#   triton-libcuda  triton-bin honours TRITON_LIBCUDA_PATH at any nixpkgs revision
#                   (nix/triton-libcuda.nix says why).
# (nix/outputs.nix passes { src }; the package's source is lib.fileset paths relative to
# nix/topp-gate.nix, so nothing here reads it.)
_:
{
  topp-gate = final: prev: {
    pythonPackagesExtensions = (prev.pythonPackagesExtensions or [ ]) ++ [
      (pyfinal: _: { topp-gate = pyfinal.callPackage ./topp-gate.nix { }; })
    ];
    topp-gate = final.python3Packages.toPythonApplication final.python3Packages.topp-gate;
  };

  triton-libcuda = _: prev: {
    pythonPackagesExtensions = (prev.pythonPackagesExtensions or [ ]) ++ [
      (pyfinal: pyprev: {
        triton-bin = import ./triton-libcuda.nix { inherit (pyfinal) python; } pyprev.triton-bin;
      })
    ];
  };
}
