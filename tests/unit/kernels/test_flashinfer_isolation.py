"""FlashInfer runs only what was built from its pinned sources (issue 27), on a CPU: the
child's environment and import path cannot supply ``flashinfer_jit_cache``,
``flashinfer_cubin`` or ``FLASHINFER_*``; a library load outside the stable copy's build
folder is refused; the stable copy lives in a private per-user folder. The real FlashInfer
cannot run here: the children below run the real runner and child on a tree that pins a
stand-in ``flashinfer/sampling.py``, and fail at (or right after) the isolation checks."""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from pathlib import Path

import pytest

from harness.core.digest import sha256_hex
from harness.core.errors import KernelChildError, SourcesError
from harness.families import flashinfer
from harness.kernels.child import check_isolation
from harness.kernels.private_tree import make_private_tree, private_tree, stable_parent
from harness.kernels.runner import run_side, scrubbed_env
from harness.pins.sources import Side

# the stand-in kernel: says which FLASHINFER_* variables the child kept, then stops
SEEN = (b"import os\nraise SystemExit('seen: ' + ','.join(sorted(\n"
        b"    k + '=' + v for k, v in os.environ.items() if k.startswith('FLASHINFER_'))))\n")


def _side(tmp_path: Path) -> tuple[Side, Path]:
    src = tmp_path / "src"
    (src / "flashinfer").mkdir(parents=True)
    (src / "flashinfer" / "sampling.py").write_bytes(SEEN)
    files = {"flashinfer/sampling.py": sha256_hex(SEEN)}
    side = Side(name="stock", version="0.7.2.post1", wheel="w.whl", wheel_sha256="0" * 64,
                kernel_path="flashinfer/sampling.py", kernel_sha256=files[
                    "flashinfer/sampling.py"], files=files, family="flashinfer")
    return side, src


def _cases(tmp_path: Path) -> Path:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"schema": "topp-gate/cases/v1", "cases": []}))
    return path


def _plant(folder: Path, name: str, marker: Path) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n__version__ = '0.7.2.post1'\n")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOPP_GATE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("planted", ["flashinfer_jit_cache", "flashinfer_cubin"])
def test_a_planted_package_on_the_childs_path_stops_the_child_before_its_code_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path, planted: str):
    side, src = _side(tmp_path)
    marker = tmp_path / "planted-code-ran"
    _plant(tmp_path / "site", planted, marker)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("FLASHINFER_DISABLE_VERSION_CHECK", "1")
    result = run_side(side, src, "cuda", 2, _cases(tmp_path), tmp_path / "out", timeout_s=120)
    assert result.status == "kernel_crash"
    assert f"{planted} is importable" in result.reason and "refused" in result.reason
    assert "Traceback" not in result.stderr_tail
    assert not marker.exists(), "the planted package's code ran"
    assert result.evidence is not None and result.evidence["status"] == "failed"
    # the names removed, never their values
    assert result.evidence["env_removed"] == ["FLASHINFER_DISABLE_VERSION_CHECK",
                                              "FLASHINFER_WORKSPACE_BASE"]
    assert str(tmp_path / "elsewhere") not in json.dumps(result.evidence)


def test_the_child_sees_no_flashinfer_variable_but_its_own_build_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path):
    side, src = _side(tmp_path)
    monkeypatch.setenv("FLASHINFER_CUBIN_DIR", str(tmp_path / "cubins"))
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "elsewhere"))
    result = run_side(side, src, "cuda", 2, _cases(tmp_path), tmp_path / "out", timeout_s=120)
    assert result.status == "kernel_crash"
    build = stable_parent() / f"{make_name(side)}.build"
    assert result.reason.endswith(f"seen: FLASHINFER_WORKSPACE_BASE={build}"), result.reason


def make_name(side: Side) -> str:
    from harness.kernels.private_tree import stable_name

    return stable_name(side.files)


def test_the_runner_removes_only_the_familys_prefixes():
    env = {"FLASHINFER_A": "1", "FLASHINFER_": "2", "PATH": "/bin", "XFLASHINFER_B": "3"}
    kept, removed = scrubbed_env(env, ("FLASHINFER_",))
    assert removed == ["FLASHINFER_", "FLASHINFER_A"]
    assert kept == {"PATH": "/bin", "XFLASHINFER_B": "3"}
    assert scrubbed_env(env, ()) == (env, [])


def test_check_isolation_refuses_a_planted_package_and_a_leftover_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    marker = tmp_path / "ran"
    family = flashinfer.FAMILY
    assert check_isolation(family)["isolation"]["blocked_modules_absent"] == [
        "flashinfer_jit_cache", "flashinfer_cubin"]
    monkeypatch.setenv("FLASHINFER_JIT_VERBOSE", "1")
    with pytest.raises(KernelChildError, match="FLASHINFER_JIT_VERBOSE set"):
        check_isolation(family)
    monkeypatch.delenv("FLASHINFER_JIT_VERBOSE")
    _plant(tmp_path, "flashinfer_cubin", marker)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KernelChildError, match="flashinfer_cubin is importable"):
        check_isolation(family)
    assert not marker.exists() and "flashinfer_cubin" not in sys.modules
    # a family that declares nothing is not checked at all
    assert check_isolation(types.SimpleNamespace(id="other")) == {}


