# A stand-in for nixpkgs, for offline checks only (see docs/nix.md).
#
#   nix flake check --no-build --override-input nixpkgs path:./nix/stub
#
# It is imported exactly as the real nixpkgs flake is (`import nixpkgs { ... }` reads
# this directory's default.nix), so no output is needed here.
{
  description = "topp-gate: offline stub of nixpkgs (evaluation only; nothing here builds)";
  outputs = _: { };
}
