# One side's vLLM sources: the pinned wheel, fetched by nixpkgs' fetchPypi with the
# sha256 from harness/data/pins.json, unpacked to its pure-Python files (every .py file
# and the .dist-info metadata; no compiled objects). The build fails unless the kernel
# file has the pinned kernel_sha256.
{ pkgs, pins }:
side:
let
  s = pins.sides.${side};
  wheel = pkgs.python3Packages.fetchPypi (pins.wheelArgs side);
in
pkgs.runCommand "vllm-${s.version}-${side}-python-sources"
  {
    nativeBuildInputs = [
      pkgs.unzip
      pkgs.coreutils
      pkgs.findutils
    ];
    src = wheel;
    passthru = {
      inherit wheel side;
      inherit (s) version;
    };
  }
  ''
    unzip -q "$src" -d wheel
    cd wheel
    mkdir -p "$out"
    find . -type f \( -name '*.py' -o -path './vllm-${s.version}.dist-info/*' \) -print0 \
      | xargs -0 cp --parents -t "$out"
    echo "${s.kernel_sha256}  $out/${pins.kernel_path}" | sha256sum -c -
  ''
