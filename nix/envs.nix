# Python environments. The torch and Triton that run BOTH kernels are nixpkgs' torch-bin
# and triton-bin at the pinned revision, not the versions each vLLM release pins; every
# receipt records the running versions next to the pinned ones.
{ pkgs, toppGate }:
let
  kernelSide = ps: [
    ps.torch-bin
    ps.triton-bin
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
  testTools = ps: [
    ps.pytest
    ps.hypothesis
    ps.mpmath
    ps.securesystemslib
  ];
in
{
  # The offline verifier: standard library, jsonschema, cryptography, rfc8785. No torch.
  verifier = pkgs.python3.withPackages (_: [ toppGate ]);
  # Kernel runs on CUDA (or in Triton's interpreter on a CPU).
  gpu = pkgs.python3.withPackages (ps: [ toppGate ] ++ kernelSide ps) // {
    nixpkgsConfig = {
      inherit (pkgs.config) allowUnfree cudaSupport cudaCapabilities;
    };
  };
  # The CPU test suite: everything but the GPU, including Triton's interpreter.
  tests = pkgs.python3.withPackages (ps: [ toppGate ] ++ kernelSide ps ++ testTools ps);
  # CPU development shell: verifier side plus the test tools, no torch.
  cpuDev = pkgs.python3.withPackages (ps: [ toppGate ] ++ testTools ps);
}
