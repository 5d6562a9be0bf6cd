"""``topp-gate mutate`` end to end in Triton's interpreter on a tiny matrix: the real vLLM
0.33.0 kernel, two real mutants (strict diffs, each frozen into its own manifest), real
signed bundles verified offline, vLLM's own criterion beside the gate, a signed summary
that :func:`check_summary` re-verifies and that a changed byte breaks."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from harness.capture.reused_inputs import copy_inputs
from harness.cli import main
from harness.core.errors import HarnessError, UsageError
from harness.core.keys import load_public_key
from harness.core.manifest import load_manifest
from harness.mutation.mutate import check_summary
from harness.present.build import mutation_run
from harness.present.site import mutation_page

REPO = Path(__file__).resolve().parents[2]
KEYS = REPO / "tests" / "assets" / "keys"
pytestmark = pytest.mark.slow

TINY = {
    "schema": "topp-gate/matrix/v1", "rules": "regression/v1",
    "description": "tiny mutation-test matrix (CI)",
    "backend": {"required": "interpreter", "interpreter_sm_count": 4},
    "limits": {"max_vocab": 256, "max_batch": 4, "child_timeout_s": 600,
               "run_timeout_s": 1200, "max_bundle_bytes": 1048576},
    "cases": [
        {"id": "forced-v256", "kind": "forced", "vocab": 256, "background_seed": 0,
         "grid": {"value": ["1e9"], "p": ["0.9"], "forced_id": [127]}},
        {"id": "ties-v256", "kind": "boundary", "vocab": 256, "rows": [
            {"label": "8 tied at 2 under one at 4", "p": "0.2",
             "construction": {"type": "ties", "groups": [{"count": 1, "logit": "4"},
                                                         {"count": 8, "logit": "2"}],
                              "rest": "0", "placement": "permuted", "seed": 1}}]},
    ],
}


def _receipt(bundle: Path) -> dict:
    return json.loads((bundle / "receipt.json").read_bytes())


def _stock_digests(receipt: dict) -> dict[str, str]:
    return {s["name"]: s["digest"]["sha256"] for s in receipt["subject"]
            if s["name"].startswith("outputs/stock/")}


def _frozen_tiny(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(repository holding the frozen tiny PR manifest, that manifest, a private key)."""
    if not (Path.home() / ".cache" / "topp-gate" / "wheels").is_dir():
        pytest.skip("vLLM 0.33.0 is not in the topp-gate cache")
    matrix = tmp_path / "tiny.json"
    matrix.write_text(json.dumps(TINY), encoding="utf-8")
    # the frozen PR manifest where a repository keeps it: check_summary reads it from the
    # repository it is given (roots), never from the mutation folder
    repo = tmp_path / "repo"
    pin = repo / "evidence" / "pins" / "vllm-0.33.0.json"
    pin.parent.mkdir(parents=True)
    shutil.copy(REPO / "evidence" / "pins" / "vllm-0.33.0.json", pin)
    manifest = repo / "evidence" / "manifests" / "pr" / "tiny-pr.json"
    assert main(["manifest", "new", "--stock", str(pin), "--patched", str(pin),
                 "--matrix", str(matrix), "--out", str(manifest)]) == 0
    key = tmp_path / "k.key"
    shutil.copy(KEYS / "test-only-signing.key", key)
    key.chmod(0o600)
    return repo, manifest, key


def _inputs_from_refuses_other_cases_and_changed_bytes(base: Path, public, frozen: Path,
                                                       tmp_path: Path):
    manifest = load_manifest(frozen)
    other = load_manifest(REPO / "evidence" / "manifests" / "pr" / "pr-pytorch-v2.json")
    with pytest.raises(UsageError, match="its cases are not this manifest's"):
        copy_inputs(base, public, other, tmp_path / "other")
    changed = tmp_path / "changed-base"
    shutil.copytree(base, changed)
    stored = sorted((changed / "inputs").iterdir())[0]
    stored.write_bytes(stored.read_bytes()[:-1] + bytes([stored.read_bytes()[-1] ^ 1]))
    copy_inputs(base, public, manifest, tmp_path / "same")  # the base as it is: taken
    # a dispatch mutant's manifest may route a case another way (``paths``, which only
    # traffic cases carry, so set here on the parsed manifest): the inputs are the same
    data = json.loads(frozen.read_bytes())
    data["cases"][0]["paths"] = {"stock": "single", "patched": "single"}
    copy_inputs(base, public, dataclasses.replace(manifest, data=data), tmp_path / "rerouted")
    with pytest.raises(HarnessError):
        copy_inputs(changed, public, manifest, tmp_path / "changed")


