"""``topp-gate probe`` in-process: every breakage probe runs for real and fails closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.probes import PROBES


def _lines(out: str) -> dict[str, str]:
    lines = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in {p.name for p in PROBES}:
            lines[parts[1]] = line
    return lines


def test_every_probe_fails_closed(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe"])
    out = capsys.readouterr().out
    lines = _lines(out)
    assert set(lines) == {p.name for p in PROBES}
    groups = {p.group for p in PROBES}
    assert groups == {"unreadable", "boundary", "bounds", "drift"}
    not_closed = [line for line in lines.values() if not line.endswith("  ok")]
    assert not not_closed, "\n".join(not_closed)
    for probe in PROBES:
        assert f"expect {probe.expected}  observed {probe.expected}  ok" in lines[probe.name]
    assert code == 0
    assert out.splitlines()[-1].startswith(f"{len(PROBES)} of {len(PROBES)} probes failed closed")


def test_a_probe_that_does_not_fail_closed_exits_1(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import dataclasses

    import harness.probes as probes

    accepting = dataclasses.replace(probes.PROBES[0], name="always-accepts",
                                    run=lambda work: "accepted")
    monkeypatch.setattr(probes, "PROBES", (*probes.PROBES, accepting))
    assert main(["probe", "--only", "always-accepts", "exact-ties"]) == 1
    out = capsys.readouterr().out
    assert "observed accepted  FAILED" in _lines(out).get("always-accepts", out)
    assert _lines(out)["exact-ties"].endswith("  ok")


def test_unknown_probe_name_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--only", "no-such-probe"]) == 2
    assert "unknown probe 'no-such-probe'" in capsys.readouterr().err


def test_probe_tampers_the_stored_file_the_receipt_names(tmp_path: Path) -> None:
    """Inputs are stored as xz or zlib (writer's choice): the probe must find the stored
    name in the signed receipt, and that name is what the refusal names."""
    from harness.probes import ProbeContext, catalogue, run_probe

    context = ProbeContext(tmp_path)
    good = catalogue.good_bundle(context)
    stored = good.stored(catalogue.LOGITS)
    assert stored.startswith(catalogue.LOGITS + ".") and (good.path / stored).is_file()
    outcome = run_probe(next(p for p in PROBES if p.name == "mismatched-input-hash"), context)
    assert (outcome.status, outcome.observed) == ("ok", "binding_mismatch")
    assert context.good is good  # written once, shared by the probes of one run


def test_right_code_for_another_reason_is_a_failed_probe(tmp_path: Path) -> None:
    """A refusal that carries the declared code but names another defect proves nothing."""
    import dataclasses

    from harness.probes import ProbeContext, catalogue, run_probe, tamper

    def deletes_the_wrong_file(context: ProbeContext) -> str:
        good = catalogue.good_bundle(context)
        return catalogue._verify_copy(context, "wrong-file",
                                      tamper.delete(good.stored(catalogue.PATCHED_OUT)),
                                      because=good.stored(catalogue.STOCK_OUT))

    probe = dataclasses.replace(PROBES[0], name="wrong-reason", run=deletes_the_wrong_file)
    outcome = run_probe(probe, ProbeContext(tmp_path))
    assert outcome.observed == "malformed_evidence"
    assert outcome.status == "FAILED"
    assert "refused for another reason" in outcome.detail
    assert "outputs/patched/forced-v32.out.f32" in outcome.detail


def test_probe_accepts_the_sources_flag_the_nix_wrapper_passes(tmp_path, capsys):
    # nix/apps.nix runs `topp-gate probe --sources <nix-built trees> ...`.
    assert main(["probe", "--sources", str(tmp_path), "--only", "source-file-changed"]) == 0
    assert "source-file-changed" in capsys.readouterr().out
