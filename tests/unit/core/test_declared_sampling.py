"""A manifest's declared draws (``sampling``: draws per row, Philox seed and offset; issue 39
item 1): the schema takes them in a version 3 manifest only, with integer values in range;
the cases index carries them to the kernel child; and ``verify`` refuses a signed bundle
whose sampling evidence records other values than the manifest declares, or a row whose
counts do not sum to the declared draws per row. A manifest without them verifies as
before (nothing read, nothing checked)."""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capture.bundle_writer import write_bundle
from harness.capture.signing import load_private_key
from harness.core.cases_index import check_index, render_cases_index
from harness.core.errors import BindingMismatchError, ManifestError
from harness.core.keys import load_public_key
from harness.core.manifest import expected_layout, parse_manifest
from harness.core.verify import verify_bundle
from harness.probes import fixture

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)
DECLARED = synthetic.MANIFEST_SAMPLING["sampling"]
U64 = (1 << 64) - 1


def _raw(manifest: dict) -> bytes:
    return fixture.manifest_bytes(manifest)


def _with(sampling) -> dict:
    manifest = copy.deepcopy(synthetic.MANIFEST_SAMPLING)
    manifest["sampling"] = sampling
    return manifest


# --- the schema -----------------------------------------------------------------------------


def test_a_version_3_manifest_declares_its_draws_and_one_without_declares_none():
    assert parse_manifest(_raw(synthetic.MANIFEST_SAMPLING)).sampling == DECLARED
    assert parse_manifest(_raw(synthetic.MANIFEST_V3)).sampling is None
    extremes = {"draws_per_row": 1, "seed": U64, "offset": U64}
    assert parse_manifest(_raw(_with(extremes))).sampling == extremes


@pytest.mark.parametrize("sampling, where", [
    ({**DECLARED, "draws_per_row": 0}, "sampling/draws_per_row"),
    ({**DECLARED, "seed": -1}, "sampling/seed"),
    ({**DECLARED, "seed": U64 + 1}, "sampling/seed"),
    ({**DECLARED, "offset": -1}, "sampling/offset"),
    ({**DECLARED, "seed": True}, "sampling/seed"),
    ({**DECLARED, "seed": "20261201"}, "sampling/seed"),
    ({"draws_per_row": 64, "seed": 1}, "sampling"),
    ({**DECLARED, "salt": 1}, "sampling"),
])
def test_invalid_draws_are_refused_in_one_line(sampling, where):
    with pytest.raises(ManifestError) as err:
        parse_manifest(_raw(_with(sampling)))
    assert "\n" not in str(err.value) and f"at {where}" in str(err.value)


def test_versions_1_and_2_have_no_such_field():
    for manifest in (synthetic.MANIFEST, {**synthetic.MANIFEST_V3, "schema":
                                          "topp-gate/manifest/v2"}):
        body = {k: v for k, v in manifest.items() if k != "rules"}
        with pytest.raises(ManifestError, match="schema violation"):
            parse_manifest(_raw({**body, "sampling": DECLARED}))


@settings(max_examples=60, deadline=None)
@given(draws=st.integers(-3, 5000), seed=st.integers(-3, U64 + 3),
       offset=st.integers(-3, U64 + 3))
def test_exactly_the_integers_philox_takes_are_accepted(draws, seed, offset):
    sampling = {"draws_per_row": draws, "seed": seed, "offset": offset}
    valid = 1 <= draws <= 4096 and 0 <= seed <= U64 and 0 <= offset <= U64
    try:
        assert parse_manifest(_raw(_with(sampling))).sampling == sampling
        assert valid
    except ManifestError:
        assert not valid


# --- the cases index ------------------------------------------------------------------------


