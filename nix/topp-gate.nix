# The topp-gate Python package (module `harness`, console script `topp-gate`) with the
# verifier's dependencies only; the kernel side's come from the environments in
# nix/envs.nix. Tests run as flake checks, not here.
{ pkgs, src }:
let
  project = (builtins.fromTOML (builtins.readFile ../pyproject.toml)).project;
  py = pkgs.python3Packages;
in
py.buildPythonPackage {
  pname = project.name;
  inherit (project) version;
  pyproject = true;
  src = builtins.path {
    name = "topp-gate-source";
    path = src;
    filter =
      path: type:
      let
        rel = builtins.substring (builtins.stringLength (toString src) + 1) (-1) (toString path);
        top = builtins.head (builtins.split "/" rel);
      in
      builtins.elem top [
        "pyproject.toml"
        "README.md"
        "LICENSE"
        "harness"
      ]
      && builtins.match ".*(__pycache__|\\.pyc)$" rel == null;
  };
  build-system = [ py.setuptools ];
  dependencies = [
    py.jsonschema
    py.cryptography
    py.rfc8785
  ];
  doCheck = false;
  pythonImportsCheck = [ "harness" ];
  meta.mainProgram = "topp-gate";
}
