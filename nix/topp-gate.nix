# The topp-gate Python package (module `harness`, console script `topp-gate`) with the
# verifier's dependencies only; the kernel side's come from the environments in
# nix/envs.nix. Called from the python package set (nix/overlays.nix), so it works with
# any nixpkgs' python3Packages. Tests run as flake checks, not here.
{
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
  # The files the wheel is built from, as a lib.fileset source (issue 38, item 2): paths
  # relative to this file, so they name the flake's own copy wherever Nix keeps it (under
  # `nix --store DIR` too, where the earlier filter, which cut `toString src` off each path,
  # matched nothing and the source was empty). tests/unit/test_flake_fileset_source.py
  # evaluates it on a fresh --store and lists what it holds.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../pyproject.toml
      ../README.md
      ../harness
    ];
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
  # The pyproject.toml the wheel's METADATA comes from (`src` holds this same file).
  # nix/stub reads this one for its pythonRuntimeDepsCheckHook: Nix 2.8's
  # `flake check --no-build` evaluates in read-only mode and does not write the `src` copy
  # to the store, so `${src}/pyproject.toml` cannot be read there on a fresh store.
  passthru.pyprojectFile = ../pyproject.toml;
  meta = {
    description = "Offline verifier and gate runner for vLLM's split top-p Triton kernel evidence";
    # the project's own domain, the one its receipts' predicate type and schema $id name
    # (harness/core/receipt.py); the only URL the flake writes (tests/unit/test_flake.py)
    homepage = "https://topp-gate.dev";
    license = lib.licenses.asl20;
    mainProgram = "topp-gate";
  };
}
