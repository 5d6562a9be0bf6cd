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
# The build fails (rather than the run) when the meaning changed, not only the name
# (issue 38): nix/triton_libcuda_check.py requires a module-level `libcuda_dirs` that returns
# a list of folders (later nixpkgs return one file path, a string) and runs the appended
# wrapper alone (TRITON_LIBCUDA_PATH's folder must hold libcuda.so.1). At run time the
# wrapper refuses the same two things, in one message each.
{ python }:
triton-bin:
triton-bin.overridePythonAttrs (old: {
  postFixup = (old.postFixup or "") + ''
    driver="$out/${python.sitePackages}/triton/backends/nvidia/driver.py"
    ${python.interpreter} ${./triton_libcuda_check.py} "$driver" ${./triton_libcuda.py}
    cat ${./triton_libcuda.py} >> "$driver"
    ${python.interpreter} -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$driver"
  '';
})
