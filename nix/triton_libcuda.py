

# --- appended by topp-gate's flake (nix/triton-libcuda.nix) ---------------------------------
# TRITON_LIBCUDA_PATH first, whatever this nixpkgs revision made of libcuda_dirs() (some
# return only /run/opengl-driver/lib). Every caller in this module looks the name up when
# it runs, so they all get this one.
_topp_gate_nixpkgs_libcuda_dirs = libcuda_dirs  # noqa: F821 (defined above in driver.py)


@functools.lru_cache  # noqa: F821
def libcuda_dirs():
    import os as _os

    path = _os.environ.get("TRITON_LIBCUDA_PATH")
    if path:
        return [path]
    return _topp_gate_nixpkgs_libcuda_dirs()
