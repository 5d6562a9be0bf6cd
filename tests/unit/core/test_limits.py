"""harness.core.limits: one home for every bound, shared by manifest new, run and verify."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from harness.capture.manifest_new import SideSpec, new_manifest
from harness.cli import main
from harness.core import limits
from harness.core.errors import LimitError, MalformedEvidenceError
from harness.core.keys import load_public_key
from harness.core.manifest import case_batch, load_manifest, parse_manifest
from harness.core.schema import load as load_schema

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

TAMPER = ROOT / "tests" / "assets" / "tamper"
PINS = ROOT / "evidence" / "pins"
PUB = load_public_key(synthetic.SIGNING_PUB)


def _committed_manifests() -> list[Path]:
    bundles = sorted((ROOT / "evidence").glob("bundles/*/manifest.json"))
    bundles += sorted((ROOT / "evidence").glob("sweep/bundles/*/manifest.json"))
    frozen = sorted((ROOT / "evidence" / "manifests").rglob("*.json"))
    return bundles + frozen


def test_every_committed_manifest_is_within_the_ceilings_with_room():
    paths = _committed_manifests()
    assert len(paths) >= 27 + 24
    largest = 0
    for path in paths:
        manifest = parse_manifest(path.read_bytes(), source=str(path))  # check_work passes
        work = sum(case_batch(c) * int(c["vocab"]) for c in manifest.cases)
        largest = max(largest, work)
    # the whole-sampler PR matrix pr-cuda-v4 (903 rows, issue 26) is now the largest; the
    # ceiling was chosen against the H200 gate's 27373056 values and still leaves room
    assert largest == 36922639
    assert limits.MAX_WORK_VALUES >= 1.5 * largest


def test_the_schema_declares_no_batch_beyond_the_ceiling():
    schema = load_schema("manifest.schema.json")
    declared = schema["$defs"]["limits"]["properties"]
    assert declared["max_batch"]["maximum"] == limits.MAX_BATCH
    assert limits.MAX_VOCAB <= declared["max_vocab"]["maximum"]
    assert limits.MAX_CASE_VALUES == limits.MAX_BATCH * limits.MAX_VOCAB


@pytest.mark.parametrize(("cases", "match"), [
    ([("big", 64, 1048576)], "vocab 1048576 is over the ceiling 262144"),
    ([("big", 65, 16)], "batch 65 is over the ceiling 64"),
    ([(f"c{i}", 64, 262144) for i in range(5)], "values in all"),
    ([(f"c{i}", 64, 1) for i in range(257)], "rows in all"),
])
def test_check_work_refuses_each_ceiling(cases, match):
    with pytest.raises(LimitError, match=match):
        limits.check_work(cases)


def test_check_work_accepts_exactly_the_ceiling():
    limits.check_work([(f"c{i}", 64, 262144) for i in range(4)])  # 4 x 2**24 == 2**26


def test_a_manifest_over_the_work_ceiling_is_refused_when_parsed():
    from harness.probes import fixture

    sys.path.insert(0, str(ROOT / "scripts"))
    import make_tamper_fixtures

    raw = fixture.manifest_bytes(make_tamper_fixtures.over_budget_manifest())
    with pytest.raises(LimitError, match="over the ceiling of 67108864"):
        parse_manifest(raw)


def test_the_over_budget_bundle_is_refused_before_any_artifact_but_the_manifest(monkeypatch):
    """The signed manifest alone is read; no input, output, rows or cases.json is decoded."""
    from harness.core import verify, verify_artifacts

    decoded: list[str] = []
    real = verify_artifacts.Artifacts.decode

    def recording(self, name, *args, **kwargs):
        decoded.append(name)
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(verify_artifacts.Artifacts, "decode", recording)
    with pytest.raises(MalformedEvidenceError, match="values in all"):
        verify.verify_bundle(TAMPER / "work_over_budget_resigned", PUB, workers=1)
    assert decoded == ["manifest.json"]


def test_manifest_new_refuses_a_case_verify_would_refuse(tmp_path):
    matrix = json.loads((ROOT / "harness/data/matrices/smoke.json").read_text())
    matrix["limits"].update(max_vocab=1048576, max_batch=64)
    matrix["cases"] = [{"id": "huge", "kind": "ordinary", "seed": 1, "batch": 64,
                        "vocab": 1048576}]
    spec = tmp_path / "huge.json"
    spec.write_text(json.dumps(matrix))
    out = tmp_path / "m.json"
    with pytest.raises(LimitError, match="vocab 1048576 is over the ceiling 262144"):
        new_manifest({"stock": SideSpec(PINS / "vllm-0.30.0.json", "split"),
                      "patched": SideSpec(PINS / "vllm-0.33.0.json", "split")}, str(spec), out,
                     cache=tmp_path / "empty")
    assert not out.exists() and not out.with_name("m.json.sha256").exists()


def test_the_committed_manifests_still_load_frozen():
    for path in sorted((ROOT / "evidence" / "manifests").rglob("*.json")):
        load_manifest(path)


def test_workers_are_clamped_to_the_usable_cpus():
    usable = limits.usable_cpus()
    assert limits.workers(300) == usable
    assert limits.workers(None) == limits.workers(0) == min(usable, limits.DEFAULT_MAX_WORKERS)
    assert limits.workers(1) == 1
    assert limits.default_workers() <= limits.DEFAULT_MAX_WORKERS


def test_verify_with_300_workers_starts_at_most_the_usable_cpus(capsys):
    code = main(["verify", str(TAMPER / "good"), "--pubkey", str(synthetic.SIGNING_PUB),
                 "--workers", "300"])
    assert code == 0
    out = capsys.readouterr().out
    started = re.search(r"\((\d+) process(?:es)?\)", out)
    assert started is not None, out
    assert int(started.group(1)) == limits.usable_cpus() < 300


@pytest.mark.parametrize("verb", ["verify", "exact", "run"])
def test_workers_help_says_it_clamps(verb, capsys):
    assert main([verb, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "clamped to the usable CPUs" in text
    assert f"at most {limits.DEFAULT_MAX_WORKERS}" in text
