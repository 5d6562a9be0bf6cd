"""``topp-gate pr``, driven in-process on Triton's interpreter.

The matrix is the newest interpreter PR matrix (``NEWEST_PR_MATRIX``) cut to its
``traffic-near-uniform-v2048`` case (where the interpreter mutation run on
``pr-interpreter-v2`` killed ``cmp-keep-ge``) and two ordinary rows, with its rule set, kept
small for CI with ``--matrix FILE``. A harmful diff (``prob > pivot`` flipped to ``>=``,
the catalogue's ``cmp-keep-ge``) STOPs and the answer names the row it broke; a harmless
diff (a comment) PASSes on the second run, which reuses the first run's verified base side
instead of running the base again. Bad input exits 2 with one line and leaves no folder.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.pins.pinfile import load_pin_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assets"))
from pr_small import BASE, KEEP, PINS, PUB, ROOT, _diff, _kernel, _pr, _small_matrix  # noqa: E402,F401

pytestmark = [pytest.mark.sources]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


# --- refused before anything runs: exit 2, one line, no folder left ------------------------------


def test_a_missing_pin_is_refused(tmp_path, signing_key, capsys):
    patch = _diff(tmp_path, "c.diff", KEEP, KEEP.replace("keep =", "keep  ="))
    out = tmp_path / "out"
    assert _pr(tmp_path, signing_key, out, "--patch", str(patch),
               base=str(tmp_path / "no-such-pin.json")) == 2
    assert "pin file" in _one_line(capsys) and not out.exists()


def test_an_unreadable_patch_is_refused(tmp_path, signing_key, capsys):
    out = tmp_path / "out"
    assert _pr(tmp_path, signing_key, out, "--patch", str(tmp_path / "missing.diff")) == 2
    assert "cannot read patch" in _one_line(capsys) and not out.exists()


def test_a_patch_that_does_not_apply_is_refused(tmp_path, signing_key, capsys):
    patch = _diff(tmp_path, "c.diff", KEEP, KEEP.replace("keep =", "keep  ="))
    text = patch.read_text(encoding="utf-8").replace("(prob > pivot)", "(prob < pivot)", 1)
    patch.write_text(text, encoding="utf-8")  # its removed line is not the kernel's
    out = tmp_path / "out"
    assert _pr(tmp_path, signing_key, out, "--patch", str(patch)) == 2
    _one_line(capsys)
    assert not out.exists()


def test_an_existing_out_is_refused_and_left_alone(tmp_path, signing_key, capsys):
    patch = _diff(tmp_path, "c.diff", KEEP, KEEP.replace("keep =", "keep  ="))
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me", encoding="utf-8")
    assert _pr(tmp_path, signing_key, out, "--patch", str(patch)) == 2
    assert "already exists" in _one_line(capsys)
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_a_change_is_required_and_only_one(tmp_path, signing_key, capsys):
    out = tmp_path / "out"
    assert _pr(tmp_path, signing_key, out) == 2
    _one_line(capsys)
    assert _pr(tmp_path, signing_key, out, "--patch", "a.diff", "--change", str(BASE)) == 2
    _one_line(capsys)
    assert not out.exists()


def test_a_family_without_a_pr_matrix_is_refused_naming_what_is_supported(
        tmp_path, signing_key, capsys, monkeypatch):
    from harness.pr import flow

    pin = "flashinfer-0.7.2.post1.json"  # as if FlashInfer had no PR matrix
    monkeypatch.setattr(flow, "NEWEST_PR_MATRICES",
                        {k: v for k, v in flow.NEWEST_PR_MATRICES.items() if k != "flashinfer"})
    monkeypatch.setattr(flow, "PR_FAMILIES", tuple(flow.NEWEST_PR_MATRICES))
    out = tmp_path / "out"
    assert main(["pr", str(PINS / pin), "--change", str(PINS / pin), "--backend", "interpreter",
                 "--key", str(signing_key), "--out", str(out)]) == 2
    line = _one_line(capsys)
    assert "no PR matrix" in line and "vllm-triton" in line and "pr-cuda-v" in line
    assert "vllm-pytorch" in line and "pr-pytorch-v2" in line
    assert not out.exists()


@pytest.mark.parametrize("backend", ["interpreter", "auto"])
def test_flashinfer_on_the_cpu_is_refused_naming_its_cuda_matrix(tmp_path, signing_key, capsys,
                                                                 backend):
    """FlashInfer runs on CUDA only: on this CPU machine, asked for the interpreter or left
    to auto, pr refuses in one line (exit 2) naming pr-flashinfer-v3, and writes nothing."""
    out = tmp_path / "out"
    base, change = PINS / "flashinfer-0.6.0.json", PINS / "flashinfer-0.6.1.json"
    assert main(["pr", str(base), "--change", str(change), "--backend", backend,
                 "--key", str(signing_key), "--out", str(out)]) == 2
    line = _one_line(capsys)
    assert "family flashinfer runs on CUDA only" in line and "pr-flashinfer-v3" in line
    assert ("--backend interpreter was given" in line) == (backend == "interpreter")
    assert not out.exists()


# --- the gate, twice: the second run reuses the verified base ------------------------------------


def _predicate(bundle: Path) -> dict:
    return json.loads((bundle / "receipt.json").read_bytes())["predicate"]


@pytest.mark.slow
def test_a_harmful_diff_stops_and_a_harmless_one_passes_reusing_the_base(
        tmp_path, signing_key, capsys):
    harmful = _diff(tmp_path, "keep-ge.diff", KEEP, KEEP.replace("prob > pivot", "prob >= pivot"))
    first = tmp_path / "first"
    assert _pr(tmp_path, signing_key, first, "--patch", str(harmful)) == 1
    out, err = capsys.readouterr()
    stopped = [r for r in _predicate(first / "bundle")["rows"] if r["stops"]]
    assert out.startswith(f"STOP: the change broke {len(stopped)} of 4 rows")
    assert "traffic-near-uniform-v2048[0]" in {f"{r['case']}[{r['row']}]" for r in stopped}
    for r in stopped:  # every broken row by case[row], reasons, dispatch path, kept counts
        assert (f"  {r['case']}[{r['row']}]  {','.join(r['stops'])}  split  kept: oracle "
                f"{r['oracle']['count']}, base {r['stock']['kept']}, change "
                f"{r['patched']['kept']}\n") in out
    changed = _changed_rows(first / "bundle")
    right = sum(1 for r in _predicate(first / "bundle")["rows"]
                if f"{r['case']}[{r['row']}]" in changed
                and r["diagnostics"]["base_defect"] is False)
    assert changed and (f"outputs: {len(changed)} of 4 rows differ from the base's; {right} "
                        "of them are rows the base got right\n") in out
    assert f"report: {first / 'bundle' / 'report.md'}\n" in out
    assert "base: ran; its verified side is kept" in out
    assert f"bundle: {first / 'bundle'} (verified" in out
    assert "stock and patched on interpreter at once" in err
    assert "case 1/2 traffic-near-uniform-v2048: done\n" in err  # per case, not per side
    assert {p.name for p in first.iterdir()} == {"pins", "change.diff", "pr.json",
                                                 "pr.json.sha256", "bundle"}
    assert main(["verify", str(first / "bundle"), "--pubkey", str(PUB),
                 "--frozen-manifest", str(first / "pr.json"), "--json"]) == 1  # verified STOP
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert (changes["rows_changed"], changes["rows_changed_base_right"]) == (len(changed),
                                                                             right)
    assert [b["row"] for b in changes["broken"]] == [f"{r['case']}[{r['row']}]"
                                                      for r in stopped]
    assert changes["broken"][0]["kept"] == {"oracle": stopped[0]["oracle"]["count"],
                                            "base": stopped[0]["stock"]["kept"],
                                            "change": stopped[0]["patched"]["kept"]}
    assert changes["report"] == "report.md" and changes["base_failed"] is None

    harmless = _diff(tmp_path, "comment.diff", "# the logit-space pivot rounds to M",
                     "# the pivot in logit space rounds to M")
    second = tmp_path / "second"
    assert _pr(tmp_path, signing_key, second, "--patch", str(harmless)) == 0
    out, err = capsys.readouterr()
    assert out.startswith("PASS: the change broke none of 4 rows")
    assert f"base: reused the verified base side of {(first / 'bundle').resolve()}" in out
    assert "patched on interpreter at once" in err and "stock and patched" not in err
    assert "(base reused)" in err
    # the work done: no base child ran; the base side is the first run's, byte for byte
    predicate = _predicate(second / "bundle")
    assert "stock_s" not in predicate["timings"] and "patched_s" in predicate["timings"]
    assert predicate["environment"]["base_reused_from"]["bundle"] == \
        str((first / "bundle").resolve())
    assert (first / "bundle/outputs/stock/evidence.json").read_bytes() == \
        (second / "bundle/outputs/stock/evidence.json").read_bytes()
    assert main(["verify", str(second / "bundle"), "--pubkey", str(PUB),
                 "--frozen-manifest", str(second / "pr.json")]) == 0
    capsys.readouterr()

    # a kept base is checked again when reused: one flipped bit and it is not used
    _tampered_entry_is_not_reused(tmp_path, first / "bundle")


def _changed_rows(bundle: Path) -> set[str]:
    """case[row] of every row whose output bytes differ between the two sides."""
    from cryptography.hazmat.primitives import serialization

    from harness.core.bundle import output_name
    from harness.core.verify import open_bundle

    view = open_bundle(bundle, serialization.load_pem_public_key(PUB.read_bytes()))
    changed = set()
    for case in json.loads((bundle / "cases.json").read_bytes())["cases"]:
        width = 4 * case["vocab"]
        sides = [view.raw(output_name(s, case["id"])) for s in ("stock", "patched")]
        changed |= {f"{case['id']}[{n}]" for n in range(case["batch"])
                    if sides[0][n * width:(n + 1) * width] != sides[1][n * width:(n + 1) * width]}
    return changed


def _tampered_entry_is_not_reused(tmp_path: Path, bundle: Path) -> None:
    from harness.capture.signing import load_private_key
    from harness.core.cases_index import parse_cases_index
    from harness.pr.flow import load_base

    (entry,) = (tmp_path / "bases").iterdir()
    key = json.loads((entry / "entry.json").read_bytes())["key"]
    public = load_private_key(_key_copy(tmp_path)).public_key()
    side = load_pin_file(BASE).side("stock")
    layout = parse_cases_index((bundle / "cases.json").read_bytes())
    said: list[str] = []

    def load(out: Path):
        return load_base(tmp_path / "bases", key, public, side, layout, bundle / "cases.json",
                         out, said.append)

    assert load(tmp_path / "check-1") is not None  # as kept: it checks
    output = next(entry.glob("*.out.f32"))
    data = bytearray(output.read_bytes())
    data[0] ^= 1
    output.write_bytes(bytes(data))
    assert load(tmp_path / "check-2") is None
    assert "differs from its signed sha256" in said[-1]
    assert not any((tmp_path / "check-2").iterdir())


def _key_copy(tmp_path: Path) -> Path:
    target = tmp_path / "k.key"
    shutil.copyfile(ROOT / "tests/assets/keys/test-only-signing.key", target)
    target.chmod(0o600)
    return target


def test_a_refusal_leaves_no_runs_folder_it_made(tmp_path, signing_key, capsys):
    patch = _diff(tmp_path, "c.diff", KEEP, KEEP.replace("keep =", "keep  ="))
    out = tmp_path / "runs" / "pr-1"  # its parent made by pr, as the default runs/ is
    assert _pr(tmp_path, signing_key, out, "--patch", str(patch),
               base=str(tmp_path / "no-such-pin.json")) == 2
    _one_line(capsys)
    assert not (tmp_path / "runs").exists()
