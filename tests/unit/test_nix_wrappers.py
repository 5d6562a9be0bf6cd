"""The `nix run .#gate` and `nix run .#verify` wrappers, run outside Nix.

nix/apps.nix builds each wrapper with writeShellApplication from nix/gate.sh (after
nix/libcuda.sh) and nix/verify.sh, replacing @manifests@, @vllmSources@ and @cc@ by store
paths. Here the same text is generated with this test environment's paths instead (a
copy of the frozen manifests standing for the flake's store copy, the pinned vLLM trees
from the cache, this Python's `topp-gate`), and run from an empty temporary directory
with no arguments, as a user's first `nix run .#gate` would be. With Nix installed, a test
also proves that the flake (evaluated against nix/stub) writes exactly this text, and
that the store copy of the manifests is byte-identical to evidence/manifests/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.assets.flake_self import cached_self_expr

ROOT = Path(__file__).resolve().parents[2]
NIX = ROOT / "nix"
MANIFESTS = ROOT / "evidence" / "manifests"
FROZEN = sorted(p.name for p in MANIFESTS.iterdir() if re.search(r"\.json(\.sha256)?$", p.name))
NIX_ENV = {**os.environ, "NIX_CONFIG": "experimental-features = nix-command flakes"}


def stub_flake() -> str:
    """`let flake = ...; out = <the flake's outputs on nix/stub>; in `; `self` is what
    tests/assets/flake_self.py makes."""
    return (
        "let flake = import ./flake.nix; "
        f"out = flake.outputs {{ self = {cached_self_expr(ROOT)}; nixpkgs = ./nix/stub; }}; in "
    )


def render(template: str, values: dict[str, str]) -> str:
    """What nix/apps.nix's `render` does: every @name@ replaced by its value."""
    text = (NIX / template).read_text()
    for name, value in values.items():
        text = text.replace(f"@{name}@", value)
    leftover = re.findall(r"@[A-Za-z]+@", text)
    assert not leftover, f"{template}: no value for {leftover}"
    return text


def gate_text(values: dict[str, str]) -> str:
    return (NIX / "libcuda.sh").read_text() + "\n" + render("gate.sh", values)


def verify_text(values: dict[str, str]) -> str:
    return render("verify.sh", values)


def write_application(path: Path, text: str, runtime_path: list[Path]) -> Path:
    """The script nixpkgs' writeShellApplication writes (its preamble, then the text)."""
    bash = shutil.which("bash")
    assert bash
    dirs = ":".join(str(d) for d in runtime_path)
    path.write_text(
        f"#!{bash}\nset -o errexit\nset -o nounset\nset -o pipefail\n\n"
        f'export PATH="{dirs}:$PATH"\n\n{text}'
    )
    path.chmod(0o755)
    return path


def store_copy_of_manifests(dest: Path) -> Path:
    """What nix/manifests.nix puts in the store: the frozen manifests and their hashes."""
    dest.mkdir(parents=True)
    for name in FROZEN:
        shutil.copyfile(MANIFESTS / name, dest / name)
        (dest / name).chmod(0o444)
    return dest


@pytest.fixture
def user(tmp_path: Path) -> dict[str, Path]:
    """A user's machine without GPU: an empty HOME and XDG config, an empty working dir."""
    places = {name: tmp_path / name for name in ("home", "config", "cwd", "store", "bin")}
    for name in ("home", "cwd", "bin"):
        places[name].mkdir()
    store_copy_of_manifests(places["store"] / "manifests")
    return places


def wrapper_env(user: dict[str, Path], **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(user["home"]),
        "XDG_CONFIG_HOME": str(user["config"]),
        # this checkout's harness, whatever the environment has installed
        "PYTHONPATH": str(ROOT),
        # no driver anywhere: the libcuda finder looks only where we say
        "TOPP_GATE_LIBCUDA_SYSTEM_DIRS": str(user["home"] / "no-driver"),
        "TOPP_GATE_LDCONFIG": str(user["home"] / "no-ldconfig"),
        "TOPP_GATE_CACHE": str(user["home"] / "cache"),
        "CUDA_VISIBLE_DEVICES": "",
        **extra,
    }


def tool_dir() -> Path:
    """The folder holding this environment's `topp-gate` and `python3` (the runtimeInputs)."""
    here = Path(sys.executable).parent
    if not (here / "topp-gate").exists():
        pytest.skip("topp-gate is not installed beside this Python (pip install -e .)")
    return here


