# The flake's own structure test, evaluated by Nix (the `flake-structure` check) and
# mirrored by tests/unit/test_flake.py. Returns a list of problems; empty means good.
{
  packages,
  apps,
  devShells,
  pins,
  config,
}:
let
  missing = set: names: builtins.filter (n: !(set ? ${n})) names;
  inStore = s: builtins.substring 0 (builtins.stringLength builtins.storeDir + 1) s == "${builtins.storeDir}/";
  appProblems = builtins.concatLists (
    map (
      n:
      let
        a = apps.${n};
      in
      (if a.type or null == "app" then [ ] else [ "apps.${n} is not of type app" ])
      ++ (if inStore (a.program or "") then [ ] else [ "apps.${n}.program is not in the Nix store" ])
    ) (builtins.attrNames apps)
  );
  wheelProblems = builtins.concatLists (
    map (
      side:
      let
        w = packages."vllm-${side}".wheel;
      in
      if w.name == pins.sides.${side}.wheel then
        [ ]
      else
        [ "the ${side} wheel is ${w.name}, the pin file says ${pins.sides.${side}.wheel}" ]
    ) [ "stock" "patched" ]
  );
in
map (n: "missing packages.${n}") (missing packages [ "default" "topp-gate" "vllm-stock" "vllm-patched" ])
++ map (n: "missing apps.${n}") (missing apps [ "gate" "verify" "probe" ])
++ map (n: "missing devShells.${n}") (missing devShells [ "default" "cpu" ])
++ appProblems
++ wheelProblems
++ (if config.cudaSupport && config.allowUnfree && config.cudaCapabilities == [ "9.0" ] then [ ] else [ "nixpkgs is not imported with allowUnfree, cudaSupport and capability 9.0" ])
