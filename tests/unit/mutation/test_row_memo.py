"""The row memo of multi-bundle verifiers (harness/mutation/row_memo.py, issue 28): a row is
recalled only when every byte of its task is one this process judged, and a bundle that
shares its inputs with a verified one but lies about its own outputs is still refused."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from harness.capture.bundle_writer import write_bundle
from harness.capture.signing import load_private_key
from harness.core.errors import BindingMismatchError
from harness.core.keys import load_public_key
from harness.core.verify import verify_bundle
from harness.mutation.row_memo import RowMemo, task_key

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)


def _write(dest: Path, content: object) -> Path:
    write_bundle(dest, content, load_private_key(synthetic.SIGNING_KEY),  # type: ignore[arg-type]
                 max_bytes=synthetic.MANIFEST["limits"]["max_bundle_bytes"])
    return dest


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three bundles of the same captured inputs and stock outputs: the good one (PASS), an
    honest damaged one (the last ordinary row's top token dropped on the patched side:
    STOP), and a lying one: the damaged outputs, signed with the good one's rows and verdict
    (and a report made from them), as a key holder could."""
    root = tmp_path_factory.mktemp("memo")
    good = synthetic.content()
    damaged = synthetic.content(damage=True)
    lying = synthetic.rereport(dataclasses.replace(damaged, rows=good.rows,
                                                   verdict=good.verdict))
    assert damaged.inputs == good.inputs and damaged.outputs["stock"] == good.outputs["stock"]
    assert damaged.outputs["patched"] != good.outputs["patched"]
    return {"good": _write(root / "good", good), "damaged": _write(root / "damaged", damaged),
            "lying": _write(root / "lying", lying)}


def _refusal(bundle: Path, memo: RowMemo | None, workers: int = 1) -> str:
    with pytest.raises(BindingMismatchError) as refused:
        verify_bundle(bundle, PUB, workers=workers, row_memo=memo)
    return str(refused.value)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_lying_bundle_sharing_inputs_with_a_verified_one_is_still_refused(bundles, workers):
    memo = RowMemo()
    good = verify_bundle(bundles["good"], PUB, workers=workers, row_memo=memo)
    assert good.verdict["verdict"] == "PASS" and len(memo) == good.rows
    said = _refusal(bundles["lying"], memo, workers)
    # the memo was live: every row but the one whose output differs was recalled
    assert (memo.hits, memo.misses) == (good.rows - 1, good.rows + 1)
    assert said == _refusal(bundles["lying"], None, workers)  # the same refusal as without
    assert "rerun of row" in said


def test_recalled_rows_are_the_rows_judged_afresh(bundles):
    memo = RowMemo()
    verify_bundle(bundles["good"], PUB, workers=1, row_memo=memo)
    with_memo = verify_bundle(bundles["damaged"], PUB, workers=1, row_memo=memo)
    fresh = verify_bundle(bundles["damaged"], PUB, workers=1)
    assert with_memo.verdict == fresh.verdict and with_memo.verdict["verdict"] == "STOP"
    assert with_memo.stop_rows == fresh.stop_rows
    assert memo.hits == fresh.rows - 1  # the damaged row alone was judged again
    # and the good bundle, verified again, is recalled whole and still verifies
    again = verify_bundle(bundles["good"], PUB, workers=1, row_memo=memo)
    assert again.verdict["verdict"] == "PASS" and memo.hits == 2 * fresh.rows - 1


def test_a_recalled_row_is_a_copy():
    memo = RowMemo()
    task = ("case", 0, b"\x00\x01")
    memo.put(task, {"stops": ["a"]})
    recalled = memo.get(task)
    assert recalled == {"stops": ["a"]}
    recalled["stops"].append("b")
    assert memo.get(task) == {"stops": ["a"]}


def test_keys_tell_apart_what_python_equality_or_a_plain_join_would_not():
    def key(*fields: object) -> bytes:
        return task_key(tuple(fields))

    assert key(True) != key(1) and key(1.0) != key(1) and key(0.0) != key(-0.0)
    assert key(b"ab", b"c") != key(b"a", b"bc")  # framed by length
    assert key(b"x") != key("x") and key("b'x'") != key(b"x")  # framed by kind
    assert key((True, False)) != key([True, False]) and key(None) != key("None")
    assert key(b"ab") != key(b"ab", None)  # the field count is part of the key
    assert key("case", 0, b"\x00\x01") == key("case", 0, bytearray(b"\x00\x01"))


def test_the_oldest_rows_go_first_past_the_limit():
    memo = RowMemo(limit=2)
    for i in range(3):
        memo.put((i,), {"row": i})
    assert len(memo) == 2 and memo.get((0,)) is None and memo.get((2,)) == {"row": 2}
