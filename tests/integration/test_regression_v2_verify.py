"""The over-keep attack on regression/v1, rebuilt as signed bundles with the project's own
fixture builder and bundle writer: on a row where the base keeps all 100 tokens, a change
that keeps 58 tokens, none of the oracle's 21, has the base's symmetric difference. Judged
by regression/v1 it PASSes (verified, exit 0); judged by regression/v2 it STOPs, and
``verify`` (text and ``--json``) names the base-defect rows, how many the change altered
and the rows it broke by reason."""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import sys
from pathlib import Path
from typing import Any

from harness.capture.bundle_writer import write_bundle
from harness.capture.signing import load_private_key
from harness.cli import main
from harness.core.digest import sha256_hex
from harness.core.judge import CaseBytes, RowSpec, judge_cases
from harness.core.manifest import expected_layout, parse_manifest
from harness.core.names import SIDES
from harness.core.oracle import top_k_top_p
from harness.core.rulesets import rule_set
from harness.probes import fixture

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

PUB = str(synthetic.SIGNING_PUB)
ORDINARY = "ordinary-s1-b3-v100"
SEED = 6  # the fixture draws row 2 of the ordinary case with an oracle of 21 tokens
ROW = 2
NEG = -math.inf


def _floats(raw: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _encode(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _attack(rules: str) -> tuple[Any, dict[str, Any]]:
    """The synthetic bundle content judged by ``rules``, with row 2 of the ordinary case
    replaced: the base (stock) keeps all 100 tokens, the change (patched) keeps 58 tokens
    outside the oracle's set; rows, verdict, evidence hashes and report made again from it."""
    manifest = {**synthetic.MANIFEST_V3, "name": f"synthetic-overkeep-{rules.replace('/', '-')}",
                "rules": rules}
    bundle = fixture.content(manifest, sources=synthetic.SOURCES_V3, seed=SEED)
    layout = expected_layout(parse_manifest(bundle.manifest))
    case = next(c for c in layout if c.id == ORDINARY)
    logits = _floats(bundle.inputs[case.logits_path])
    vocab = case.vocab
    row = logits[ROW * vocab:(ROW + 1) * vocab]
    p = _floats(bundle.inputs[case.p_path])[ROW]
    oracle = top_k_top_p(row, p32=p, k=None)
    assert oracle.count == 21
    order = sorted(range(vocab), key=lambda i: (-row[i], i))
    change = set(order[21:79])
    assert len(change) == 58 and not change & set(oracle.kept)
    outputs = {side: dict(bundle.outputs[side]) for side in SIDES}
    for side, kept in (("stock", set(range(vocab))), ("patched", change)):
        raw = outputs[side][ORDINARY]
        assert isinstance(raw, bytes)
        values = _floats(raw)
        values[ROW * vocab:(ROW + 1) * vocab] = [v if i in kept else NEG
                                                 for i, v in enumerate(row)]
        outputs[side][ORDINARY] = _encode(values)
    cases = [CaseBytes(c.id, c.vocab, tuple(RowSpec(r.judge, r.forced_id, r.label)
                                            for r in c.rows),
                       bundle.inputs[c.logits_path], bundle.inputs[c.p_path],
                       outputs["stock"][c.id], outputs["patched"][c.id], split_path=True,
                       k=bundle.inputs.get(c.k_path) if c.k_path else None)
             for c in layout]
    rows = judge_cases(cases, rules=rules)
    evidence = {}
    for side in SIDES:
        record = json.loads(bundle.evidence[side])
        for entry in record["cases"]:
            entry["output_sha256"] = sha256_hex(outputs[side][entry["id"]])
        evidence[side] = (json.dumps(record, indent=2) + "\n").encode()
    changed = dataclasses.replace(bundle, outputs=outputs, evidence=evidence, rows=rows,
                                  verdict=rule_set(rules).verdict(rows, []))
    return fixture.with_report(changed, manifest), manifest


def _write(dest: Path, rules: str) -> Path:
    content, manifest = _attack(rules)
    write_bundle(dest, content, load_private_key(synthetic.SIGNING_KEY),
                 max_bytes=manifest["limits"]["max_bundle_bytes"])
    return dest


def test_the_attack_passes_regression_v1_verified(tmp_path, capsys):
    bundle = _write(tmp_path / "v1", "regression/v1")
    assert main(["verify", str(bundle), "--pubkey", PUB, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["verdict"] == "PASS" and found["rules"] == "regression/v1"
    assert found["base_defects"]["rows"] == 5  # 4 forced rows (stock masks) and the attack
    assert "base_defect_rows" not in found  # regression/v1's verdict has none


def test_the_attack_stops_regression_v2_and_verify_json_names_the_rows(tmp_path, capsys):
    bundle = _write(tmp_path / "v2", "regression/v2")
    assert main(["verify", str(bundle), "--pubkey", PUB, "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["verified"] is True and found["verdict"] == "STOP"
    assert found["rules"] == "regression/v2"
    attack = f"{ORDINARY}[{ROW}]"
    assert found["reasons"] == ["lost_oracle_token", "mass_dropped_growth",
                                "missing_oracle_growth", "new_fault"]
    assert found["broken_rows"] == {reason: [attack] for reason in found["reasons"]}
    defect_rows = {r["row"]: r for r in found["base_defect_rows"]}
    assert defect_rows[attack] == {"row": attack, "faults": ["count_bound"], "altered": True}
    assert [r["faults"] for r in found["base_defect_rows"] if r["row"] != attack] == \
        [["forced_failure"]] * 4  # the forced rows the base masks; the change fixes them
    assert found["base_defects_altered"] == 5
    assert found["base_defects"] == {"rows": 5, "reasons": {"forced_failure": 4,
                                                            "count_bound": 1}}
    report = (bundle / "report.md").read_text()
    assert "Passing proves only that the forced masking defect is fixed" not in report
    assert "Stock failures are the reproduced defect" not in report
    assert "## Rows the change broke" in report
    assert "The change altered 5 of them" in report


def test_verify_text_lists_the_base_defect_rows_and_the_broken_rows(tmp_path, capsys):
    bundle = _write(tmp_path / "v2", "regression/v2")
    assert main(["verify", str(bundle), "--pubkey", PUB]) == 1
    out = capsys.readouterr().out
    assert "  base defects: 5 of 7 rows the base already fails (reasons: forced_failure x4, " \
           "count_bound x1); the change altered 5 of them" in out
    assert f"    {ORDINARY}[{ROW}]: count_bound (altered)" in out
    assert "  rows the change broke: by reason" in out
    assert f"    new_fault (1): {ORDINARY}[{ROW}]" in out


def test_verify_text_lists_every_altered_base_defect_and_caps_the_untouched_ones():
    from harness.commands.verify import _regression_lines

    rows = [{"row": f"c[{i}]", "faults": ["count_bound"], "altered": i in (3, 30)}
            for i in range(40)]
    verdict = {"rows": 100, "base_defects": {"rows": 40, "reasons": {"count_bound": 40}},
               "base_defect_rows": rows, "base_defects_altered": 2, "broken_rows": {}}
    lines = _regression_lines(verdict)
    assert "    c[30]: count_bound (altered)" in lines
    assert "    c[3]: count_bound (altered)" in lines
    listed = [line for line in lines if line.startswith("    c[")]
    assert len(listed) == 12  # both altered rows, and the first 10 the change left alone
    assert lines[-2].startswith("    ... and 28 more base-defect rows")
