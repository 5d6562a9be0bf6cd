"""``topp-gate exact`` through main(argv), in-process, on committed and tampered bundles."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "evidence" / "bundles" / "smoke-interpreter-20261129"
EVIDENCE_PUB = str(ROOT / "evidence" / "keys" / "topp-gate-evidence.pub")
TAMPER = ROOT / "tests" / "assets" / "tamper"
TEST_PUB = str(ROOT / "tests" / "assets" / "keys" / "test-only-signing.pub")


def _signed_rows(bundle: Path) -> list[dict]:
    return json.loads((bundle / "results" / "rows.json").read_bytes())


def test_smoke_bundle_end_to_end_json(capsys):
    pytest.importorskip("flint")
    assert main(["exact", str(SMOKE), "--pubkey", EVIDENCE_PUB, "--json",
                 "--workers", "2"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    *rows, last = lines
    signed = _signed_rows(SMOKE)
    assert len(rows) == len(signed) == 23
    for mine, theirs in zip(rows, signed, strict=True):
        # the binary64 and kernel columns are the signed (and rerun) per-row results
        assert (mine["case"], mine["row"], mine["stops"]) == (theirs["case"], theirs["row"],
                                                              theirs["stops"])
        assert mine["binary64_count"] == theirs["oracle"]["count"]
        for side in ("stock", "patched"):
            assert mine[f"{side}_kept"] == theirs[side].get("kept")
            expected = ("under_keep" if mine[f"{side}_kept"] < mine["exact_count"] else
                        "over_keep" if mine[f"{side}_kept"] > mine["exact_count"] else "exact")
            assert mine[f"{side}_vs_exact"] == expected
        assert mine["binary64_vs_exact"] == (
            "agree" if mine["binary64_count"] == mine["exact_count"] else "differ")
    # The smoke matrix's two-huge-token row (ids 100 and 2049 at 1e30, p 0.5): binary64
    # keeps 1 because every other weight underflows; in exact arithmetic the count is 2.
    huge = next(r for r in rows if (r["case"], r["row"]) == ("boundary-huge-v4096", 2))
    assert (huge["binary64_count"], huge["exact_count"]) == (1, 2)
    assert huge["patched_vs_exact"] == "under_keep"
    summary = last["summary"]
    assert summary["rows"] == 23 and summary["differ"] == 1
    assert summary["agree"] == sum(r["binary64_vs_exact"] == "agree" for r in rows)


def test_smoke_bundle_text_names_the_stopped_rows_and_the_summary(capsys):
    pytest.importorskip("flint")
    assert main(["exact", str(SMOKE), "--pubkey", EVIDENCE_PUB]) == 0
    out = capsys.readouterr().out
    assert f"verified bundle {SMOKE}: verdict STOP" in out
    assert "| stopped row | stops | binary64 | exact-real |" in out
    stopped = [r for r in _signed_rows(SMOKE) if r["stops"]]
    for r in stopped:
        assert f"| {r['case']}[{r['row']}] | {', '.join(r['stops'])} |" in out
    assert "binary64 and exact-real counts agree on 22 of 23 rows; they differ on 1 " \
           "(boundary-huge-v4096[2])." in out


def test_default_key_is_the_project_evidence_key(capsys):
    pytest.importorskip("flint")
    assert main(["exact", str(SMOKE), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["summary"]["rows"] == 23


@pytest.mark.parametrize("name,code", [
    ("output_bit_flipped", "binding_mismatch"),
    ("resigned_other_key", "bad_signature"),
])
def test_a_bundle_that_does_not_verify_exits_4(capsys, name, code):
    pytest.importorskip("flint")
    assert main(["exact", str(TAMPER / name), "--pubkey", TEST_PUB]) == 4
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"topp-gate: {code}: ") and captured.err.count("\n") == 1


def test_a_byte_changed_in_a_committed_bundle_exits_4(tmp_path, capsys):
    pytest.importorskip("flint")
    copy = tmp_path / "bundle"
    shutil.copytree(SMOKE, copy)
    victim = copy / "results" / "rows.json"
    data = bytearray(victim.read_bytes())
    data[100] ^= 1
    victim.write_bytes(bytes(data))
    assert main(["exact", str(copy), "--pubkey", EVIDENCE_PUB, "--json"]) == 4
    assert capsys.readouterr().out == ""


def test_usage_errors_exit_2(capsys):
    assert main(["exact"]) == 2
    assert main(["exact", str(SMOKE), "--workers", "0"]) == 2


def test_without_the_exact_extra_exits_2_with_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "flint", None)
    assert main(["exact", str(SMOKE), "--pubkey", EVIDENCE_PUB]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    from harness.install_hint import install_command

    assert f"needs the exact extra: {install_command('exact')}" in captured.err


def test_exact_needs_no_numpy_and_loads_no_torch_triton_or_vllm():
    """Only python-flint on top of the base install: numpy blocked, nothing heavy loaded."""
    pytest.importorskip("flint")
    import subprocess
    import textwrap

    script = textwrap.dedent(f"""
        import sys
        class NoNumpy:
            def find_spec(self, name, path=None, target=None):
                if name == "numpy" or name.startswith("numpy."):
                    raise ImportError("numpy blocked for this test")
        sys.meta_path.insert(0, NoNumpy())
        from harness.cli import main
        rc = main(["exact", {str(SMOKE)!r}, "--pubkey", {EVIDENCE_PUB!r}, "--json",
                   "--workers", "1"])
        heavy = sorted(m for m in sys.modules
                       if m.split(".")[0] in ("torch", "triton", "vllm", "numpy"))
        print("RC", rc, "HEAVY", heavy)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert "RC 0 HEAVY []" in done.stdout, done.stdout[-500:] + done.stderr
    summary = json.loads(done.stdout.splitlines()[-2])["summary"]
    assert summary["rows"] == 23 and summary["differ"] == 1


def test_a_bundle_swapped_after_verification_is_refused(monkeypatch, capsys):
    """exact reads the bundle a second time after verifying it; the second read must be the
    very statement that was verified (its payload digest), or nothing is computed."""
    # without the exact extra, exact refuses (exit 2) before its second read
    pytest.importorskip("flint", reason="python-flint is not installed (the exact extra)")
    import harness.core.verify as verify_module

    real_open = verify_module.open_bundle
    other = ROOT / "evidence" / "bundles" / "h200-forced-logit-gate-cuda-20261129"
    # a valid bundle by the same key, standing in for one put in place between the reads
    monkeypatch.setattr(verify_module, "open_bundle", lambda path, key: real_open(other, key))
    assert main(["exact", str(SMOKE), "--pubkey", EVIDENCE_PUB, "--json"]) == 4
    err = capsys.readouterr().err
    assert "changed between verification and this read" in err


def test_the_view_and_the_verified_result_name_the_same_signed_statement():
    from harness.core.keys import load_public_key
    from harness.core.verify import open_bundle, verify_bundle

    key = load_public_key(Path(EVIDENCE_PUB))
    assert open_bundle(SMOKE, key).payload_sha256 == verify_bundle(SMOKE, key).payload_sha256
