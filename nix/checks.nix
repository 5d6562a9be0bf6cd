# Flake checks (`nix flake check` on a networked Nix 2.18+ machine; CI only evaluates
# them, against nix/stub).
#   every system:  verify-bundles (every committed bundle verifies), flake-structure,
#                  verify (the wrapper builds: writeShellApplication runs shellcheck);
#   x86_64-linux:  also cpu-tests (the CPU suite but the interpreter end to end),
#                  smoke-interpreter (the frozen smoke manifest through the real vLLM
#                  kernels in Triton's interpreter on the Nix-built sources, verified and
#                  compared with the committed smoke bundle), vllm-stock, vllm-patched,
#                  vllm-sources (the pinned trees build and check), gate,
#                  gate-interpreter (no CUDA closure), probe.
{
  pkgs,
  src,
  envs,
  wrappers,
  structureProblems,
  vllmSources ? null,
}:
let
  # The test suite, from a writable copy of the source, with no GPU and no network.
  pytestCheck =
    name: pytestArgs:
    pkgs.runCommand name {
      # git for the tests that make their own repository
      # (tests/unit/pins/test_pinning.py's `git init`); the source copy has no .git, so
      # the tests that read this project's history skip and say so
      # (tests/unit/core/test_provenance.py `needs_git_history`, docs/nix.md). bubblewrap
      # (`bwrap`): kernel children run only in its sandbox (harness/kernels/
      # sandbox.py); inside Nix's build sandbox it needs nested user namespaces (docs/nix.md).
      nativeBuildInputs = [
        envs.tests
        pkgs.git
        pkgs.bubblewrap
      ];
    } ''
      cp -r ${src} source
      chmod -R u+w source
      cd source
      export HOME="$TMPDIR" CUDA_VISIBLE_DEVICES="" TOPP_GATE_CACHE="$TMPDIR/cache"
      export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
      export TOPP_GATE_SOURCES="${vllmSources.dir}"
      python -m pytest -q -p no:cacheprovider ${pytestArgs}
      touch "$out"
    '';
in
{
  # Every committed bundle with the key that signed it, each verified verdict required to be
  # the one evidence/verdicts.tsv records (0 PASS, 1 STOP): the script CI runs. On a full
  # checkout every bundle; on a `github:` tarball (.gitattributes export-ignores the evidence
  # bulk and nix/full-checkout) the bundles it holds, and one line saying the rest is absent.
  verify-bundles = pkgs.runCommand "topp-gate-verify-bundles" { nativeBuildInputs = [ envs.verifier ]; } ''
    bash ${src}/scripts/verify_committed.sh topp-gate
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
      # What it requires on nixpkgs' torch, Triton and Python (docs/nix.md): the same
      # captured inputs, the same per-row results and the same verdict; the kernel output
      # bytes only where torch, Triton and Python are the versions the committed bundle ran.
      smoke-interpreter = pytestCheck "topp-gate-smoke-interpreter" "tests/integration/test_end_to_end.py";
      vllm-stock = vllmSources.stock;
      vllm-patched = vllmSources.patched;
      vllm-sources = vllmSources.dir;
      inherit (wrappers) gate gate-interpreter probe;
    }
)
