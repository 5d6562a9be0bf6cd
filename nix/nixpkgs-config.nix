# The nixpkgs configuration of the kernel side (x86_64-linux: the `gate` and `probe`
# wrappers, `gpu-env`, the GPU dev shell). The verifier side and the CPU tests import
# nixpkgs without it (nix/per-system.nix).
#
# What each setting does, for the packages we use (docs/nix.md cites the nixpkgs files):
# - allowUnfree: needed. torch-bin and triton-bin are PyTorch's CUDA wheels, linked
#   against NVIDIA's unfree CUDA libraries from cudaPackages.
# - cudaSupport, cudaCapabilities: not read by torch-bin or triton-bin themselves (their
#   kernels are what PyTorch and Triton put in the wheels; Triton compiles the vLLM kernels
#   at run time for the GPU it finds), but cudaCapabilities DOES change the GPU closure:
#   torch-bin's buildInputs hold cudaPackages.nccl, which nixpkgs builds from source with
#   nvcc for exactly these capabilities (NVCC_GENCODE). So [ "9.0" ] (Hopper: H100, H200,
#   the GPUs the evidence was measured on) makes NCCL compile locally and no public cache
#   holds it (docs/nix.md "Which Python, torch and Triton"; the stub models it and
#   tests/unit/test_flake.py checks that the capability reaches torch-bin's NCCL).
{
  allowUnfree = true;
  cudaSupport = true;
  cudaCapabilities = [ "9.0" ];
}
