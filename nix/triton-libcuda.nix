# Make nixpkgs' triton-bin look for libcuda where TRITON_LIBCUDA_PATH says, first.
#
# The `gate` and `probe` wrappers find the host's libcuda.so.1 (nix/libcuda.sh) and set
# TRITON_LIBCUDA_PATH. Upstream Triton reads it in `libcuda_dirs()`
# (triton/backends/nvidia/driver.py), and triton-bin at the pinned nixpkgs revision leaves
# that function alone, but later nixpkgs replace its first lines by
# `return '/run/opengl-driver/lib/libcuda.so'` (docs/nix.md cites the file), which only
# works on NixOS or a host prepared by hand. Moving the pin must not break the GPU run on
# other hosts silently, so we append nix/triton_libcuda.py to driver.py: it wraps whatever
# `libcuda_dirs` this revision has, and returns [TRITON_LIBCUDA_PATH] when that is set.
# The build fails (rather than the run) when driver.py has no `libcuda_dirs` any more.
{ python }:
triton-bin:
triton-bin.overridePythonAttrs (old: {
  postFixup = (old.postFixup or "") + ''
    driver="$out/${python.sitePackages}/triton/backends/nvidia/driver.py"
    if ! grep -q '^def libcuda_dirs' "$driver"; then
      echo "topp-gate: $driver has no libcuda_dirs(); update nix/triton-libcuda.nix" >&2
      exit 1
    fi
    cat ${./triton_libcuda.py} >> "$driver"
    ${python.interpreter} -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$driver"
  '';
})