def test_the_cases_index_carries_the_declared_draws_and_is_unchanged_without_them():
    declaring = parse_manifest(_raw(synthetic.MANIFEST_SAMPLING))
    layout = expected_layout(declaring)
    raw = render_cases_index(layout, declaring.sampling)
    assert json.loads(raw)["sampling"] == DECLARED
    assert check_index(raw, declaring) == layout
    assert b"sampling\": {" not in render_cases_index(layout)  # the bytes of every index before
    with pytest.raises(BindingMismatchError, match="cases.json sampling"):
        check_index(render_cases_index(layout), declaring)
    other = {**DECLARED, "seed": 7}
    with pytest.raises(BindingMismatchError, match="cases.json sampling"):
        check_index(render_cases_index(layout, other), declaring)


# --- verify ---------------------------------------------------------------------------------


def _bundle(dest: Path, edit=None) -> Path:
    """A signed synthetic sampler bundle of :data:`synthetic.MANIFEST_SAMPLING`; ``edit``
    changes the patched side's kernel evidence (a dict) before it is signed."""
    content = fixture.content(synthetic.MANIFEST_SAMPLING, sources=synthetic.SOURCES_V3)
    if edit is not None:
        evidence = json.loads(content.evidence["patched"])
        edit(evidence)
        content = fixture.with_report(dataclasses.replace(content, evidence={
            **content.evidence, "patched": (json.dumps(evidence, indent=2) + "\n").encode()}),
            synthetic.MANIFEST_SAMPLING)
    return write_bundle(dest, content, load_private_key(synthetic.SIGNING_KEY),
                        max_bytes=synthetic.MANIFEST_SAMPLING["limits"]["max_bundle_bytes"]).path


def _proof(evidence: dict, case: int = 0) -> dict:
    return evidence["cases"][case]["top-k-top-p-sampling"]


def test_a_bundle_that_drew_as_declared_verifies(tmp_path):
    verified = verify_bundle(_bundle(tmp_path / "b"), PUB)
    assert verified.verdict["verdict"] == "PASS" and verified.rules == "regression-support/v2"
    assert verified.rows == 8 and verified.stop_rows == {}
    assert verified.sampling == DECLARED and verified.to_json()["sampling"] == DECLARED


