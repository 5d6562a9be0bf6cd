"""The "Bugs it would have caught" table (issue 36 item 3) reads only bundles that verified
in the same process and are runs of their frozen replay: the committed interpreter run of the
vLLM #42684 replay, and copies of it under replays it is not a run of, corrupted, or signed
by a key nobody trusts."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import EvidenceDriftError
from harness.core.keys import load_public_key
from harness.present.replays import replay_runs, replays_without_runs, table

ROOT = Path(__file__).resolve().parents[3]
EVIDENCE = ROOT / "evidence"
RUN = "interpreter-cpu-20261205.tar.xz"


def _evidence_copy(tmp_path: Path, fixed: str = "0.22.0") -> Path:
    """evidence/ with the vLLM #42684 replay and its committed interpreter run (alone), the
    fixed pin chosen."""
    evidence = tmp_path / "evidence"
    folder = evidence / "replays" / "vllm-42684"
    shutil.copytree(EVIDENCE / "replays" / "vllm-42684", folder,
                    ignore=lambda _d, names: [n for n in names
                                              if n.endswith(".tar.xz") and n != RUN])
    (evidence / "pins").mkdir()
    for release in ("0.21.0", fixed):
        shutil.copy(EVIDENCE / f"pins/vllm-{release}.json", evidence / "pins")
    if fixed != "0.22.0":
        spec = folder / "replay.json"
        data = json.loads(spec.read_bytes())
        pin = evidence / f"pins/vllm-{fixed}.json"
        data["fixed"] = {"release": fixed, "pin": f"../../pins/{pin.name}",
                         "sha256": hashlib.sha256(pin.read_bytes()).hexdigest()}
        spec.write_text(json.dumps(data), "utf-8")
        digest = hashlib.sha256(spec.read_bytes()).hexdigest()
        (folder / "replay.json.sha256").write_text(f"{digest}  replay.json\n", "utf-8")
    return evidence


def test_the_committed_run_verifies_and_is_a_run_of_its_replay() -> None:
    runs = [r for r in replay_runs(EVIDENCE) if r.replay.id == "vllm-42684"
            and r.shown.startswith(f"evidence/replays/vllm-42684/{RUN}")]
    assert len(runs) == 1
    run = runs[0]
    assert run.refused is None and run.outcome is not None
    assert run.outcome.answer == "REPRODUCED AND FIXED"
    assert run.backend == "interpreter"
    assert run.outcome.wrote_outside_view["stock"] == ("padded-v1000",)
    assert run.outcome.wrote_outside_view["patched"] == ()
    assert run.outcome.repaired == len(run.outcome.failed) > 0
    lines = table(runs)
    assert "**REPRODUCED AND FIXED**" in lines[2]


def test_a_run_under_a_replay_it_is_not_a_run_of_is_refused(tmp_path: Path) -> None:
    evidence = _evidence_copy(tmp_path, fixed="0.22.1")
    [run] = replay_runs(evidence)
    assert run.outcome is None
    assert "not a run of this replay" in str(run.refused)
    assert "patched side is not the replay's 0.22.1 pin" in str(run.refused)
    assert "refused: verified, but not a run" in table([run])[2]


def test_a_corrupted_archive_is_refused(tmp_path: Path) -> None:
    evidence = _evidence_copy(tmp_path)
    archive = evidence / "replays/vllm-42684" / RUN
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    [run] = replay_runs(evidence)
    assert run.outcome is None and run.refused


def test_a_run_signed_by_an_untrusted_key_is_refused_unless_its_key_is_given(
        tmp_path: Path) -> None:
    """The committed run re-signed, whole, by the test-only key: the project keys do not
    trust it; --pubkey (extra keys) does."""
    from harness.capture.signing import load_private_key
    from harness.probes.tamper import resign

    evidence = _evidence_copy(tmp_path)
    folder = evidence / "replays/vllm-42684"
    work = tmp_path / "unpacked"
    work.mkdir()
    subprocess.run(["tar", "-C", str(work), "-xJf", str(folder / RUN)], check=True)
    bundle = next(work.rglob("receipt.dsse.json")).parent
    key = load_private_key(ROOT / "tests/assets/keys/test-only-signing.key")
    resign(lambda statement: None, key)(bundle)
    (folder / RUN).unlink()
    top = next(work.iterdir())
    subprocess.run(["tar", "-C", str(work), "-cJf", str(folder / "resigned.tar.xz"), top.name],
                   check=True)
    [run] = replay_runs(evidence)
    assert run.outcome is None and "signature" in str(run.refused).lower()
    trusted = [load_public_key(ROOT / "tests/assets/keys/test-only-signing.pub")]
    [run] = replay_runs(evidence, trusted)
    assert run.outcome is not None and run.outcome.answer == "REPRODUCED AND FIXED"


def test_a_replay_file_that_moved_stops_the_table(tmp_path: Path) -> None:
    evidence = _evidence_copy(tmp_path)
    spec = evidence / "replays/vllm-42684/replay.json"
    spec.write_bytes(spec.read_bytes().replace(b"0.21.0", b"0.20.0", 1))
    with pytest.raises(EvidenceDriftError):
        replay_runs(evidence)
    code = subprocess.run([sys.executable, str(ROOT / "scripts/replay_table.py"), "--evidence",
                           str(evidence)], capture_output=True, text=True).returncode
    assert code == 2


def test_a_relative_evidence_folder_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """``topp-gate site evidence`` from the checkout passes a relative folder."""
    monkeypatch.chdir(ROOT)
    runs = [r for r in replay_runs(Path("evidence")) if r.replay.id == "vllm-42684"]
    assert any(r.shown == f"evidence/replays/vllm-42684/{RUN}/bundle" and r.outcome is not None
               for r in runs)


def test_a_replay_with_nothing_committed_is_listed_as_not_run(tmp_path: Path) -> None:
    evidence = _evidence_copy(tmp_path)
    (evidence / "replays/vllm-42684" / RUN).unlink()
    assert replay_runs(evidence) == []
    [waiting] = replays_without_runs(evidence)
    assert waiting.id == "vllm-42684"
    assert "not run yet" in table([], [waiting])[2]


def test_the_committed_cuda_runs_say_what_the_docs_say() -> None:
    """The GPU runs of both replays, verified here: FlashInfer PR #2325 reproduced on exactly
    the 13 rows searched after a skipped row and fixed; vLLM #42684 reproduced, its fix
    stopped by regression/v2 only on rows 0.21.0 already failed (docs/replays.md, README)."""
    runs = {r.replay.id: r for r in replay_runs(EVIDENCE) if r.backend == "cuda"}
    flashinfer, vllm = runs["flashinfer-2325"], runs["vllm-42684"]
    assert flashinfer.outcome is not None and vllm.outcome is not None
    assert flashinfer.outcome.answer == "REPRODUCED AND FIXED"
    assert [row.row for row in flashinfer.outcome.failed] == [
        f"mixed-k-b145-v57600[{i}]" for i in range(132, 145)]
    assert vllm.outcome.answer == "REPRODUCED, FIX NOT PROVEN"
    assert (len(vllm.outcome.failed), vllm.outcome.repaired) == (193, 192)
    assert vllm.outcome.broke_right == ()
    assert len(vllm.outcome.stopped_failed) == 43
    assert vllm.outcome.wrote_outside_view["stock"] == ("olmo3-padded-v100278",
                                                        "slice-b192-v4096")


def test_the_site_front_page_shows_the_replays_and_links_nothing_off_the_site() -> None:
    from harness.present.model import Evidence
    from harness.present.site import index_page

    evidence = Evidence()
    evidence.replays = replay_runs(EVIDENCE)
    page = index_page(evidence)
    assert '<h2 id="replays">Bugs it would have caught</h2>' in page
    assert page.count("REPRODUCED AND FIXED") >= 2 and "REPRODUCED, FIX NOT PROVEN" in page
    assert "<code>https://github.com/flashinfer-ai/flashinfer/pull/2325</code>" in page
    assert 'href="http' not in page