def make_wrappers(user: dict[str, Path], sources: Path) -> tuple[Path, Path]:
    values = {
        "manifests": str(user["store"] / "manifests"),
        "vllmSources": str(sources),
        "cc": shutil.which("cc") or "cc",
    }
    runtime = [tool_dir()]
    gate = write_application(user["bin"] / "topp-gate-run", gate_text(values), runtime)
    verify = write_application(user["bin"] / "topp-gate-verify", verify_text(values), runtime)
    return gate, verify


def run(argv: list[str], user: dict[str, Path], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=user["cwd"], env=wrapper_env(user, **extra), capture_output=True, text=True
    )


# --- fast: no kernels ------------------------------------------------------------------------


def test_verify_without_arguments_says_how_and_where_the_frozen_manifests_are(
    user: dict[str, Path],
) -> None:
    _, verify = make_wrappers(user, user["home"] / "no-sources")
    done = run([str(verify)], user)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: nix run .#verify -- BUNDLE")
    for name in ("h200-forced-logit-gate.json", "smoke-interpreter.json"):
        assert f"{user['store'] / 'manifests' / name}" in done.stderr
        assert (user["store"] / "manifests" / name).is_file()


def test_verify_passes_the_exit_code_of_topp_gate_verify_through(user: dict[str, Path]) -> None:
    from harness.cli import main

    _, verify = make_wrappers(user, user["home"] / "no-sources")
    good = ROOT / "tests" / "assets" / "tamper" / "good"
    pub = ROOT / "tests" / "assets" / "keys" / "test-only-signing.pub"
    for argv in (
        [str(good), "--pubkey", str(pub), "--workers", "1"],
        [str(good), "--pubkey", str(ROOT / "tests" / "assets" / "keys" / "test-only-other.pub")],
        [str(user["cwd"] / "absent")],
    ):
        expected = main(["verify", *argv])
        done = run([str(verify), *argv], user)
        assert done.returncode == expected, done.stderr
    assert expected != 0


def test_gate_help_is_topp_gate_run_help(user: dict[str, Path]) -> None:
    gate, _ = make_wrappers(user, user["home"] / "no-sources")
    done = run([str(gate), "--help"], user)
    assert done.returncode == 0
    assert "--manifest" in done.stdout and "--backend" in done.stdout


def test_gate_on_cuda_without_a_driver_stops_before_making_anything(user: dict[str, Path]) -> None:
    gate, _ = make_wrappers(user, user["home"] / "no-sources")
    done = run([str(gate), "--backend", "cuda"], user)
    assert done.returncode == 2
    assert "cannot find the NVIDIA driver library libcuda.so.1" in done.stderr
    assert not user["config"].exists(), "no key is made for a run that cannot start"
    assert list(user["cwd"].iterdir()) == []


def test_gate_refuses_a_key_name_it_cannot_create(user: dict[str, Path]) -> None:
    gate, _ = make_wrappers(user, user["home"] / "no-sources")
    done = run([str(gate), "--backend", "interpreter"], user, TOPP_GATE_KEY=str(user["home"] / "k"))
    assert done.returncode == 2
    assert "must end in .key" in done.stderr
    assert "smoke manifest" in done.stderr  # --backend interpreter picked the smoke manifest


# --- slow: the first `nix run .#gate`, real kernels in Triton's interpreter --------------------


def pinned_trees() -> Path:
    """The pinned vLLM trees in the `--sources DIR` layout (the cache's trees/ folder)."""
    from harness.core.errors import HarnessError
    from harness.pins import sources

    pins = sources.load_pins()
    cache = sources.cache_root()
    try:
        for side in ("stock", "patched"):
            sources.resolve_tree(pins.side(side), cache=cache)
    except HarnessError as err:
        pytest.skip(f"pinned vLLM sources unavailable: {err}")
    return cache / "trees"


