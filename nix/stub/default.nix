# A minimal, evaluation-only stand-in for nixpkgs, so that topp-gate's flake outputs can
# be evaluated offline by an old Nix (Debian's 2.8) that cannot evaluate current nixpkgs.
#
# Every attribute below fakes one thing the flake uses and names the nixpkgs file it
# stands for. Fakes return real derivations (so `nix flake check --no-build` accepts
# them and store paths are real) whose builder always fails: nothing here can be built.
#
# Only fetchPypi is faithful where it matters: its argument set is the one nixpkgs'
# fetchPypi accepts, and it yields the same fixed-output derivation name and hash mode
# as nixpkgs' fetchurl, so its store path is the real one (tests compare it with
# `nix-store --add-fixed sha256 WHEEL`).
{
  system ? builtins.currentSystem,
  # pkgs/top-level/impure.nix and pkgs/top-level/default.nix: the user's config
  config ? { },
  overlays ? [ ],
  ...
}:
let
  # pkgs/top-level/config.nix declares these options; the real default is false / [ ].
  evaluatedConfig = {
    allowUnfree = false;
    cudaSupport = false;
    cudaCapabilities = [ ];
  } // config;

  # Stand-in for stdenv.mkDerivation (pkgs/stdenv/generic/make-derivation.nix).
  fake =
    name: attrs:
    let
      drv = derivation (
        {
          inherit name system;
          builder = "/bin/sh";
          args = [
            "-c"
            "echo 'topp-gate nix stub: ${name} is evaluation-only and cannot be built' >&2; exit 1"
          ];
        }
        // builtins.mapAttrs (_: v: if builtins.isString v then v else builtins.toJSON v) (
          builtins.removeAttrs attrs [ "passthru" ]
        )
      );
    in
    # mkDerivation lifts passthru attributes onto the result
    drv // (attrs.passthru or { }) // { stubAttrs = attrs; };

  # Stand-in for python3Packages.<name> (pkgs/top-level/python-packages.nix).
  pyPkg = name: fake "python3.12-${name}-stub" { pname = name; };

  # pkgs/development/python-modules/torch/bin/default.nix (torch-bin): its CUDA
  # dependencies come from cudaPackages, which follow config.cudaSupport and
  # config.cudaCapabilities (pkgs/top-level/cuda-packages.nix).
  cudaRecord = {
    inherit (evaluatedConfig) cudaSupport cudaCapabilities;
  };

  pythonPackages = {
    # pkgs/development/interpreters/python/mk-python-derivation.nix
    buildPythonApplication = attrs: fake "${attrs.pname}-${attrs.version}" attrs;
    buildPythonPackage = attrs: fake "python3.12-${attrs.pname}-${attrs.version}" attrs;

    # pkgs/build-support/fetchpypi/default.nix: the same argument set (an unknown
    # argument is an error there too, in computeWheelUrl). The real one builds the URL
    # and calls fetchurl, whose derivation name is the URL's basename, i.e. the wheel
    # file name, with a flat sha256 output hash (pkgs/build-support/fetchurl/default.nix).
    fetchPypi =
      {
        pname,
        version,
        format ? "setuptools",
        dist ? "py2.py3",
        python ? "py2.py3",
        abi ? "none",
        platform ? "any",
        sha256 ? "",
        hash ? "",
      }@args:
      assert format == "wheel"; # the stub only fakes wheels
      assert sha256 != "" || hash != "";
      let
        fileName = "${pname}-${version}-${python}-${abi}-${platform}.whl";
      in
      derivation {
        name = fileName;
        inherit system;
        builder = "/bin/sh";
        args = [
          "-c"
          "echo 'topp-gate nix stub: fetching is not possible offline' >&2; exit 1"
        ];
        outputHashMode = "flat";
        outputHashAlgo = "sha256";
        outputHash = if sha256 != "" then sha256 else hash;
      }
      // {
        fetchPypiArgs = args;
      };

    torch-bin = fake "python3.12-torch-bin-stub" ({ pname = "torch"; } // cudaRecord);
    # pkgs/development/python-modules/triton/bin.nix (triton-bin)
    triton-bin = fake "python3.12-triton-bin-stub" { pname = "triton"; };
  }
  // builtins.listToAttrs (
    map
      (n: {
        name = n;
        value = pyPkg n;
      })
      [
        # each one: pkgs/development/python-modules/<name>/default.nix
        "setuptools"
        "jsonschema"
        "cryptography"
        "rfc8785"
        "numpy"
        "packaging"
        "psutil"
        "pyzmq"
        "urllib3"
        "regex"
        "rich"
        "matplotlib"
        "pytest"
        "hypothesis"
        "mpmath"
        "securesystemslib"
      ]
  );

  # pkgs/development/interpreters/python/default.nix (python3 = python312)
  python3 = fake "python3-3.12-stub" { } // {
    pythonVersion = "3.12";
    sitePackages = "lib/python3.12/site-packages";
    pkgs = pythonPackages;
    # pkgs/development/interpreters/python/with-packages.nix (-> wrapper.nix, buildEnv)
    withPackages =
      f:
      let
        chosen = f pythonPackages;
      in
      fake "python3-3.12-env" { paths = map (p: p.name) chosen; } // { packages = chosen; };
  };

  # pkgs/build-support/trivial-builders/default.nix
  runCommand =
    name: env: text:
    fake name (env // { buildCommand = text; });
  writeShellApplication =
    {
      name,
      text,
      runtimeInputs ? [ ],
      ...
    }:
    fake name {
      inherit text;
      runtimeInputs = map (p: "${p}") runtimeInputs;
    }
    // {
      meta.mainProgram = name;
    };
  writeText = name: text: fake name { inherit text; };
in
{
  inherit system python3 runCommand writeShellApplication writeText;
  # pkgs/top-level/stage.nix exposes the evaluated config as pkgs.config
  config = evaluatedConfig;
  python3Packages = pythonPackages;
  # pkgs/build-support/mkshell/default.nix
  mkShell =
    {
      packages ? [ ],
      shellHook ? "",
      ...
    }:
    fake "nix-shell" {
      inherit shellHook;
      packages = map (p: "${p}") packages;
    };
  # pkgs/stdenv/linux/default.nix: stdenv.cc is the wrapped C compiler
  stdenv = {
    hostPlatform = {
      inherit system;
      isLinux = true;
      isx86_64 = system == "x86_64-linux";
    };
    cc = fake "gcc-wrapper-stub" { };
  };
  # pkgs/tools/archivers/unzip/default.nix
  unzip = fake "unzip-stub" { };
  # pkgs/tools/misc/coreutils/default.nix, pkgs/tools/text/gnugrep/default.nix,
  # pkgs/tools/misc/findutils/default.nix
  coreutils = fake "coreutils-stub" { };
  # pkgs/tools/text/gnused/default.nix
  gnused = fake "gnused-stub" { };
  gnugrep = fake "gnugrep-stub" { };
  findutils = fake "findutils-stub" { };
  # lib/ (only what the flake uses)
  lib = {
    # lib/strings.nix
    makeBinPath = ps: builtins.concatStringsSep ":" (map (p: "${p}/bin") ps);
    concatStringsSep = builtins.concatStringsSep;
    concatMapStringsSep = sep: f: l: builtins.concatStringsSep sep (map f l);
    # lib/attrsets.nix
    mapAttrs' =
      f: set:
      builtins.listToAttrs (map (n: f n set.${n}) (builtins.attrNames set));
    nameValuePair = name: value: { inherit name value; };
  };
}
