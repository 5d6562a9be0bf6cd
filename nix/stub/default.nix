# A minimal, evaluation-only stand-in for nixpkgs, so that topp-gate's flake outputs can
# be evaluated offline by an old Nix (Debian's 2.8) that cannot evaluate current nixpkgs.
#
# Every attribute below fakes one thing the flake uses and names the nixpkgs file it
# stands for (paths as in NixOS/nixpkgs; docs/nix.md says which commits were read, and
# which facts could not be read at the pinned revision 0182a36 itself). Fakes return real
# derivations (so `nix flake check --no-build` accepts them and store paths are real)
# whose builder always fails: nothing here can be built.
#
# Faithful where the flake depends on it:
# - `import nixpkgs { system; config; overlays; }` applies the overlays in order over a
#   fixed point (pkgs/top-level/stage.nix), and python3Packages takes
#   `pythonPackagesExtensions` (pkgs/top-level/python-packages.nix via
#   pkgs/development/interpreters/python/passthrufun.nix);
# - python3 is CPython 3.13 (pkgs/top-level/all-packages.nix: python3 = python313);
# - torch-bin and triton-bin are unfree (meta.license unfreeRedistributable) and read
#   neither config.cudaSupport nor config.cudaCapabilities; the source-built torch and
#   triton do read config.cudaSupport (and torch cudaCapabilities);
# - an unfree package without config.allowUnfree refuses to evaluate
#   (pkgs/stdenv/generic/check-meta.nix);
# - fetchPypi accepts the argument set nixpkgs' fetchPypi accepts and yields the same
#   fixed-output derivation name and hash mode as nixpkgs' fetchurl, so its store path is
#   the real one (tests compare it with `nix-store --add-fixed sha256 WHEEL`).
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
  }
  // config;

  isDarwin = builtins.match ".*-darwin" system != null;

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
          builtins.removeAttrs attrs [
            "passthru"
            "meta"
          ]
        )
      );
      unfree = attrs.meta.unfree or false;
      platforms = attrs.meta.platforms or null;
    in
    # pkgs/stdenv/generic/check-meta.nix: an unfree package needs allowUnfree
    if unfree && !evaluatedConfig.allowUnfree then
      throw "Package ‘${name}’ has an unfree license (‘unfreeRedistributable’), refusing to evaluate."
    # check-meta.nix too: a package whose meta.platforms leaves out the host system
    else if platforms != null && !builtins.elem system platforms then
      throw "Package ‘${name}’ is not available on the requested hostPlatform (${system})."
    else
      # mkDerivation lifts passthru attributes onto the result, and keeps meta
      drv
      // (attrs.passthru or { })
      // {
        stubAttrs = attrs;
        meta = attrs.meta or { };
      };

  pythonVersion = "3.13";
  pyPrefix = "python${pythonVersion}";

  # PEP 503 name normalization, as python-runtime-deps-check-hook.py's normalize_name:
  # runs of - _ . become one -, lower case.
  lower = builtins.replaceStrings upperCase lowerCase;
  upperCase = builtins.genList (i: builtins.substring i 1 "ABCDEFGHIJKLMNOPQRSTUVWXYZ") 26;
  lowerCase = builtins.genList (i: builtins.substring i 1 "abcdefghijklmnopqrstuvwxyz") 26;
  normalizeName =
    name:
    lower (
      builtins.concatStringsSep "-" (builtins.filter builtins.isString (builtins.split "[-_.]+" name))
    );

  # pkgs/development/interpreters/python/hooks/python-runtime-deps-check-hook.py (the
  # pythonRuntimeDepsCheckHook that mk-python-derivation.nix adds to every pyproject build,
  # unless dontCheckRuntimeDeps): every Requires-Dist of the built wheel's METADATA must be
  # an installed distribution, else "  - <name> not installed" and the build fails. The
  # stub cannot build the wheel, so it reads what setuptools writes into Requires-Dist:
  # [project].dependencies of the source's pyproject.toml, minus pythonRemoveDeps. The real
  # hook evaluates markers; the stub ignores only `extra == ...` requirements (none of ours
  # has another marker) and treats any other one as required. Installed means: a pname among
  # dependencies and propagatedBuildInputs, or among theirs (the build's site-packages).
  requiredDists =
    attrs:
    let
      # nix/topp-gate.nix names the pyproject.toml its `src` copy holds (passthru), which
      # exists also where Nix 2.8's `flake check --no-build` has not written that copy
      file = attrs.passthru.pyprojectFile or "${attrs.src}/pyproject.toml";
      project = (builtins.fromTOML (builtins.readFile file)).project or { };
      requirement = r: {
        name = normalizeName (builtins.head (builtins.match "[[:space:]]*([A-Za-z0-9][A-Za-z0-9._-]*).*" r));
        extraOnly = builtins.match ".*;.*extra[[:space:]]*==.*" r != null;
      };
      removed = map normalizeName (attrs.pythonRemoveDeps or [ ]);
    in
    map (r: r.name) (
      builtins.filter (r: !r.extraOnly && !builtins.elem r.name removed) (
        map requirement (project.dependencies or [ ])
      )
    );
  installedDists =
    pkgs:
    builtins.concatMap (
      p:
      let
        inner = p.stubAttrs or { };
      in
      [ (normalizeName (inner.pname or p.name)) ]
      ++ installedDists ((inner.dependencies or [ ]) ++ (inner.propagatedBuildInputs or [ ]))
    ) (builtins.filter builtins.isAttrs pkgs);
  runtimeDepsCheck =
    attrs:
    let
      checked =
        (attrs.pyproject or false || (attrs.format or "") == "pyproject")
        && !(attrs.dontCheckRuntimeDeps or false)
        && attrs ? src;
      installed = installedDists ((attrs.dependencies or [ ]) ++ (attrs.propagatedBuildInputs or [ ]));
      missing = builtins.filter (n: !builtins.elem n installed) (requiredDists attrs);
    in
    if checked && missing != [ ] then
      throw (
        "topp-gate nix stub: pythonRuntimeDepsCheckHook fails the build of ${attrs.pname}: "
        + builtins.concatStringsSep ", " (map (n: "${n} not installed") missing)
      )
    else
      true;

  # pkgs/development/interpreters/python/mk-python-derivation.nix (buildPythonPackage):
  # the name is python3.13-<pname>-<version>; overridePythonAttrs rebuilds with new args.
  buildPythonPackage =
    attrs:
    assert runtimeDepsCheck attrs;
    fake "${pyPrefix}-${attrs.pname}-${attrs.version}" attrs
    // {
      overridePythonAttrs =
        f: buildPythonPackage (attrs // (if builtins.isFunction f then f attrs else f));
    };
  pyPkg = name: buildPythonPackage {
    pname = name;
    version = "stub";
  };

  # The python package set before and after pythonPackagesExtensions.
  pythonPackagesFor =
    pkgs: python: extensions:
    let
      base = pyself: {
        inherit buildPythonPackage python;
        # pkgs/development/interpreters/python/python-packages-base.nix: the package set's
        # callPackage (pkgs.newScope), which also finds top-level attributes such as lib
        callPackage =
          fn: args:
          let
            f = if builtins.isFunction fn then fn else import fn;
          in
          f (builtins.intersectAttrs (builtins.functionArgs f) (pkgs // pyself) // args);
        toPythonApplication = drv: drv;
        # pkgs/development/interpreters/python/editable.nix: root must be a string
        mkPythonEditablePackage =
          {
            pname,
            version,
            root,
            dependencies ? [ ],
            scripts ? { },
            ...
          }:
          assert builtins.isString root;
          buildPythonPackage {
            inherit pname version root;
            scripts = scripts;
            dependencies = map (d: d.pname) dependencies;
          };

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

        # pkgs/development/python-modules/torch/bin/default.nix: PyTorch's CUDA wheel on
        # x86_64-linux, its CUDA libraries from cudaPackages whatever config.cudaSupport
        # says; license includes unfreeRedistributable.
        # buildInputs there include cudaPackages.nccl (with cuda_cudart, cudnn, libcublas,
        # ...: not faked), read at 02e4aeed: so cudaCapabilities reaches torch-bin's closure
        torch-bin = buildPythonPackage {
          pname = "torch";
          version = "bin-stub";
          meta.unfree = true;
          buildInputs = [ pkgs.cudaPackages.nccl ];
        };
        # pkgs/development/python-modules/triton/bin.nix: the upstream wheel, ptxas from
        # cudaPackages.cuda_nvcc; unfreeRedistributable.
        triton-bin = buildPythonPackage {
          pname = "triton";
          version = "bin-stub";
          meta.unfree = true;
          postFixup = "";
        };
        # pkgs/development/python-modules/torch/source/default.nix: cudaSupport ?
        # config.cudaSupport, gpuTargets from config.cudaCapabilities.
        torch = buildPythonPackage {
          pname = "torch";
          version = "source-stub";
          inherit (evaluatedConfig) cudaSupport cudaCapabilities;
        };
        # pkgs/development/python-modules/triton/default.nix: cudaSupport ? config.cudaSupport.
        triton = buildPythonPackage {
          pname = "triton";
          version = "source-stub";
          inherit (evaluatedConfig) cudaSupport;
        };
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
            "hatchling"
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
            "pytest-xdist"
            "xmlschema"
            "pyyaml"
            "hypothesis"
            "mpmath"
            "securesystemslib"
            "mypy"
          ]
      );
      extend = acc: ext: pyself: acc pyself // ext pyself (acc pyself);
      fix = f: let x = f x; in x;
    in
    fix (builtins.foldl' extend base extensions);

  # pkgs/top-level/stage.nix: overlays applied in order over the fixed point.
  basePkgs = self: {
    # pkgs/top-level/stage.nix exposes the evaluated config as pkgs.config
    config = evaluatedConfig;
    # lib/licenses.nix (pkgs.lib is nixpkgs' lib): the licence the flake's package names
    lib.licenses.asl20 = {
      shortName = "asl20";
      spdxId = "Apache-2.0";
      fullName = "Apache License 2.0";
      free = true;
      redistributable = true;
    };
    # lib/fileset/default.nix (lib.fileset, nixpkgs 23.11 and later), the two functions
    # nix/topp-gate.nix uses. As there (lib/fileset/internal.nix): members are paths (a
    # string, such as a flake's outPath, is refused) that must exist; toSource's root is a
    # path and every member lies under it; the result is `builtins.path` named "source"
    # whose filter keeps a path when it is a member, lies under one, or is a folder above
    # one, comparing the filter's path string with `toString root` cut off its front (the
    # internal _toSourceFilter's baseString), so the stub is as exposed to a root that is
    # not where Nix reads the files as the real one is.
    lib.fileset =
      let
        coerce =
          m:
          if (m._type or "") == "fileset" then
            m.paths
          else if !builtins.isPath m then
            throw "lib.fileset: ${builtins.typeOf m} is not a file set or a path (a string-like value is not supported by lib.fileset)"
          else if !builtins.pathExists m then
            throw "lib.fileset: ${toString m} is a path that does not exist"
          else
            [ m ];
        hasPrefix = pre: s: builtins.substring 0 (builtins.stringLength pre) s == pre;
      in
      {
        unions = members: {
          _type = "fileset";
          paths = builtins.concatMap coerce members;
        };
        toSource =
          { root, fileset }:
          let
            rootString = toString root;
            cut = s: builtins.substring (builtins.stringLength rootString + 1) (-1) s;
            members = map (
              p:
              let
                s = toString p;
              in
              if hasPrefix "${rootString}/" s then
                cut s
              else
                throw "lib.fileset.toSource: fileset contains ${s}, not under root ${rootString}"
            ) (coerce fileset);
          in
          if !builtins.isPath root then
            throw "lib.fileset.toSource: root is a ${builtins.typeOf root}, it should be a path"
          else
            builtins.path {
              name = "source";
              path = root;
              filter =
                path: _type:
                let
                  rel = if hasPrefix "${rootString}/" path then cut path else null;
                in
                rel != null
                && builtins.any (m: rel == m || hasPrefix "${m}/" rel || hasPrefix "${rel}/" m) members;
            };
      };
    # pkgs/development/cuda-modules/packages/nccl.nix: NCCL built from source by nvcc with
    # makeFlags NVCC_GENCODE=${flags.gencodeString}, the gencode of config.cudaCapabilities
    # (pkgs/development/cuda-modules/_cuda/.../flags: -gencode=arch=compute_XY,code=sm_XY per
    # capability and the PTX of the last one)
    cudaPackages.nccl =
      let
        caps = map (c: builtins.replaceStrings [ "." ] [ "" ] c) evaluatedConfig.cudaCapabilities;
        last = builtins.elemAt caps (builtins.length caps - 1);
        gencodeString = builtins.concatStringsSep " " (
          map (c: "-gencode=arch=compute_${c},code=sm_${c}") caps
          ++ (if caps == [ ] then [ ] else [ "-gencode=arch=compute_${last},code=compute_${last}" ])
        );
      in
      fake "nccl-stub" { makeFlags = [ "NVCC_GENCODE=${gencodeString}" ]; };
    # pkgs/top-level/all-packages.nix
    pythonPackagesExtensions = [ ];
    python3 = python3For self;
    python3Packages = self.python3.pkgs;

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
        meta.mainProgram = name;
      };
    writeText = name: text: fake name { inherit text; };
    # pkgs/build-support/mkshell/default.nix
    mkShell =
      {
        packages ? [ ],
        shellHook ? "",
        ...
      }:
      fake "nix-shell" { inherit shellHook packages; };
    # pkgs/stdenv/linux/default.nix, pkgs/stdenv/darwin/default.nix: stdenv.cc is the
    # wrapped C compiler
    stdenv = {
      hostPlatform = {
        inherit system isDarwin;
        isLinux = !isDarwin;
        isx86_64 = builtins.match "x86_64-.*" system != null;
      };
      cc = fake "gcc-wrapper-stub" { };
    };
    # pkgs/by-name/un/unzip, co/coreutils, gn/gnugrep, gn/gnused, fi/findutils
    unzip = fake "unzip-stub" { };
    coreutils = fake "coreutils-stub" { };
    gnused = fake "gnused-stub" { };
    gnugrep = fake "gnugrep-stub" { };
    findutils = fake "findutils-stub" { };
    # pkgs/applications/version-management/git/default.nix
    git = fake "git-stub" { meta.mainProgram = "git"; };
    # pkgs/by-name/bu/bubblewrap/package.nix: `bwrap`, the sandbox kernel children run in
    # (harness/kernels/sandbox.py); meta.platforms = platforms.linux there, so
    # naming it on darwin fails evaluation (the stub's systems: the flake's two Linux ones)
    bubblewrap = fake "bubblewrap-stub" {
      meta.mainProgram = "bwrap";
      meta.platforms = [
        "aarch64-linux"
        "x86_64-linux"
      ];
    };
    # pkgs/by-name/ru/ruff/package.nix
    ruff = fake "ruff-stub" { meta.mainProgram = "ruff"; };
    # pkgs/by-name/ni/nixfmt/package.nix (the RFC 166 formatter, `nix fmt`)
    nixfmt = fake "nixfmt-stub" { meta.mainProgram = "nixfmt"; };
    # pkgs/by-name/ni/nixfmt-tree/package.nix: treefmt.withConfig running nixfmt on *.nix
    # (meta.mainProgram treefmt), what nixpkgs recommends for a flake's `formatter`
    nixfmt-tree = fake "nixfmt-tree" {
      runtimeInputs = [ "nixfmt-stub" ];
      meta.mainProgram = "treefmt";
    };
  };

  # pkgs/development/interpreters/python/default.nix (python3 = python313)
  python3For =
    self:
    let
      interpreterDrv = fake "python3-${pythonVersion}-stub" { };
      python = interpreterDrv // {
        inherit pythonVersion;
        pkgs = pythonPackagesFor self python self.pythonPackagesExtensions;
        sitePackages = "lib/python${pythonVersion}/site-packages";
        interpreter = "${interpreterDrv}/bin/python${pythonVersion}";
        # pkgs/development/interpreters/python/with-packages.nix (-> wrapper.nix, buildEnv)
        withPackages =
          f:
          let
            chosen = f python.pkgs;
          in
          fake "python3-${pythonVersion}-env" { paths = map (p: p.name) chosen; } // { packages = chosen; };
      };
    in
    python;

  applyOverlays = acc: overlay: self: acc self // overlay self (acc self);
  fix = f: let x = f x; in x;
in
fix (builtins.foldl' applyOverlays basePkgs overlays)
