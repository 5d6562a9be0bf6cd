"""A change whose own code attacks the gate (issue 35), through ``topp-gate pr`` as a
contributor runs it, in Triton's interpreter.

Each change appends module-level code to vLLM 0.33.0's kernel file and leaves the kernel's
logic alone, so every dispatch-path proof stays genuine: what runs at import is the attack.
Every attack records what it got at a path of the test's own (``loot``), outside anything a
sandboxed child sees: on the unsandboxed runner (``1feccb2``) each of these files appeared,
and the forging attack printed PASS for a change that masks every token. Now the loot never
appears and the verdict is never PASS.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from harness.cli import main
from harness.kernels import sandbox
from harness.pins.pinfile import load_pin_file
from harness.pins.sources import kernel_diff

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assets"))
from pr_small import BASE, _kernel, _pr  # noqa: E402

pytestmark = [pytest.mark.sources, pytest.mark.slow]

SECRET = "topp-gate-test-secret-7f3a"


def _sandbox_or_skip() -> None:
    try:
        sandbox.probe()
    except sandbox.SandboxError as err:
        pytest.skip(f"no sandbox here: {err}")


def _attack(tmp_path: Path, name: str, code: str) -> Path:
    """A diff on the base that appends ``code`` (dedented) to the kernel file."""
    kernel = _kernel()
    extra = "\n\n" + textwrap.dedent(code).strip() + "\n"
    path = tmp_path / f"{name}.diff"
    path.write_bytes(kernel_diff(kernel, kernel + extra.encode(),
                                 load_pin_file(BASE).data["kernel_path"]))
    return path


def _prelude(loot: Path) -> str:
    return f"""
    import json as _json, os as _os, sys as _sys, threading as _threading, time as _time
    _LOOT = {str(loot)!r}

    def _record(found):
        try:
            with open(_LOOT, "a") as handle:
                handle.write(_json.dumps(found) + "\\n")
        except OSError:
            pass

    def _request():
        with open(_sys.argv[-1]) as handle:
            return _json.load(handle)

    def _wait_ok(out):
        deadline = _time.time() + 120
        while _time.time() < deadline:
            try:
                with open(_os.path.join(out, "evidence.json")) as handle:
                    if _json.load(handle).get("status") == "ok":
                        return
            except (OSError, ValueError):
                pass
            _time.sleep(0.05)
    """


def _verdict(out: Path) -> str:
    receipt = json.loads((out / "bundle" / "receipt.json").read_bytes())
    return str(receipt["predicate"]["verdict"]["verdict"])


@pytest.fixture
def base_kept(tmp_path, signing_key, capsys):
    """The base side kept by an unchanged run, so each attack runs only its own child."""
    _sandbox_or_skip()
    kernel = _kernel()
    same = tmp_path / "same.diff"
    same.write_bytes(kernel_diff(kernel, kernel + b"\n# a comment\n",
                                 load_pin_file(BASE).data["kernel_path"]))
    assert _pr(tmp_path, signing_key, tmp_path / "first", "--patch", str(same)) == 0
    capsys.readouterr()
    return tmp_path


def _key_attack(tmp_path: Path, loot: Path, signing_key: Path) -> Path:
    return _attack(tmp_path, "key", _prelude(loot) + f"""
    _found = {{}}
    for _name in ("TOPP_GATE_SIGNING_KEY", "TOPP_GATE_KEY"):
        if _name in _os.environ:
            _found["env:" + _name] = _os.environ[_name]
    for _pid in _os.listdir("/proc"):
        if _pid.isdigit():
            try:
                with open(f"/proc/{{_pid}}/cmdline", "rb") as _h:
                    _line = _h.read().replace(b"\\0", b" ").decode()
            except OSError:
                continue
            if "--key" in _line:
                _found["proc:" + _pid] = _line
    try:
        with open({str(signing_key)!r}) as _h:
            _found["path"] = _h.read()
    except OSError:
        pass
    _record(_found)
    if _found:
        raise SystemExit("the attack reached the key")
    """)


def test_the_key_is_out_of_reach_by_environment_proc_and_path(base_kept, signing_key,
                                                             monkeypatch, capsys):
    tmp_path = base_kept
    loot = tmp_path / "loot-key"
    monkeypatch.setenv("TOPP_GATE_SIGNING_KEY", SECRET)
    monkeypatch.setenv("TOPP_GATE_KEY", str(signing_key))
    patch = _key_attack(tmp_path, loot, signing_key)
    code = _pr(tmp_path, signing_key, tmp_path / "attack", "--patch", str(patch))
    assert not loot.exists(), loot.read_text()
    assert code == 0 and _verdict(tmp_path / "attack") == "PASS"  # it found nothing


def test_writing_outside_the_output_folder_fails(base_kept, signing_key, capsys):
    tmp_path = base_kept
    loot = tmp_path / "loot-write"
    patch = _attack(tmp_path, "write", _prelude(loot) + """
    _out = _request()["out_dir"]
    _parent = _os.path.dirname(_out)
    for _target in (_os.path.join(_parent, "stock"), _os.path.join(_parent, ".stock.child"),
                    _os.path.join(_parent, ".."), _os.path.expanduser("~")):
        try:
            with open(_os.path.join(_target, "planted"), "w") as _h:
                _h.write("x")
        except OSError:
            continue
        _record({"wrote": _target})
    """)
    code = _pr(tmp_path, signing_key, tmp_path / "attack", "--patch", str(patch))
    assert not loot.exists(), loot.read_text()
    assert not list(tmp_path.glob("**/planted"))
    assert code == 0


def test_rewriting_outputs_and_evidence_after_ok_is_judged_as_the_changes_own(
        base_kept, signing_key, capsys):
    """The issue's forgery: wait until both sides' evidence says ok, then overwrite both
    sides' outputs with -inf and fix both evidence files' hashes. The base's folder is not
    in view, so the change's own -inf rows are judged against the true base: STOP."""
    tmp_path = base_kept
    loot = tmp_path / "loot-forge"
    patch = _forge_attack(tmp_path, loot)
    code = _pr(tmp_path, signing_key, tmp_path / "attack", "--patch", str(patch))
    out = capsys.readouterr().out
    assert not loot.exists(), loot.read_text()
    assert code == 1 and _verdict(tmp_path / "attack") == "STOP", out
    assert out.startswith("STOP")
    # the kept base is still the clean one: an unchanged change still PASSes against it
    kernel = _kernel()
    same = tmp_path / "same-again.diff"
    same.write_bytes(kernel_diff(kernel, kernel + b"\n# another comment\n",
                                 load_pin_file(BASE).data["kernel_path"]))
    assert _pr(tmp_path, signing_key, tmp_path / "after", "--patch", str(same)) == 0
    assert "base: reused" in capsys.readouterr().out


