# Flake checks (`nix flake check` on a networked Nix 2.18+ machine; CI only evaluates
# them, against nix/stub).
#   every system:  verify-bundles (every committed bundle verifies), flake-structure,
#                  verify (the wrapper builds: writeShellApplication runs shellcheck);
#   x86_64-linux:  also cpu-tests (the CPU suite but the interpreter end to end),
#                  smoke-interpreter (the frozen smoke manifest through the real vLLM
#                  kernels in Triton's interpreter on the Nix-built sources, verified and
#                  compared with the committed smoke bundle), vllm-stock, vllm-patched,
#                  vllm-sources (the pinned trees build and check), gate, probe.
{
  pkgs,
  src,
  envs,
  wrappers,
  structureProblems,
  vllmSources ? null,
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
  bundles =
    if builtins.pathExists (src + "/evidence") then findBundles (src + "/evidence") "evidence" else [ ];
  # The test suite, from a writable copy of the source, with no GPU and no network.
  pytestCheck =
    name: pytestArgs:
    pkgs.runCommand name { nativeBuildInputs = [ envs.tests ]; } ''
      cp -r ${src} source
      chmod -R u+w source
      cd source
      export HOME="$TMPDIR" CUDA_VISIBLE_DEVICES="" TOPP_GATE_CACHE="$TMPDIR/cache"
      export TOPP_GATE_SOURCES="${vllmSources.dir}"
      python -m pytest -q -p no:cacheprovider ${pytestArgs}
      touch "$out"
    '';
in
{
  verify-bundles = pkgs.runCommand "topp-gate-verify-bundles" { nativeBuildInputs = [ envs.verifier ]; } ''
    cd ${src}
    bundles="${builtins.concatStringsSep " " bundles}"
    if [ -z "$bundles" ]; then
      echo "no committed bundle (a directory with receipt.dsse.json) under evidence/" >&2
      exit 1
    fi
    for bundle in $bundles; do
      echo "verifying $bundle"
      # verified: 0 (PASS) or 1 (STOP); anything else fails the check
      if topp-gate verify "$bundle"; then :; else
        rc=$?
        if [ "$rc" -ne 1 ]; then exit "$rc"; fi
      fi
    done
    touch "$out"
  '';

  flake-structure =
    if structureProblems == [ ] then
      pkgs.runCommand "topp-gate-flake-structure" { } ''touch "$out"''
    else
      throw "flake structure: ${builtins.concatStringsSep "; " structureProblems}";

  verify = wrappers.verify;
}
// (
  if vllmSources == null then
    { }
  else
    {
      cpu-tests = pytestCheck "topp-gate-cpu-tests" ''-m "not gpu and not sources" tests'';
      # tests/integration/test_end_to_end.py is CI's end-to-end test (6.4 minutes on 2
      # cores outside Nix): run, verify, compare with evidence/bundles/smoke-interpreter-*.
      smoke-interpreter = pytestCheck "topp-gate-smoke-interpreter" "tests/integration/test_end_to_end.py";
      vllm-stock = vllmSources.stock;
      vllm-patched = vllmSources.patched;
      vllm-sources = vllmSources.dir;
      inherit (wrappers) gate probe;
    }
)