@pytest.mark.slow
@pytest.mark.sources
def test_first_gate_run_from_an_empty_directory_without_cuda(user: dict[str, Path]) -> None:
    from harness.cli import main

    gate, verify = make_wrappers(user, pinned_trees())
    done = run([str(gate)], user)
    log = done.stderr + done.stdout

    # the key: made on first use under the XDG config dir, private
    key = user["config"] / "topp-gate" / "signing.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600, log
    assert stat.S_IMODE((user["config"] / "topp-gate").stat().st_mode) == 0o700
    assert stat.S_IMODE(user["config"].stat().st_mode) == 0o700
    assert f"creating {key} (mode 0600)" in done.stderr

    # without CUDA: the smoke manifest in the interpreter, said so
    assert "no usable CUDA GPU" in done.stderr and "SMOKE manifest" in done.stderr

    # a fresh folder under the working directory, announced
    bundles = list((user["cwd"] / "topp-gate-runs").iterdir())
    assert len(bundles) == 1 and bundles[0].name.startswith("smoke-interpreter-")
    bundle = bundles[0]
    assert f"the bundle goes to {bundle}" in done.stderr

    # the frozen manifest is the wrapper's own copy, not a path relative to a checkout
    frozen = user["store"] / "manifests" / "smoke-interpreter.json"
    assert f"verifying topp-gate-runs/{bundle.name} against the frozen manifest {frozen}" in (
        done.stderr
    )
    assert (bundle / "manifest.json").read_bytes() == frozen.read_bytes()
    receipt = json.loads((bundle / "receipt.json").read_bytes())
    assert receipt["predicate"]["environment"]["backend"] == "interpreter"

    # verified, and the exit code is the verdict's
    assert "verified bundle" in done.stdout, log
    verdict = receipt["predicate"]["verdict"]["verdict"]
    assert done.returncode == {"PASS": 0, "STOP": 1}[verdict], log

    # `nix run .#verify -- BUNDLE ...` on it: topp-gate verify's exit code, unchanged
    argv = [str(bundle), "--pubkey", str(key.with_suffix(".pub")), "--frozen-manifest", str(frozen)]
    again = run([str(verify), *argv], user)
    assert again.returncode == main(["verify", *argv]), again.stderr
    assert again.returncode in (0, 1)


# --- the flake writes the same text (Nix against the stub) -----------------------------------


def _nix_eval(expr: str, *flags: str) -> object:
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", *flags, "-E", expr],
        cwd=ROOT,
        env=NIX_ENV,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


needs_nix = pytest.mark.skipif(
    shutil.which("nix-instantiate") is None,
    reason="nix is not installed (CI installs it: apt-get install -y nix-bin)",
)


@needs_nix
def test_the_flake_writes_exactly_these_wrappers() -> None:
    paths = _nix_eval(
        stub_flake() + "{ manifests = import ./nix/manifests.nix { src = ./.; }; "
        "vllmSources = out.packages.x86_64-linux.vllm-sources.outPath; "
        'cc = "${(import ./nix/stub { system = "x86_64-linux"; }).stdenv.cc}/bin/cc"; }'
    )
    assert isinstance(paths, dict)
    values = {k: str(v) for k, v in paths.items()}
    texts = _nix_eval(
        stub_flake() + "builtins.mapAttrs (_: p: p.stubAttrs.text) "
        "{ inherit (out.packages.x86_64-linux) gate verify; }"
    )
    assert isinstance(texts, dict)
    assert texts["gate"] == gate_text(values)
    assert texts["verify"] == verify_text(values)
    for system in ("aarch64-linux", "x86_64-darwin", "aarch64-darwin"):
        assert _nix_eval(stub_flake() + f"out.packages.{system}.verify.stubAttrs.text") == (
            verify_text(values)
        )


@needs_nix
@pytest.mark.skipif(
    not os.access("/nix/store", os.W_OK), reason="the Nix store is not writable here"
)
def test_the_store_copy_of_the_frozen_manifests_is_byte_identical() -> None:
    # --read-write-mode: really copy the folder into the store, as evaluating the flake does
    store = _nix_eval("import ./nix/manifests.nix { src = ./.; }", "--read-write-mode")
    assert isinstance(store, str) and store.startswith("/nix/store/")
    copy = Path(store)
    assert sorted(p.name for p in copy.iterdir()) == FROZEN
    assert {"h200-forced-logit-gate.json", "smoke-interpreter.json"} <= set(FROZEN)
    for name in FROZEN:
        assert (copy / name).read_bytes() == (MANIFESTS / name).read_bytes(), name


def gate_interpreter_text(values: dict[str, str]) -> str:
    return (NIX / "gate-interpreter.sh").read_text() + "\n" + render("gate.sh", values)


def test_gate_interpreter_refuses_a_backend_and_looks_for_no_driver(
    user: dict[str, Path], tmp_path: Path
) -> None:
    values = {"manifests": str(user["store"] / "manifests"), "vllmSources": str(tmp_path),
              "cc": shutil.which("cc") or "cc"}
    script = write_application(user["bin"] / "topp-gate-run-interpreter",
                               gate_interpreter_text(values), [tool_dir()])
    done = run([str(script), "--backend", "cuda"], user)
    assert done.returncode == 2
    assert "runs only in Triton's interpreter" in done.stderr
    assert not (user["cwd"] / "topp-gate-runs").exists()
    # `--help` is topp-gate run's, as for .#gate
    helped = run([str(script), "--help"], user)
    assert helped.returncode == 0 and "--backend" in helped.stdout