def _build(tmp_path: Path) -> Path:
    build = tmp_path / "copy.build"
    build.mkdir(mode=0o700)
    return build


def test_the_load_guard_refuses_a_library_outside_the_build_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    build = _build(tmp_path)
    monkeypatch.setattr(flashinfer, "_LOADED", {})
    monkeypatch.setattr(flashinfer, "_REFUSED", [])
    loaded: list[str] = []
    loader = types.SimpleNamespace(load_module=lambda path: loaded.append(path) or path)
    flashinfer._guard_loads(loader, build)
    inside = build / "cached_ops" / "sampling" / "sampling.so"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(b"built from the pinned sources")
    assert loader.load_module(str(inside)) == str(inside)
    record = flashinfer._LOADED[str(inside)]
    assert record["sha256"] == sha256_hex(b"built from the pinned sources")
    planted = tmp_path / "site" / "flashinfer_jit_cache" / "sampling" / "sampling.so"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"planted")
    link = build / "cached_ops" / "sampling" / "link.so"
    link.symlink_to(planted)
    for path in (planted, link):
        with pytest.raises(KernelChildError, match="refused to load"):
            loader.load_module(str(path))
    assert loaded == [str(inside)]  # the refused ones never reached the loader
    assert len(flashinfer._REFUSED) == 2
    with pytest.raises(KernelChildError, match="refused to load"):
        flashinfer.jit_library()  # a refusal anywhere (even one FlashInfer swallowed) stops it


def test_the_family_and_the_verifier_compute_one_sources_hash():
    from harness.core.verify_bindings import JIT_SOURCES_ALGORITHM, jit_sources_sha256

    assert JIT_SOURCES_ALGORITHM == flashinfer.SOURCES_ALGORITHM
    assert flashinfer.sources_sha256("2" * 64, "3" * 64) == jit_sources_sha256("2" * 64,
                                                                                "3" * 64)
    text = (f'{{"algorithm":"{JIT_SOURCES_ALGORITHM}","build_ninja_sha256":"{"3" * 64}",'
            f'"tree_sha256":"{"2" * 64}"}}')
    assert jit_sources_sha256("2" * 64, "3" * 64) == sha256_hex(text.encode())
    build, tree = Path("/b/x.build"), Path("/b/x/tree")
    assert flashinfer.normalized_ninja("-I/b/x/tree/include /b/x.build/s.o", build,
                                       tree) == "-I${TREE}/include ${BUILD}/s.o"


# --- the stable copy's folder -----------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_stable_copy_lives_in_a_private_per_user_folder(tmp_path: Path, cache: Path):
    side, src = _side(tmp_path)
    with private_tree("stock", side.files, src, stable=True) as copy:
        assert copy.root.parent == (cache / "stable-trees").resolve()
        assert _mode(cache / "stable-trees") == 0o700
        assert copy.build == copy.root.with_name(copy.root.name + ".build")
        assert _mode(copy.build) == 0o700
        (copy.build / "kept.txt").write_text("a build output")
    assert not copy.root.exists()
    assert (copy.build / "kept.txt").exists()  # the build folder outlives the copy
    assert not str(copy.root).startswith("/tmp/topp-gate-stable")


def test_xdg_cache_home_is_used_when_no_topp_gate_cache(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TOPP_GATE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert stable_parent() == (tmp_path / "xdg" / "topp-gate" / "stable-trees").resolve()


@pytest.mark.parametrize("how", ["group-readable", "link", "file", "other-owner"])
def test_a_stable_folder_that_is_not_private_is_refused(tmp_path: Path, cache: Path, how: str):
    side, src = _side(tmp_path)
    folder = cache / "stable-trees"
    cache.mkdir()
    if how == "group-readable":
        folder.mkdir(mode=0o700)
        folder.chmod(0o750)
    elif how == "link":
        (tmp_path / "target").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "target")
    elif how == "file":
        folder.write_text("")
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another user needs root")
        folder.mkdir(mode=0o700)
        os.chown(folder, 12345, 12345)
    with pytest.raises(SourcesError, match="stable copy folder") as err:
        make_private_tree("stock", side.files, src, stable=True)
    assert "\n" not in str(err.value)


def test_a_build_folder_of_another_mode_is_refused(tmp_path: Path, cache: Path):
    side, src = _side(tmp_path)
    with private_tree("stock", side.files, src, stable=True) as copy:
        build = copy.build
    assert build is not None
    build.chmod(0o755)
    with pytest.raises(SourcesError, match="stable build folder .* open to group or others"):
        make_private_tree("stock", side.files, src, stable=True)
