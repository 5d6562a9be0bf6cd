

# --- appended by topp-gate's flake (nix/triton-libcuda.nix) ---------------------------------
# TRITON_LIBCUDA_PATH first, whatever this nixpkgs revision made of libcuda_dirs() (some
# return only /run/opengl-driver/lib). Every caller in this module looks the name up when
# it runs, so they all get this one. The meaning is checked, not only the name: a list of
# folders, the variable's folder holding libcuda.so.1 (nix/triton_libcuda_check.py runs
# these checks when triton-bin is built).
_topp_gate_nixpkgs_libcuda_dirs = libcuda_dirs  # noqa: F821 (defined above in driver.py)


@functools.lru_cache  # noqa: F821
def libcuda_dirs():
    import os as _os

    path = _os.environ.get("TRITON_LIBCUDA_PATH")
    if path:
        if not _os.path.exists(_os.path.join(path, "libcuda.so.1")):
            raise RuntimeError(
                f"topp-gate: TRITON_LIBCUDA_PATH={path} holds no libcuda.so.1 (it names the "
                "folder of the host's driver library; nix/libcuda.sh finds it)"
            )
        return [path]
    dirs = _topp_gate_nixpkgs_libcuda_dirs()
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise RuntimeError(
            f"topp-gate: this triton-bin's libcuda_dirs() returned {dirs!r}, not a list of "
            "folders: update nix/triton_libcuda.py (docs/nix.md)"
        )
    return dirs
