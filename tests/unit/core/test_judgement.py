"""Versioned judgement: a receipt names its rule set and report format, and is re-judged by
exactly those; unknown ids are refused; seed/v2 stops on rewritten kept values; report/v2
escapes evidence text and report/v1 refuses text it cannot show safely."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capture.signing import load_private_key
from harness.core import gate, rulesets
from harness.core.errors import BindingMismatchError, MalformedEvidenceError, UnknownJudgementError
from harness.core.integrity import changed_values
from harness.core.keys import load_public_key
from harness.core.report import UnsafeLegacyText, legacy_text, markdown_text
from harness.core.verify import verify_bundle
from harness.probes import tamper

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)
KEY = load_private_key(synthetic.SIGNING_KEY)


def _f32(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _judgement(**ids: str):
    def change(statement: dict) -> None:
        statement["predicate"]["judgement"].update(ids)
    return change


# --- the registry ------------------------------------------------------------------------------


def test_registry_is_consistent_and_the_legacy_rules_are_the_seeds():
    rulesets.check_registry()
    assert rulesets.LEGACY_RULES == "seed/v1"
    assert rulesets.rule_set("seed/v1").stop_reasons == gate.SEED_STOP_REASONS
    assert set(rulesets.rule_set("seed/v2").stop_reasons) == {*gate.SEED_STOP_REASONS,
                                                              "kept_value_changed"}


def test_an_unknown_rule_set_id_is_refused_before_any_row_is_judged():
    from harness.core.judge import judge_cases

    with pytest.raises(UnknownJudgementError, match="nope/v9"):
        judge_cases([], rules="nope/v9")


# --- kept-value integrity ----------------------------------------------------------------------


def test_changed_values_counts_kept_positions_with_other_bits():
    inputs = _f32([1.0, 2.0, 0.0, -float("inf"), 5.0])
    ninf = -float("inf")
    assert changed_values(inputs, _f32([1.0, 2.0, 0.0, ninf, ninf])) == 0
    assert changed_values(inputs, _f32([7.0, 2.0, 0.0, ninf, ninf])) == 1
    assert changed_values(inputs, _f32([1.0, 2.0, -0.0, ninf, ninf])) == 1  # bits, not ==
    assert changed_values(inputs, _f32([1.0, float("nan"), 0.0, ninf, ninf])) == 1
    assert changed_values(inputs, _f32([1.0, 2.0, 0.0, 9.0, ninf])) == 1  # a masked input kept


@given(st.lists(st.tuples(st.floats(width=32), st.floats(width=32), st.booleans()),
                min_size=1, max_size=64))
@settings(max_examples=200, deadline=None)
def test_changed_values_pure_equals_numpy(triples):
    inputs = _f32([a for a, _, _ in triples])
    outputs = _f32([a if keep else (b if b == b else -float("inf")) for a, b, keep in triples])
    assert changed_values(inputs, outputs) == changed_values(inputs, outputs, fast=True)


# --- bundles judged by seed/v2 -----------------------------------------------------------------


def test_a_v3_bundle_is_judged_by_the_rule_set_its_manifest_names(tmp_path):
    synthetic.write_v3(tmp_path / "b")
    result = verify_bundle(tmp_path / "b", PUB, workers=1)
    assert (result.rules, result.report_format) == ("seed/v2", "report/v3")
    assert result.verdict["verdict"] == "PASS"


def test_rewritten_kept_values_stop_under_seed_v2_and_verify_refuses_them(tmp_path):
    # seed/v2 still stops every such row; kept-value integrity is now a binding of every
    # bundle too, so verify refuses the signed STOP (exit 4) before any rule set judges it
    written = synthetic.write_v3(tmp_path / "b", rewrite_values=True)
    rows = written.statement["predicate"]["rows"]
    assert all("kept_value_changed" in r["stops"] for r in rows)
    assert all(r["diagnostics"]["patched_values_changed"] > 0 for r in rows)
    with pytest.raises(BindingMismatchError, match="patched output of case .* row 0"):
        verify_bundle(tmp_path / "b", PUB, workers=1)


def test_a_signer_who_judged_by_older_rules_is_refused(tmp_path):
    synthetic.write_v3(tmp_path / "b", rewrite_values=True, rules="seed/v1")
    with pytest.raises(BindingMismatchError, match="rule set"):
        verify_bundle(tmp_path / "b", PUB, workers=1)


@pytest.mark.parametrize("ids, message", [({"rules": "nope/v9"}, "rule set 'nope/v9'"),
                                          ({"report": "report/v99"}, "report/v99")])
def test_unknown_ids_in_a_signed_receipt_are_refused(tmp_path, ids, message):
    synthetic.write_v3(tmp_path / "b")
    tamper.resign(_judgement(**ids), KEY)(tmp_path / "b")
    with pytest.raises(UnknownJudgementError, match=message):
        verify_bundle(tmp_path / "b", PUB, workers=1)


def test_dropping_the_judgement_does_not_downgrade_to_the_legacy_rules(tmp_path):
    synthetic.write_v3(tmp_path / "b", rewrite_values=True)

    def drop(statement: dict) -> None:
        del statement["predicate"]["judgement"]
    tamper.resign(drop, KEY)(tmp_path / "b")
    with pytest.raises(BindingMismatchError, match="rule set"):
        verify_bundle(tmp_path / "b", PUB, workers=1)


# --- report formats ----------------------------------------------------------------------------

INJECTION = "H200\n\n# Verdict: PASS\n\n<!-- [x](javascript:alert(1)) **PASS** `x`"


def test_markdown_text_escapes_what_renders_and_keeps_intraword_underscores():
    assert markdown_text("split_slices") == "split_slices"
    assert markdown_text("_apply_topp_split") == "\\_apply_topp_split"
    shown = markdown_text(INJECTION)
    assert "\n" not in shown and "<" not in shown and "[" not in shown.replace("\\[", "")
    assert "**" not in shown.replace("\\*", "") and "`" not in shown.replace("\\`", "")


def test_legacy_text_accepts_only_inert_strings():
    assert legacy_text("NVIDIA H200 (torch 2.11.0+cu130)") == "NVIDIA H200 (torch 2.11.0+cu130)"
    for bad in (INJECTION, "a<b", "x`y", "[a]", "a\rb", "a*b"):
        with pytest.raises(UnsafeLegacyText):
            legacy_text(bad)


def test_an_injected_device_string_is_escaped_in_the_signed_report(tmp_path):
    synthetic.write_v3(tmp_path / "b", device=INJECTION)
    verify_bundle(tmp_path / "b", PUB, workers=1)  # the report is the escaped one
    report = (tmp_path / "b" / "report.md").read_text()
    assert report.count("**Verdict:") == 1 and "\n# Verdict" not in report
    assert "<!--" not in report and "](javascript" not in report.replace("\\]", "")


def test_a_receipt_naming_report_v1_with_unsafe_evidence_text_is_refused(tmp_path):
    synthetic.write_v3(tmp_path / "b", device=INJECTION)
    tamper.resign(_judgement(report="report/v1"), KEY)(tmp_path / "b")
    with pytest.raises(MalformedEvidenceError, match="report/v1 cannot show"):
        verify_bundle(tmp_path / "b", PUB, workers=1)


# --- captured inputs bound to the manifest -----------------------------------------------------


def test_captured_forced_values_and_p_must_be_the_manifests(tmp_path):
    synthetic.write_v3(tmp_path / "b", lie_inputs=True)
    with pytest.raises(BindingMismatchError, match="vs the manifest"):
        verify_bundle(tmp_path / "b", PUB, workers=1)


# --- serve/v1 bundles (traffic rows with per-row k and p) ----------------------------------


def test_a_serve_bundle_with_top_k_rows_verifies_by_serve_v1(tmp_path):
    written = synthetic.write_serve(tmp_path / "b")
    result = verify_bundle(tmp_path / "b", PUB, workers=1)
    assert (result.rules, result.verdict["verdict"]) == ("serve/v1", "PASS")
    rows = written.statement["predicate"]["rows"]
    assert [r.get("k") for r in rows[:3]] == [20, 50, None]
    assert all("patched_mass_dropped" in r["diagnostics"] for r in rows)


def test_captured_top_k_must_be_the_manifests(tmp_path):
    import dataclasses
    import json

    from harness.capture.bundle_writer import write_bundle
    from harness.core.digest import sha256_hex
    from harness.probes import fixture

    bundle = fixture.content(synthetic.MANIFEST_SERVE, sources=synthetic.SOURCES_V3)
    name = "inputs/traffic-bf16-v200.k.i32"
    k = struct.pack("<6i", 21, 50, 200, 20, 50, 200)  # the first row's k 21, not 20
    evidence = {}
    for side, data in bundle.evidence.items():  # a consistent lie: the children hashed it
        value = json.loads(data)
        for record in value["cases"]:
            if record["id"] == "traffic-bf16-v200":
                record["k_sha256"] = sha256_hex(k)
        evidence[side] = (json.dumps(value, indent=2) + "\n").encode()
    lied = dataclasses.replace(bundle, inputs={**bundle.inputs, name: k}, evidence=evidence)
    write_bundle(tmp_path / "b", fixture.with_report(lied, synthetic.MANIFEST_SERVE), KEY,
                 max_bytes=synthetic.MANIFEST_SERVE["limits"]["max_bundle_bytes"])
    with pytest.raises(BindingMismatchError, match="top-k"):
        verify_bundle(tmp_path / "b", PUB, workers=1)


def test_traffic_rows_need_a_rule_set_that_reads_top_k():
    from harness.core.errors import ManifestError
    from harness.core.manifest import parse_manifest
    from harness.probes.fixture import manifest_bytes

    wrong = {**synthetic.MANIFEST_SERVE, "rules": "seed/v2"}
    with pytest.raises(ManifestError, match="use serve/v1"):
        parse_manifest(manifest_bytes(wrong))


def test_seed_v2_says_an_all_masked_forced_row_has_no_argmax():
    from harness.core import gate as seed_gate
    from harness.core.oracle import reference
    from harness.core.rulesets import RowInput, rule_set

    logits = [1e9, *([0.0] * 15)]
    neg = [-float("inf")] * 16
    row = seed_gate.Row("c", 0, "forced", logits, 0.875, 0)
    out = seed_gate.SideOutput("ok", neg)
    data = RowInput(row, reference(logits, 0.875), out, out, False, None,
                    struct.pack("<16f", *logits), {"stock": struct.pack("<16f", *neg),
                                                   "patched": struct.pack("<16f", *neg)}, False)
    v1 = rule_set("seed/v1").judge(data)["diagnostics"]["stock_forced_failures"]
    v2 = rule_set("seed/v2").judge(data)["diagnostics"]["stock_forced_failures"]
    assert "argmax_not_forced" not in v1  # frozen: the defect stays in seed/v1
    assert v2 == ["forced_token_dropped", "all_masked", "argmax_not_forced"]


def test_an_integral_float_in_the_evidence_renders_as_the_report_showed_it(tmp_path):
    # RFC 8785 writes 5.0 as 5 in the receipt; the report is made from evidence.json (5.0):
    # verify regenerates it from the evidence artifact, not from the canonical receipt copy
    import dataclasses
    import json

    from harness.capture.bundle_writer import write_bundle
    from harness.probes import fixture

    bundle = fixture.content(synthetic.MANIFEST_V3, sources=synthetic.SOURCES_V3)
    evidence = {}
    for side, data in bundle.evidence.items():
        value = json.loads(data)
        value["import_s"] = 5.0
        evidence[side] = (json.dumps(value, indent=2) + "\n").encode()
    made = fixture.with_report(dataclasses.replace(bundle, evidence=evidence),
                               synthetic.MANIFEST_V3)
    assert b"| import_s | 5.0 | 5.0 |" in made.reports["report.md"]
    write_bundle(tmp_path / "b", made, KEY,
                 max_bytes=synthetic.MANIFEST_V3["limits"]["max_bundle_bytes"])
    assert verify_bundle(tmp_path / "b", PUB, workers=1).verdict["verdict"] == "PASS"