def test_unsandboxed_the_same_attacks_succeed(base_kept, signing_key, capsys):
    """The control: with --unsandboxed the key file is read and the base side's folder
    rewritten. What the sandbox removes is real, and --unsandboxed is for trusted code
    alone."""
    tmp_path = base_kept
    loot = tmp_path / "loot-key-unsandboxed"
    patch = _key_attack(tmp_path, loot, signing_key)
    assert _pr(tmp_path, signing_key, tmp_path / "key", "--patch", str(patch),
               "--unsandboxed") == 1
    assert "path" in json.loads(loot.read_text().splitlines()[0])
    loot = tmp_path / "loot-forge-unsandboxed"
    patch = _forge_attack(tmp_path, loot)
    _pr(tmp_path, signing_key, tmp_path / "forge", "--patch", str(patch), "--unsandboxed")
    assert "stock" in loot.read_text()
    receipt = json.loads((tmp_path / "forge" / "bundle" / "receipt.json").read_bytes())
    isolation = receipt["predicate"]["environment"]["isolation"]
    assert isolation["patched"]["sandbox"] == "none"


def _forge_attack(tmp_path: Path, loot: Path) -> Path:
    return _attack(tmp_path, "forge", _prelude(loot) + """
    import hashlib as _hashlib, struct as _struct

    def _forge():
        _out = _request()["out_dir"]
        _folders = [_out] + [_os.path.join(_os.path.dirname(_out), n)
                             for n in ("stock", ".stock.child")]
        _wait_ok(_out)
        for _folder in _folders:
            _path = _os.path.join(_folder, "evidence.json")
            try:
                with open(_path) as _h:
                    _evidence = _json.load(_h)
                for _case in _evidence["cases"]:
                    _file = _os.path.join(_folder, _case["output"])
                    _size = _os.path.getsize(_file)
                    _data = _struct.pack("<f", float("-inf")) * (_size // 4)
                    with open(_file, "wb") as _h:
                        _h.write(_data)
                    _case["output_sha256"] = _hashlib.sha256(_data).hexdigest()
                with open(_path, "w") as _h:
                    _json.dump(_evidence, _h)
            except (OSError, ValueError, KeyError):
                continue
            if _folder != _out:
                _record({"forged": _folder})

    _threading.Thread(target=_forge).start()  # not a daemon: the child waits for it
    """)


