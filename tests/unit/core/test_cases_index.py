"""harness.core.cases_index: render, parse, validate and bind cases.json to a manifest."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import cases_index as ci
from harness.core import manifest as mf
from harness.core.errors import BindingMismatchError, HarnessError, MalformedEvidenceError

ROOT = Path(__file__).resolve().parents[3]
SMOKE = ROOT / "evidence" / "manifests" / "smoke-interpreter.json"


@pytest.fixture(scope="module")
def smoke() -> mf.Manifest:
    return mf.parse_manifest(SMOKE.read_bytes())


def test_schema_is_valid_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(ci.cases_schema())


def test_render_parse_round_trip_and_bind(smoke: mf.Manifest) -> None:
    layout = mf.expected_layout(smoke)
    raw = ci.render_cases_index(layout)
    assert ci.parse_cases_index(raw) == layout
    ci.check_against_manifest(ci.parse_cases_index(raw), smoke)
    document = json.loads(raw)
    assert document["schema"] == "topp-gate/cases/v1"
    first = document["cases"][0]
    assert list(first) == ["id", "kind", "batch", "vocab", "logits", "p", "rows"]
    assert first["logits"] == "inputs/forced-v32000.logits.f32"
    assert first["rows"][1] == {"judge": "forced", "forced_id": 16001,
                                "label": "value=1e30 p=0.9 id=16001"}
    assert raw.endswith(b"\n") and raw == ci.render_cases_index(layout)


def _doc(smoke: mf.Manifest) -> dict:
    return json.loads(ci.render_cases_index(mf.expected_layout(smoke)))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["cases"][0]["rows"].pop(),  # rows != batch
        lambda d: d["cases"][0].update(logits="inputs/other.logits.f32"),
        lambda d: d["cases"][0].update(logits="../etc/passwd"),
        lambda d: d["cases"][0]["rows"][0].update(judge="ordinary"),
        lambda d: d["cases"][2]["rows"][0].update(forced_id=3),
        lambda d: d["cases"][0]["rows"][0].update(forced_id=32000),
        lambda d: d["cases"].append(d["cases"][0]),
        lambda d: d["cases"][0].update(batch=65),
        lambda d: d.update(schema="topp-gate/cases/v0"),
    ],
    ids=["rows", "path", "escape", "judge", "forced-id-ordinary", "forced-id-range", "dup",
         "batch", "schema"],
)
def test_malformed_index_refused(smoke: mf.Manifest, mutate) -> None:
    document = _doc(smoke)
    mutate(document)
    with pytest.raises(MalformedEvidenceError) as info:
        ci.parse_cases_index(json.dumps(document).encode())
    assert info.value.exit_code == 4 and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["cases"].reverse(),
        lambda d: d["cases"].pop(),
        lambda d: d["cases"][3]["rows"][0].update(label="seed=1234 row=9"),
        lambda d: d["cases"][0]["rows"][0].update(forced_id=5),
        lambda d: d["cases"][4].update(vocab=4095),
    ],
    ids=["order", "missing", "label", "forced-id", "vocab"],
)
def test_index_not_matching_manifest_refused(smoke: mf.Manifest, mutate) -> None:
    document = _doc(smoke)
    mutate(document)
    layout = ci.parse_cases_index(json.dumps(document).encode())
    with pytest.raises(BindingMismatchError):
        ci.check_against_manifest(layout, smoke)


@settings(max_examples=200)
@given(st.data())
def test_mutated_index_only_raises_our_errors(smoke: mf.Manifest, data: st.DataObject) -> None:
    raw = bytearray(ci.render_cases_index(mf.expected_layout(smoke)))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index] = data.draw(st.integers(0, 255))
    try:
        layout = ci.parse_cases_index(bytes(raw))
        ci.check_against_manifest(layout, smoke)
    except HarnessError:
        pass
