{
  description = "topp-gate: run stock and patched vLLM split top-p Triton kernels and produce signed, offline-verifiable evidence";

  # The only input. The literal revision is repeated in flake.lock and in
  # harness/data/pins.json (key "nixpkgs"); tests/unit/test_flake.py keeps them equal.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/0182a361324364ae3f436a63005877674cf45efb";

  outputs = { self, nixpkgs }: import ./nix/outputs.nix { inherit self nixpkgs; };
}