@needs_nix
def test_the_flake_writes_the_interpreter_wrapper_from_its_own_prefix() -> None:
    paths = _nix_eval(
        stub_flake() + "{ manifests = import ./nix/manifests.nix { src = ./.; }; "
        "vllmSources = out.packages.x86_64-linux.vllm-sources.outPath; "
        'cc = "${(import ./nix/stub { system = "x86_64-linux"; }).stdenv.cc}/bin/cc"; }'
    )
    assert isinstance(paths, dict)
    values = {k: str(v) for k, v in paths.items()}
    text = _nix_eval(stub_flake() + "out.packages.x86_64-linux.gate-interpreter.stubAttrs.text")
    assert text == gate_interpreter_text(values)


FLASHINFER_MANIFESTS = sorted(
    p for p in (MANIFESTS / "impls").glob("*.json") if "flashinfer" in p.name
)


@pytest.mark.parametrize("wrapper", ["gate", "gate-interpreter"])
def test_gate_refuses_a_flashinfer_manifest_in_one_line(
    user: dict[str, Path], tmp_path: Path, wrapper: str
) -> None:
    """The flake builds no FlashInfer wheel and no nvcc (docs/nix.md): its gate refuses a
    manifest of that family before it makes a key or a folder, with one line, exit 2."""
    assert FLASHINFER_MANIFESTS, "the committed FlashInfer manifests moved"
    values = {"manifests": str(user["store"] / "manifests"), "vllmSources": str(tmp_path),
              "cc": shutil.which("cc") or "cc"}
    text = gate_text(values) if wrapper == "gate" else gate_interpreter_text(values)
    script = write_application(user["bin"] / wrapper, text, [tool_dir()])
    for manifest in FLASHINFER_MANIFESTS[:2]:
        for argv in (
            ["--manifest", str(manifest)],
            [f"--manifest={manifest}", "--backend", "cuda"],
        ):
            if wrapper == "gate-interpreter" and "--backend" in argv:
                continue
            done = run([str(script), *argv], user)
            assert done.returncode == 2, done.stderr
            assert done.stderr.count("\n") == 1, done.stderr
            assert "runs only the vLLM kernel families" in done.stderr
            assert "flashinfer" in done.stderr and "docs/nix.md" in done.stderr
    assert not user["config"].exists(), "no key is made for a refused manifest"
    assert list(user["cwd"].iterdir()) == []


def test_gate_escapes_a_family_name_it_refuses(user: dict[str, Path], tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(
        {"sources": {"sides": {"stock": {"family": "evil\x1b[2J"}, "patched": {}}}}))
    values = {"manifests": str(user["store"] / "manifests"), "vllmSources": str(tmp_path),
              "cc": shutil.which("cc") or "cc"}
    script = write_application(user["bin"] / "gate", gate_text(values), [tool_dir()])
    done = run([str(script), "--manifest", str(manifest)], user)
    assert done.returncode == 2
    assert "\x1b" not in done.stderr and "evil??2J" in done.stderr


@pytest.mark.parametrize("wrapper", ["gate", "gate-interpreter"])
def test_an_abbreviated_option_cannot_pass_the_gate_by(
    user: dict[str, Path], tmp_path: Path, wrapper: str
) -> None:
    """argparse takes --man X for --manifest X (issue 38): the wrapper, which reads
    --manifest itself to refuse FlashInfer, refuses every abbreviation of an option it reads,
    before it makes a key or a folder, in one line, exit 2."""
    assert FLASHINFER_MANIFESTS, "the committed FlashInfer manifests moved"
    manifest = str(FLASHINFER_MANIFESTS[0])
    values = {"manifests": str(user["store"] / "manifests"), "vllmSources": str(tmp_path),
              "cc": shutil.which("cc") or "cc"}
    text = gate_text(values) if wrapper == "gate" else gate_interpreter_text(values)
    script = write_application(user["bin"] / wrapper, text, [tool_dir()])
    for argv in (["--man", manifest], [f"--manif={manifest}"], ["--m", manifest],
                 ["--k", str(tmp_path / "x.key"), "--manifest", manifest],
                 ["--ou", str(tmp_path / "out")], ["--source", str(tmp_path)], ["--he"]):
        done = run([str(script), *argv], user)
        assert done.returncode == 2, (argv, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr
        assert "give options as full names" in done.stderr, done.stderr
    # full names are read as before: the FlashInfer manifest is refused for what it is
    done = run([str(script), "--manifest", manifest], user)
    assert done.returncode == 2 and "runs only the vLLM kernel families" in done.stderr
    assert not user["config"].exists(), "no key is made for a refused invocation"
    assert list(user["cwd"].iterdir()) == []
