"""Receipt schema: package copy == top-level copy, closed stop-reason set, validation."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from harness.core import receipt
from harness.core.errors import MalformedEvidenceError
from harness.core.gate import SIDE_FAILURES
from harness.core.rulesets import ALL_STOP_REASONS

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))


def test_top_level_schema_copy_is_byte_identical():
    package = ROOT / "harness" / "core" / "schemas" / "receipt.schema.json"
    assert (ROOT / "schemas" / "receipt.schema.json").read_bytes() == package.read_bytes()


def test_schema_pins_the_gates_closed_sets():
    defs = receipt.schema()["$defs"]
    assert defs["stop_reason"]["enum"] == list(ALL_STOP_REASONS)
    assert defs["side_status"]["enum"] == ["ok", *SIDE_FAILURES]


def test_schema_is_a_valid_2020_12_schema():
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(receipt.schema())


@pytest.fixture(scope="module")
def statement(tmp_path_factory):
    import synthetic

    return synthetic.write(tmp_path_factory.mktemp("r") / "b").statement


def test_written_statement_validates(statement):
    receipt.validate(statement)
    assert statement["_type"] == receipt.STATEMENT_TYPE
    assert statement["predicateType"] == receipt.PREDICATE_TYPE


@pytest.mark.parametrize("mutate", [
    lambda s: s.update(_type="https://in-toto.io/Statement/v0.1"),
    lambda s: s.update(predicateType="https://example.com/other"),
    lambda s: s["predicate"]["verdict"].update(verdict="MAYBE"),
    lambda s: s["predicate"]["run_stops"].append("not_a_reason"),
    lambda s: s["predicate"]["rows"][0].update(p=0.5),  # floats must be hex strings
    lambda s: s["predicate"]["rows"][0].update(extra=1),
    lambda s: s["subject"][0]["annotations"].update(stored="/etc/passwd"),
    lambda s: s["subject"][0]["annotations"].update(stored="a/../b"),
    lambda s: s["subject"][0].update(name=".hidden"),
    lambda s: s["subject"][0]["digest"].update(sha256="ABC"),
    lambda s: s["subject"][0]["annotations"].update(codec="gzip"),
    lambda s: s["subject"][0]["annotations"].update(base="inputs/x"),
    lambda s: s["predicate"].pop("limits"),
])
def test_schema_refuses(statement, mutate):
    bad = copy.deepcopy(statement)
    mutate(bad)
    with pytest.raises(MalformedEvidenceError, match="schema"):
        receipt.validate(bad)


def test_canonical_is_rfc8785():
    # RFC 8785 sorts keys by UTF-16 code units and writes no whitespace.
    assert receipt.canonical({"b": 1, "a": [True, None, "\u00e9"]}) == (
        b'{"a":[true,null,"\xc3\xa9"],"b":1}')
    with pytest.raises(MalformedEvidenceError):
        receipt.canonical({"x": float("nan")})
