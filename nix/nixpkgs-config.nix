# The nixpkgs configuration every topp-gate output is built with: NVIDIA's unfree CUDA
# redistributables allowed, CUDA on, and code generated for compute capability 9.0
# (Hopper: H100, H200), the GPUs the evidence was measured on.
{
  allowUnfree = true;
  cudaSupport = true;
  cudaCapabilities = [ "9.0" ];
}
