# The topp-gate Python package (module `harness`, console script `topp-gate`) with the
# verifier's dependencies only; the kernel side's come from the environments in
# nix/envs.nix. Called from the python package set (nix/overlays.nix), so it works with
# any nixpkgs' python3Packages. Tests run as flake checks, not here.
{
  src,
  lib,
  buildPythonPackage,
  setuptools,
  jsonschema,
  cryptography,
  rfc8785,
  numpy,
}:
let
  project = (builtins.fromTOML (builtins.readFile ../pyproject.toml)).project;
in
buildPythonPackage {
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
  build-system = [ setuptools ];
  dependencies = [
    jsonschema
    cryptography
    rfc8785
    numpy
  ];
  doCheck = false;
  pythonImportsCheck = [ "harness" ];
  # The pyproject.toml the wheel's METADATA comes from (the filter above copies it
  # unchanged into `src`). nix/stub reads this one for its pythonRuntimeDepsCheckHook: Nix
  # 2.8's `flake check --no-build` computes the filtered copy's store path without writing
  # it, so `${src}/pyproject.toml` does not exist on a fresh store (issue 28).
  passthru.pyprojectFile = src + "/pyproject.toml";
  meta = {
    description = "Offline verifier and gate runner for vLLM's split top-p Triton kernel evidence";
    # the project's own domain, the one its receipts' predicate type and schema $id name
    # (harness/core/receipt.py); the only URL the flake writes (tests/unit/test_flake.py)
    homepage = "https://topp-gate.dev";
    license = lib.licenses.asl20;
    mainProgram = "topp-gate";
  };
}
