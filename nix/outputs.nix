# The flake's outputs, as a function of its inputs (flake.nix passes them). Kept apart
# from flake.nix so tests can evaluate them against nix/stub with an old Nix.
#
# The verifier (package, app, dev shell, checks) is offered on every system an auditor
# may use; the gate, the probes and the vLLM sources only on x86_64-linux (CUDA, and the
# manylinux x86_64 wheels the pins name).
{ self, nixpkgs }:
let
  gateSystem = "x86_64-linux";
  systems = [
    "x86_64-linux"
    "aarch64-linux"
    "x86_64-darwin"
    "aarch64-darwin"
  ];
  src = self.outPath;
  overlays = import ./overlays.nix { inherit src; };
  perSystem = builtins.listToAttrs (
    map (system: {
      name = system;
      value = import ./per-system.nix {
        inherit nixpkgs system src overlays;
        withGate = system == gateSystem;
      };
    }) systems
  );
  each = output: builtins.mapAttrs (_: outputs: outputs.${output}) perSystem;
in
{
  overlays = {
    default = overlays.topp-gate;
    inherit (overlays) topp-gate triton-libcuda;
  };
  packages = each "packages";
  apps = each "apps";
  devShells = each "devShells";
  checks = each "checks";
  formatter = each "formatter";
}