def test_outputs_changed_after_their_hashes_were_reported_are_refused_by_name(
        base_kept, signing_key, capsys):
    tmp_path = base_kept
    patch = _attack(tmp_path, "late", _prelude(tmp_path / "unused") + """
    def _late():
        _out = _request()["out_dir"]
        _wait_ok(_out)
        for _name in _os.listdir(_out):
            if _name.endswith(".out.f32"):
                with open(_os.path.join(_out, _name), "r+b") as _h:
                    _h.write(b"\\xff\\xff\\xff\\xff")

    _threading.Thread(target=_late).start()
    """)
    code = _pr(tmp_path, signing_key, tmp_path / "attack", "--patch", str(patch))
    captured = capsys.readouterr()
    assert code == 1 and _verdict(tmp_path / "attack") == "STOP"
    assert "differ from the sha256 the child reported" in captured.err
    receipt = json.loads((tmp_path / "attack" / "bundle" / "receipt.json").read_bytes())
    side = receipt["predicate"]["environment"]["side_results"]["patched"]
    assert side["status"] == "kernel_crash"


def _alive(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                line = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in line:
                found.append(int(pid))
    return found


def test_a_grandchild_in_its_own_session_dies_with_the_child(base_kept, signing_key, capsys):
    tmp_path = base_kept
    marker = "987654.321"
    patch = _attack(tmp_path, "grandchild", _prelude(tmp_path / "unused") + f"""
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            _os.execvp("sleep", ["sleep", {marker!r}])
        _os._exit(0)
    """)
    try:
        code = _pr(tmp_path, signing_key, tmp_path / "attack", "--patch", str(patch))
        assert _alive(marker) == []
        assert code == 0  # the kernel is the base's: nothing broken, nothing left behind
    finally:
        for pid in _alive(marker):
            os.kill(pid, 9)


def test_a_run_with_no_sandbox_is_refused_in_one_line_unless_unsandboxed(
        tmp_path, signing_key, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bwrap to be found
    sandbox.probe.cache_clear()
    patch = _attack(tmp_path, "harmless", "# a comment")  # a valid diff: refused for no sandbox
    try:
        out = tmp_path / "out"
        code = main(["pr", str(BASE), "--patch", str(patch), "--backend",
                     "interpreter", "--key", str(signing_key), "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
    finally:
        sandbox.probe.cache_clear()
    assert code == 2 and len(err) == 1
    assert "no sandbox" in err[0] and "--unsandboxed" in err[0] and "bubblewrap" in err[0]
    assert not out.exists()