def test_without_base_reuse_every_run_runs_both_sides(tmp_path):
    repo, manifest, key = _frozen_tiny(tmp_path)
    out = tmp_path / "mut"
    code = main(["mutate", "--manifest", str(manifest), "--out", str(out), "--key", str(key),
                 "--backend", "interpreter", "--jobs", "2", "--only", "drop-dup-mask",
                 "--no-base-reuse", "--no-vllm-criterion"])
    assert code == 0
    public = load_public_key(KEYS / "test-only-signing.pub")
    summary = check_summary(out, public, roots=(repo,))
    assert summary["mutants"][0]["killed"] is True
    for name in ("base", "drop-dup-mask"):
        assert "base_reused_from" not in _receipt(out / "bundles" / name)["predicate"][
            "environment"]
    # a run without vLLM's criterion (FlashInfer's) is shown as such, not refused as
    # malformed (the first FlashInfer mutation run, 2026-12-05, was)
    run = mutation_run(out, public, "mut", repo, lambda _line: None)
    assert (run.gate_kills, run.criterion_run) == ((1, 1), False)
    assert "not run" in mutation_page(run)


def test_mutate_kills_a_dropped_clause_and_signs_what_it_found(tmp_path):
    repo, manifest, key = _frozen_tiny(tmp_path)
    out = tmp_path / "mut"
    code = main(["mutate", "--manifest", str(manifest), "--out", str(out), "--key", str(key),
                 "--backend", "interpreter", "--jobs", "2",
                 "--only", "drop-dup-mask,obo-split-count"])
    assert code == 0
    public = load_public_key(KEYS / "test-only-signing.pub")
    summary = check_summary(out, public, roots=(repo,))
    assert summary["base_passes"] is True
    by_id = {m["id"]: m for m in summary["mutants"]}
    assert by_id["drop-dup-mask"]["killed"] is True  # all 8 tied tokens kept
    assert by_id["drop-dup-mask"]["stopped_rows"]
    assert set(by_id) == {"drop-dup-mask", "obo-split-count"}
    assert summary["kill_rate"]["gate"]["of"] == 2
    for m in summary["mutants"]:
        assert m["verified"] and len(m["diff_sha256"]) == 64
        assert "vllm_criterion" in m
    survivors = summary["survivors"]
    assert all(by_id[s]["killed"] is False for s in survivors)
    # the base ran first and both its sides ran; each mutant's bundle carries the base's
    # verified stock side (the same signed output digests) instead of running it again
    base = _receipt(out / "bundles" / "base")
    assert "base_reused_from" not in base["predicate"]["environment"]
    for name in by_id:
        mutant = _receipt(out / "bundles" / name)
        reused = mutant["predicate"]["environment"]["base_reused_from"]
        assert reused["bundle"] == str((out / "bundles" / "base").resolve())
        assert _stock_digests(mutant) == _stock_digests(base) != {}
        log = (out / "logs" / f"{name}.log").read_text()
        assert "(base side reused from" in log
        # the base's captured inputs, taken from its bundle rather than built again
        assert "captured inputs for 2 cases taken from" in log
        assert {s["name"]: s["digest"]["sha256"] for s in mutant["subject"]
                if s["name"].startswith("inputs/")} == \
            {s["name"]: s["digest"]["sha256"] for s in base["subject"]
             if s["name"].startswith("inputs/")}
    assert "building captured inputs" in (out / "logs" / "base.log").read_text()
    assert not list(tmp_path.glob(".mut.base-side-*"))  # the kept side's store is gone
    _inputs_from_refuses_other_cases_and_changed_bytes(out / "bundles" / "base", public,
                                                       manifest, tmp_path)
    (out / "mutation.json").write_bytes((out / "mutation.json").read_bytes() + b" ")
    with pytest.raises(HarnessError):
        check_summary(out, public, roots=(repo,))
