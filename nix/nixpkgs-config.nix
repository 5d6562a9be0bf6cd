# The nixpkgs configuration of the kernel side (x86_64-linux: the `gate` and `probe`
# wrappers, `gpu-env`, the GPU dev shell). The verifier side and the CPU tests import
# nixpkgs without it (nix/per-system.nix).
#
# What each setting does, for the packages we use (docs/nix.md cites the nixpkgs files):
# - allowUnfree: needed. torch-bin and triton-bin are PyTorch's CUDA wheels, linked
#   against NVIDIA's unfree CUDA libraries from cudaPackages.
# - cudaSupport, cudaCapabilities: NOT read by torch-bin or triton-bin. Their kernels are
#   whatever PyTorch and Triton compiled into the wheels (torch's wheel covers 9.0 among
#   others; Triton compiles the vLLM kernels at run time for the GPU it finds). They take
#   effect only for packages built from source with CUDA, such as nixpkgs' `torch` and
#   `triton`, if a later change uses them instead: then code for compute capability 9.0
#   (Hopper: H100, H200, the GPUs the evidence was measured on) only.
{
  allowUnfree = true;
  cudaSupport = true;
  cudaCapabilities = [ "9.0" ];
}
