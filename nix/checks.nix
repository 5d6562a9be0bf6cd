# Flake checks (`nix flake check` on a networked Nix 2.18+ machine; CI only evaluates
# them, against nix/stub): the CPU test suite, verification of every committed bundle,
# and the flake's own structure test.
{
  pkgs,
  src,
  envs,
  structureProblems,
}:
let
  # Bundles are directories holding receipt.dsse.json anywhere under evidence/.
  findBundles =
    dir: rel:
    let
      entries = builtins.readDir dir;
    in
    if entries ? "receipt.dsse.json" then
      [ rel ]
    else
      builtins.concatLists (
        map (
          n: if entries.${n} == "directory" then findBundles (dir + "/${n}") "${rel}/${n}" else [ ]
        ) (builtins.attrNames entries)
      );
  bundles = if builtins.pathExists (src + "/evidence") then findBundles (src + "/evidence") "evidence" else [ ];
in
{
  cpu-tests = pkgs.runCommand "topp-gate-cpu-tests" { nativeBuildInputs = [ envs.tests ]; } ''
    cp -r ${src} source
    chmod -R u+w source
    cd source
    export HOME="$TMPDIR" CUDA_VISIBLE_DEVICES=""
    python -m pytest -q -p no:cacheprovider -m "not gpu and not sources" tests
    touch "$out"
  '';

  verify-bundles = pkgs.runCommand "topp-gate-verify-bundles" { nativeBuildInputs = [ envs.verifier ]; } ''
    cd ${src}
    bundles="${builtins.concatStringsSep " " bundles}"
    if [ -z "$bundles" ]; then
      echo "no committed bundle (a directory with receipt.dsse.json) under evidence/" >&2
      exit 1
    fi
    for bundle in $bundles; do
      echo "verifying $bundle"
      topp-gate verify "$bundle"
    done
    touch "$out"
  '';

  flake-structure =
    if structureProblems == [ ] then
      pkgs.runCommand "topp-gate-flake-structure" { } ''touch "$out"''
    else
      throw "flake structure: ${builtins.concatStringsSep "; " structureProblems}";
}
