"""Kept-value integrity is a binding of every bundle, not a rule (issue 27 item 2), and
``verify --require-rules`` (issue 27): on real, signed synthetic bundles.

A bundle whose manifest is version 1 is judged by ``seed/v1``, which never compares values:
before the binding, an output that keeps the oracle's tokens but writes 7.0 for every kept
value verified as PASS. Now verify refuses it (exit 4), naming the side, case and row; and
``run`` never signs such an output as "ok".
"""

from __future__ import annotations

import json
import math
import random
import struct
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import BindingMismatchError, ShapeError, UsageError
from harness.core.integrity import NEG_INF_BITS, changed_values, first_changed_row
from harness.core.keys import load_public_key
from harness.core.rulesets import RULE_SETS
from harness.core.verify import verify_bundle

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)
NEG = struct.pack("<I", NEG_INF_BITS)


def _f32(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory) -> Path:
    """A seed/v1-judged bundle (manifest version 1) whose patched side writes 7.0 for every
    kept value, its rows judged from those bytes and signed with the test key."""
    from harness.capture.bundle_writer import write_bundle
    from harness.capture.signing import load_private_key
    from harness.probes import fixture

    content = fixture.content(synthetic.MANIFEST, rewrite_values=True)
    return write_bundle(tmp_path_factory.mktemp("k") / "rewritten", content,
                        load_private_key(synthetic.SIGNING_KEY),
                        max_bytes=synthetic.MANIFEST["limits"]["max_bundle_bytes"]).path


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    return synthetic.write(tmp_path_factory.mktemp("k") / "good").path


# --- the binding ----------------------------------------------------------------------------


def test_the_rewritten_bundle_is_judged_by_seed_v1_into_a_pass(rewritten):
    receipt = json.loads((rewritten / "receipt.json").read_text())
    assert receipt["predicate"]["judgement"]["rules"] == "seed/v1"  # compares no value
    assert receipt["predicate"]["verdict"]["verdict"] == "PASS"
    assert json.loads((rewritten / "manifest.json").read_text())["schema"] \
        == "topp-gate/manifest/v1"


@pytest.mark.parametrize("fast", [False, True])
def test_verify_refuses_rewritten_kept_values_whatever_the_rule_set(rewritten, fast):
    with pytest.raises(BindingMismatchError) as info:
        verify_bundle(rewritten, PUB, workers=1, fast=fast)
    message = str(info.value)
    assert "patched output of case forced-v64 row 0" in message
    assert "kept-value integrity" in message and "\n" not in message


def test_the_cli_exits_4_with_one_line(rewritten, capsys):
    assert main(["verify", str(rewritten), "--pubkey", str(synthetic.SIGNING_PUB)]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "patched output of case forced-v64 row 0" in err[0]


def test_a_masked_copy_still_verifies(good):
    assert verify_bundle(good, PUB, workers=1).verdict["verdict"] == "PASS"


def _rows(rnd: random.Random, batch: int, vocab: int) -> tuple[bytes, bytes]:
    inputs = [rnd.gauss(0, 3) for _ in range(batch * vocab)]
    inputs[3] = -math.inf  # an input -inf kept as -inf is no change
    outputs = [v if rnd.random() < 0.5 else -math.inf for v in inputs]
    return _f32(inputs), _f32(outputs)


def test_first_changed_row_pure_equals_numpy_and_changed_values():
    rnd = random.Random(27)  # noqa: S311 - test data
    batch, vocab = 6, 50
    inputs, masked = _rows(rnd, batch, vocab)
    assert first_changed_row(inputs, masked, vocab) is None
    assert first_changed_row(inputs, masked, vocab, fast=True) is None
    width = 4 * vocab
    for value in (7.0, math.nan, -0.0, math.inf):
        for row in (0, 4):
            out = bytearray(masked)
            for pos in (row * width + 8, row * width + 4 * 17, (batch - 1) * width):
                out[pos:pos + 4] = _f32([value])
            out = bytes(out)
            pure = first_changed_row(inputs, out, vocab)
            assert pure == first_changed_row(inputs, out, vocab, fast=True)
            assert pure is not None and pure[0] == row
            start = row * width
            assert pure[1] == changed_values(inputs[start:start + width],
                                             out[start:start + width])


def test_minus_inf_everywhere_and_nan_inputs():
    inputs = _f32([1.0, math.nan, 3.0])
    assert first_changed_row(inputs, NEG * 3, 3) is None
    assert first_changed_row(inputs, inputs, 3) is None  # a copy, bits and all
    assert first_changed_row(inputs, _f32([1.0, math.nan, 3.0])[:4] + NEG + NEG, 3) is None
    with pytest.raises(ShapeError):
        first_changed_row(inputs, inputs[:8], 3)


def test_run_never_signs_a_rewritten_output_as_ok():
    from harness.capture.run import _masked_copy

    inputs = _f32([1.0, 2.0, 3.0, 4.0])
    masked = _f32([1.0, -math.inf, 3.0, -math.inf])
    assert _masked_copy(masked, inputs, 2) == masked
    assert _masked_copy(_f32([1.0, -math.inf, 3.0, 7.0]), inputs, 2) == "unreadable_output"
    assert _masked_copy(_f32([math.nan, -math.inf, 3.0, 4.0]), inputs, 2) \
        == "unreadable_output"
    assert _masked_copy("timeout", inputs, 2) == "timeout"
    assert _masked_copy(masked[:4], inputs, 2) == masked[:4]  # the judge's: wrong size


# --- --require-rules ------------------------------------------------------------------------


def test_require_rules_accepts_the_rule_set_that_judged(good):
    result = verify_bundle(good, PUB, workers=1, require_rules=["seed/v2", "seed/v1"])
    assert result.rules == "seed/v1"


def test_require_rules_refuses_another_rule_set(good):
    with pytest.raises(BindingMismatchError, match="judged by: .* one of seed/v2, serve/v1, "
                                                   "found seed/v1"):
        verify_bundle(good, PUB, workers=1, require_rules=("seed/v2", "serve/v1"))


@pytest.mark.parametrize("required", [["nope/v9"], [], ["seed/v1", "seed/v1 "]])
def test_require_rules_unknown_or_empty_is_usage(good, required):
    with pytest.raises(UsageError):
        verify_bundle(good, PUB, workers=1, require_rules=required)


def test_require_rules_on_the_cli(good, capsys):
    pub = ["--pubkey", str(synthetic.SIGNING_PUB)]
    assert main(["verify", str(good), *pub, "--require-rules", "seed/v1"]) == 0
    assert main(["verify", str(good), *pub, "--require-rules", "serve/v1",
                 "--require-rules", "seed/v1"]) == 0
    capsys.readouterr()
    assert main(["verify", str(good), *pub, "--require-rules", "seed/v2"]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "found seed/v1" in err[0]
    assert main(["verify", str(good), *pub, "--require-rules", "nope/v9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope/v9" in err[0]


def test_require_rules_with_json(good, capsys):
    pub = ["--pubkey", str(synthetic.SIGNING_PUB)]
    assert main(["verify", str(good), *pub, "--json", "--require-rules", "seed/v2"]) == 4
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] is False and out["code"] == "binding_mismatch"
    assert main(["verify", str(good), *pub, "--json", "--require-rules", "seed/v1"]) == 0
    assert json.loads(capsys.readouterr().out)["rules"] == "seed/v1"


def test_every_registered_rule_set_may_be_required():
    from harness.core.verify import _required_rules

    assert _required_rules(list(RULE_SETS)) == tuple(RULE_SETS)
    assert _required_rules("seed/v1") == ("seed/v1",)
    assert _required_rules(None) is None
