"""``topp-gate replay`` on the vLLM #42684 replay's interpreter twin (issue 36): the real
releases 0.21.0 and 0.22.0 from their pinned wheels, in Triton's interpreter, each in its
sandbox (or ``--unsandboxed`` where bubblewrap cannot run), through the real CLI.

The broken release must fail rows against the oracle and write outside its logits view,
the fix must PASS as an upgrade and repair every one of them; the bundle verifies and its
captured bytes (the strided buffer's padding included) regenerate. Replaying a release
against itself must not claim a fix, and replaying the fixed release must not claim a
reproduction: the answer has power both ways. Replay files that moved are refused.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.kernels import sandbox

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "evidence/replays/vllm-42684"
PUB = ROOT / "tests/assets/keys/test-only-signing.pub"

pytestmark = [pytest.mark.sources, pytest.mark.slow]


def _isolation() -> list[str]:
    try:
        sandbox.probe()
    except sandbox.SandboxError:
        return ["--unsandboxed"]
    return []


def _replay(path: Path, key: Path, out: Path) -> int:
    return main(["replay", str(path), "--backend", "interpreter", "--key", str(key),
                 "--out", str(out), "--workers", "1", *_isolation()])


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _frozen_copy(tmp_path: Path, broken: str, fixed: str) -> Path:
    """A replay folder of the twin matrix with the given releases' pins, frozen."""
    folder = tmp_path / "replay"
    folder.mkdir()
    shutil.copy(REPLAY / "interpreter.json", folder / "interpreter.json")
    data = json.loads((REPLAY / "replay.json").read_bytes())
    data["matrices"] = {"interpreter": {"path": "interpreter.json",
                                        "sha256": _sha(folder / "interpreter.json")}}
    for role, release in (("broken", broken), ("fixed", fixed)):
        pin = folder / f"{role}.json"
        shutil.copy(ROOT / f"evidence/pins/vllm-{release}.json", pin)
        data[role] = {"release": release, "pin": pin.name, "sha256": _sha(pin)}
    spec = folder / "replay.json"
    spec.write_text(json.dumps(data), encoding="utf-8")
    (folder / "replay.json.sha256").write_text(f"{_sha(spec)}  replay.json\n", "utf-8")
    return spec


def test_the_committed_replay_reproduces_the_bug_and_the_fix_repairs_it(
        tmp_path, signing_key, capsys):
    out = tmp_path / "run"
    assert _replay(REPLAY / "replay.json", signing_key, out) == 0
    said = capsys.readouterr().out
    first = said.splitlines()[0]
    assert first.startswith("REPRODUCED AND FIXED: ")
    assert "broken 0.21.0, fixed 0.22.0" in first
    failing = [line for line in said.splitlines() if line.startswith("  padded-v1000[")]
    assert failing, said
    assert all(line.endswith("fixed: no fault") for line in failing)
    assert "broken release wrote outside its logits view" in said
    assert "fixed release wrote outside" not in said
    assert f"repaired {len(failing)} of {len(failing)}" in said
    # an ordinary bundle: verify reruns the oracle and the gate, and --regenerate rebuilds
    # every captured file from the manifest, the strided buffer's padding included
    assert main(["verify", str(out / "bundle"), "--pubkey", str(PUB), "--regenerate"]) == 0
    assert "inputs: 4 files rebuilt from the manifest" in capsys.readouterr().out
    receipt = json.loads((out / "bundle/receipt.json").read_bytes())
    stock = receipt["predicate"]["kernel_path"]["stock"]["cases"][0]
    assert stock["call"]["logits"] == {"shape": [8, 1000], "stride": [1010, 1],
                                       "storage_offset": 0, "dtype": "float32"}
    assert stock["padding_intact"] is False
    # any byte of the captured padding changed: verify fails
    padding = out / "bundle/inputs/padded-v1000.pad.f32.zz"
    data = bytearray(padding.read_bytes())
    data[-1] ^= 1
    padding.write_bytes(bytes(data))
    assert main(["verify", str(out / "bundle"), "--pubkey", str(PUB)]) == 4


def test_a_release_replayed_against_itself_is_no_fix(tmp_path, signing_key, capsys):
    spec = _frozen_copy(tmp_path, "0.21.0", "0.21.0")
    assert _replay(spec, signing_key, tmp_path / "run") == 1
    assert capsys.readouterr().out.startswith("REPRODUCED, FIX NOT PROVEN: ")


def test_the_fixed_release_reproduces_nothing(tmp_path, signing_key, capsys):
    spec = _frozen_copy(tmp_path, "0.22.0", "0.22.0")
    assert _replay(spec, signing_key, tmp_path / "run") == 1
    said = capsys.readouterr().out
    assert said.startswith("NOT REPRODUCED: ")
    assert "broken release: fails 0 of 8 rows" in said


def _refused(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_replay_file_that_moved_is_refused(tmp_path, signing_key, capsys):
    spec = _frozen_copy(tmp_path, "0.21.0", "0.22.0")
    spec.write_text(spec.read_text("utf-8").replace("0.22.0", "0.22.1", 1), "utf-8")
    assert _replay(spec, signing_key, tmp_path / "run") != 0
    assert "not the frozen bytes" in _refused(capsys)
    assert not (tmp_path / "run").exists()


def test_a_pin_that_moved_or_is_reached_through_a_link_is_refused(tmp_path, signing_key,
                                                                   capsys):
    spec = _frozen_copy(tmp_path, "0.21.0", "0.22.0")
    pin = spec.parent / "broken.json"
    pin.write_bytes(pin.read_bytes() + b"\n")
    assert _replay(spec, signing_key, tmp_path / "run") != 0
    assert "broken pin broken.json (not the bytes the replay names)" in _refused(capsys)
    pin.unlink()
    pin.symlink_to(ROOT / "evidence/pins/vllm-0.21.0.json")
    assert _replay(spec, signing_key, tmp_path / "run") == 2
    assert "reaches through a link" in _refused(capsys)


def test_a_backend_without_a_matrix_is_refused(tmp_path, signing_key, capsys):
    spec = _frozen_copy(tmp_path, "0.21.0", "0.22.0")  # an interpreter matrix alone
    data = json.loads(spec.read_bytes())
    data["matrices"] = {"cuda": data["matrices"]["interpreter"]}
    spec.write_text(json.dumps(data), "utf-8")
    (spec.parent / "replay.json.sha256").write_text(f"{_sha(spec)}  replay.json\n", "utf-8")
    assert main(["replay", str(spec), "--backend", "interpreter", "--key", str(signing_key),
                 "--out", str(tmp_path / "run")]) == 2
    assert "its cuda matrix requires backend 'interpreter'" in _refused(capsys)
