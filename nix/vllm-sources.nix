# One side's vLLM sources: the pinned wheel, fetched by nixpkgs' fetchPypi with the
# sha256 from harness/data/pins.json, unpacked to exactly the pure-Python files that the
# pin file lists for that side (the kernel's import closure and the .dist-info METADATA),
# each checked against its pinned sha256. The pin file is the one source of truth, shared
# with harness/pins/sources.py: the output is the tree that `--sources DIR` expects at
# DIR/<tree_sha256>.
{ pkgs, pins }:
side:
let
  s = pins.sides.${side};
  wheel = pkgs.python3Packages.fetchPypi (pins.wheelArgs side);
  files =
    s.files or (throw "harness/data/pins.json: sides.${side} has no 'files' list (run the sources pinning first)");
  # "<sha256>  <path>\n" for every pinned file, sorted by path (builtins.attrNames sorts
  # bytewise, as LC_ALL=C sort does): the text whose sha256 is the pinned tree digest.
  sumsText = builtins.concatStringsSep "" (map (p: "${files.${p}}  ${p}\n") (builtins.attrNames files));
  sums =
    if builtins.hashString "sha256" sumsText == s.tree_sha256 then
      pkgs.writeText "vllm-${s.version}-files.sha256" sumsText
    else
      throw "harness/data/pins.json: sides.${side}.tree_sha256 disagrees with its file list";
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
      inherit wheel side sums;
      inherit (s) version tree_sha256;
    };
  }
  ''
    mkdir -p "$out"
    cut -c67- ${sums} | xargs unzip -qq "$src" -d "$out"
    cd "$out"
    sha256sum --check --quiet --strict ${sums}
    test "$(find . -type f | wc -l)" -eq ${toString (builtins.length (builtins.attrNames files))}
    echo "${s.kernel_sha256}  ${pins.kernel_path}" | sha256sum --check --quiet -
  ''
