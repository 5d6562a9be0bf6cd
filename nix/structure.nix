# The flake's own structure test for one system, evaluated by Nix (the `flake-structure`
# check) and mirrored by tests/unit/test_flake.py. Returns a list of problems; empty means
# good. `withGate`: this system also carries the kernel side (x86_64-linux).
{
  packages,
  apps,
  devShells,
  pins,
  config,
  withGate,
  src,
}:
let
  missing = set: names: builtins.filter (n: !(set ? ${n})) names;
  inStore =
    s: builtins.substring 0 (builtins.stringLength builtins.storeDir + 1) s == "${builtins.storeDir}/";
  appProblems = builtins.concatLists (
    map (
      n:
      let
        a = apps.${n};
      in
      (if a.type or null == "app" then [ ] else [ "apps.${n} is not of type app" ])
      ++ (if inStore (a.program or "") then [ ] else [ "apps.${n}.program is not in the Nix store" ])
      ++ (if (a.meta.description or "") != "" then [ ] else [ "apps.${n} has no meta.description" ])
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
  manifestProblems = map (m: "the frozen manifest ${m} is missing") (
    builtins.filter (m: !(builtins.pathExists (src + "/evidence/manifests/${m}"))) [
      "h200-forced-logit-gate.json"
      "h200-forced-logit-gate.json.sha256"
      "smoke-interpreter.json"
      "smoke-interpreter.json.sha256"
    ]
  );
  gateProblems =
    map (n: "missing packages.${n}") (
      missing packages [
        "vllm-stock"
        "vllm-patched"
        "vllm-sources"
        "gpu-env"
        "interpreter-env"
        "gate"
        "gate-interpreter"
        "probe"
      ]
    )
    ++ map (n: "missing apps.${n}") (missing apps [ "gate" "gate-interpreter" "probe" ])
    ++ map (n: "missing devShells.${n}") (missing devShells [ "gpu" ])
    ++ (if packages ? vllm-stock && packages ? vllm-patched then wheelProblems else [ ])
    ++ (
      if config.allowUnfree && config.cudaSupport && config.cudaCapabilities == [ "9.0" ] then
        [ ]
      else
        [ "nixpkgs is not imported with allowUnfree, cudaSupport and capability 9.0" ]
    );
in
map (n: "missing packages.${n}") (missing packages [ "default" "topp-gate" "verify" ])
++ map (n: "missing apps.${n}") (missing apps [ "verify" ])
++ map (n: "missing devShells.${n}") (missing devShells [ "default" "cpu" ])
++ appProblems
++ manifestProblems
++ (if withGate then gateProblems else [ ])
