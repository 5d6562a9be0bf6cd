# The offline tier's attribute check: every nixpkgs attribute path nix/stub offers must be
# listed in nix/stub/nixpkgs-attributes.txt (taken from NixOS/nixpkgs; its header says how
# and at which commits). The flake is evaluated against the stub, so it can only name paths
# the stub offers: a name the flake misspells fails that evaluation, and a name added to
# the stub that nixpkgs does not have fails here. Evaluates to the number of paths checked;
# throws, naming them, when some are not listed.
#
#   nix-instantiate --eval --strict -E "import ./nix/stub/attributes.nix { }"
{
  stub ? ./.,
  list ? ./nixpkgs-attributes.txt,
}:
let
  pkgs = import stub { system = "x86_64-linux"; };
  lines = builtins.filter (l: builtins.isString l && l != "" && builtins.substring 0 1 l != "#") (
    builtins.split "\n" (builtins.readFile list)
  );
  listed = map (l: builtins.head (builtins.split "\t" l)) lines;
  under = prefix: set: map (n: "${prefix}.${n}") (builtins.attrNames set);
  # the nested paths the flake reads below a top-level attribute; each must exist in the stub
  nested = [
    "config.allowUnfree"
    "config.cudaSupport"
    "config.cudaCapabilities"
    "stdenv.cc"
    "python3.withPackages"
    "python3.pkgs"
    "python3.sitePackages"
    "python3.interpreter"
    "python3.pythonVersion"
  ];
  exists =
    path:
    builtins.foldl' (acc: n: if acc != null && acc ? ${n} then acc.${n} else null) pkgs (
      builtins.filter builtins.isString (builtins.split "\\." path)
    ) != null;
  offered =
    builtins.attrNames pkgs
    ++ under "python3Packages" pkgs.python3Packages
    ++ under "lib.licenses" pkgs.lib.licenses
    ++ under "lib.fileset" pkgs.lib.fileset
    ++ under "cudaPackages" pkgs.cudaPackages
    ++ nested;
  absentFromStub = builtins.filter (p: !exists p) nested;
  unlisted = builtins.filter (p: !builtins.elem p listed) offered;
in
if absentFromStub != [ ] then
  throw "nix/stub/attributes.nix: the stub has no ${builtins.concatStringsSep ", " absentFromStub}"
else if unlisted != [ ] then
  throw "nixpkgs attribute check: nix/stub offers ${builtins.concatStringsSep ", " unlisted}, not in nix/stub/nixpkgs-attributes.txt (not found in NixOS/nixpkgs)"
else
  builtins.length offered