def test_verify_prints_the_declared_draws_and_json_names_them(tmp_path, capsys):
    from harness.cli import main

    bundle = _bundle(tmp_path / "b")
    assert main(["verify", str(bundle), "--pubkey", str(synthetic.SIGNING_PUB)]) == 0
    assert ("  draws: 64 a row for each output reading it, seed 20261201, offset 0, as the "
            "manifest declares") in capsys.readouterr().out
    assert main(["verify", str(bundle), "--pubkey", str(synthetic.SIGNING_PUB), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sampling"] == DECLARED


@pytest.mark.parametrize("field, value", [("seed", 7), ("draws_per_row", 32), ("offset", 1),
                                          ("seed", None), ("seed", "20261201")])
def test_evidence_that_drew_with_other_values_is_refused(tmp_path, field, value):
    def edit(evidence):
        if value is None:
            del _proof(evidence, 1)[field]
        else:
            _proof(evidence, 1)[field] = value

    with pytest.raises(BindingMismatchError) as err:
        verify_bundle(_bundle(tmp_path / "b", edit), PUB)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"binding_mismatch: patched kernel evidence of case sample-v128: "
                           f"{field}: the manifest's sampling says {DECLARED[field]}, found")


def test_a_row_whose_counts_do_not_sum_to_the_declared_draws_is_refused(tmp_path):
    def edit(evidence):
        evidence["cases"][0]["draws"][2][0][1] += 1  # 65 draws on row 2

    with pytest.raises(BindingMismatchError,
                       match=r"case sample-bf16-v200 row 2: draws: .* says 64 in all, found 65"):
        verify_bundle(_bundle(tmp_path / "b", edit), PUB)

    def short(evidence):
        evidence["cases"][1]["draws"].pop()

    with pytest.raises(BindingMismatchError, match="sample-v128: draws: .* one list per row"):
        verify_bundle(_bundle(tmp_path / "c", short), PUB)


def test_a_record_that_drops_its_draws_but_keeps_the_seed_is_refused(tmp_path):
    def edit(evidence):
        del evidence["cases"][0]["draws"]

    with pytest.raises(BindingMismatchError, match="sample-bf16-v200: draws"):
        verify_bundle(_bundle(tmp_path / "b", edit), PUB)


def test_a_manifest_without_declared_draws_checks_none(tmp_path):
    """Before pr-flashinfer-v3 the draws were the family's constants, recorded but never
    checked: a bundle of a manifest that declares none verifies whatever seed it records."""
    manifest = {k: v for k, v in synthetic.MANIFEST_SAMPLING.items() if k != "sampling"}
    content = fixture.content(manifest, sources=synthetic.SOURCES_V3)
    assert b"sampling\": {" not in content.cases
    bundle = write_bundle(tmp_path / "b", content, load_private_key(synthetic.SIGNING_KEY),
                          max_bytes=manifest["limits"]["max_bundle_bytes"]).path
    verified = verify_bundle(bundle, PUB)
    assert verified.verdict["verdict"] == "PASS" and verified.sampling is None
    assert verified.to_json()["sampling"] is None


# --- a case with an index array (FlashInfer's ``indices``) -----------------------------------

#: MANIFEST_SAMPLING with a case whose outputs read row 0 twice, rows 1 and 2 once and row 3
#: never, as ``pr-flashinfer-v3``'s indices cases do (the H100 run of 2026-12-05 found every
#: such bundle refused: 128 draws on row 0 were held to 64)
INDEXED = {**synthetic.MANIFEST_SAMPLING, "cases": [
    *synthetic.MANIFEST_SAMPLING["cases"],
    {"id": "sample-indices-v64", "kind": "traffic", "vocab": 64, "batch": 4, "seed": 5,
     "rows": {"round": "bf16"}, "sampling": [{"k": 4, "p": "0.9"}],
     "call": {"indices": [0, 2, 0, 1], "indices_dtype": "int64"}}]}


def _indexed_bundle(dest: Path, edit=None) -> Path:
    content = fixture.content(INDEXED, sources=synthetic.SOURCES_V3)
    if edit is not None:
        evidence = json.loads(content.evidence["patched"])
        edit(evidence["cases"][-1]["draws"])
        content = fixture.with_report(dataclasses.replace(content, evidence={
            **content.evidence, "patched": (json.dumps(evidence, indent=2) + "\n").encode()}),
            INDEXED)
    return write_bundle(dest, content, load_private_key(synthetic.SIGNING_KEY),
                        max_bytes=INDEXED["limits"]["max_bundle_bytes"]).path


def test_a_row_read_by_several_outputs_holds_the_draws_of_each(tmp_path):
    content = fixture.content(INDEXED, sources=synthetic.SOURCES_V3)
    for side in ("stock", "patched"):
        draws = json.loads(content.evidence[side])["cases"][-1]["draws"]
        assert [sum(c for _, c in row) for row in draws] == [128, 64, 64, 0]
    assert verify_bundle(_indexed_bundle(tmp_path / "b"), PUB).verdict["verdict"] == "PASS"


@pytest.mark.parametrize("row, delta, says, found", [
    (0, -64, r"row 0: draws: .* says 128 in all \(read by 2 outputs\), found 64", None),
    (1, 1, r"row 1: draws: .* says 64 in all \(read by 1 output\), found 65", None),
    (3, 0, r"row 3: draws: .* says 0 in all \(read by 0 outputs\), found 1", [[0, 1]]),
])
def test_indexed_draws_of_another_count_are_refused(tmp_path, row, delta, says, found):
    def edit(draws):
        if found is not None:
            draws[row] = found
        else:
            draws[row][0][1] += delta

    with pytest.raises(BindingMismatchError, match="sample-indices-v64 " + says):
        verify_bundle(_indexed_bundle(tmp_path / "b", edit), PUB)
