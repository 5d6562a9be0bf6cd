"""Call patterns in the case model (issue 36): a strided logits view over a padded buffer,
k as int64, FlashInfer's index array. The manifest declares them, ``cases.json`` and the
captured files carry them, and ``verify`` holds each side's recorded call to them. Real
signed synthetic bundles (written by the project's writer, signed with the test-only key)
and the real builder of captured bytes."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capture.bundle_writer import write_bundle
from harness.capture.cases import build_case
from harness.capture.signing import load_private_key
from harness.core import call_pattern
from harness.core.cases_index import parse_cases_index, render_cases_index
from harness.core.errors import BindingMismatchError, MalformedEvidenceError, ManifestError
from harness.core.keys import load_public_key
from harness.core.manifest import expected_layout, parse_manifest
from harness.core.verify import verify_bundle
from harness.probes import fixture
from harness.probes.tamper import resign

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)
KEY = load_private_key(synthetic.SIGNING_KEY)

STRIDED = {"id": "padded-v200", "kind": "traffic", "vocab": 200, "batch": 4, "seed": 9,
           "sampling": [{"p": "0.9"}, {"k": 20}],
           "call": {"logits_row_stride": 210, "padding_seed": 5, "k_dtype": "int64",
                    "param_stride": 2}}
INDEXED = {"id": "indexed-v128", "kind": "traffic", "vocab": 128, "batch": 3, "seed": 4,
           "sampling": [{"p": "0.5"}],
           "call": {"indices": [2, 0, 0, 1, 2], "indices_dtype": "int64"}}
MANIFEST = {**synthetic.MANIFEST_SERVE, "name": "synthetic-call-patterns",
            "cases": [STRIDED, INDEXED]}


def _manifest(*cases: dict[str, Any], schema: str | None = None) -> bytes:
    data = copy.deepcopy(MANIFEST)
    data["cases"] = list(cases)
    if schema is not None:
        data["schema"] = schema
    return json.dumps(data).encode()


def _write(dest: Path, edit: Any = None, case_id: str = "padded-v200") -> Path:
    """A signed bundle of :data:`MANIFEST`; ``edit`` changes each side's recorded case
    ``case_id`` before it is written (a signer that lies, consistently)."""
    bundle = fixture.content(MANIFEST, sources=synthetic.SOURCES_V3)
    if edit is not None:
        evidence = {}
        for side, raw in bundle.evidence.items():
            data = json.loads(raw)
            for record in data["cases"]:
                if record["id"] == case_id:
                    edit(record)
            evidence[side] = (json.dumps(data, indent=2) + "\n").encode()
        bundle = fixture.with_report(dataclasses.replace(bundle, evidence=evidence), MANIFEST)
    write_bundle(dest, bundle, KEY, max_bytes=MANIFEST["limits"]["max_bundle_bytes"])
    return dest


def test_layout_names_the_files_a_call_pattern_adds() -> None:
    strided, indexed = expected_layout(parse_manifest(_manifest(STRIDED, INDEXED)))
    assert strided.input_sizes() == {
        "inputs/padded-v200.logits.f32": 4 * 4 * 200, "inputs/padded-v200.p.f32": 16,
        "inputs/padded-v200.k.i32": 16, "inputs/padded-v200.pad.f32": 4 * 4 * 10}
    assert indexed.input_sizes()["inputs/indexed-v128.idx.i64"] == 8 * 5
    assert strided.call == call_pattern.CallPattern(row_stride=210, padding_seed=5,
                                                    k_dtype="int64", param_stride=2)


def test_cases_index_round_trips_the_call() -> None:
    layout = expected_layout(parse_manifest(_manifest(STRIDED, INDEXED)))
    assert parse_cases_index(render_cases_index(layout)) == layout


def test_cases_index_refuses_a_call_of_another_case() -> None:
    layout = expected_layout(parse_manifest(_manifest(STRIDED)))
    data = json.loads(render_cases_index(layout))
    data["cases"][0]["call"]["padding"] = "inputs/other.pad.f32"
    with pytest.raises(MalformedEvidenceError, match="names input files not its own"):
        parse_cases_index(json.dumps(data).encode())


@pytest.mark.parametrize(("call", "message"), [
    ({"logits_row_stride": 200, "padding_seed": 1}, "must exceed the vocabulary"),
    ({"logits_row_stride": 210}, "go together"),
    ({"padding_seed": 3}, "go together"),
    ({"indices": [0, 4]}, "outside the batch"),
    ({"indices_dtype": "int64"}, "indices_dtype without indices"),
    ({"k_dtype": "int32"}, "declares nothing"),
])
def test_manifest_refuses_a_call_that_does_not_fit_its_case(call: dict[str, Any],
                                                            message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        parse_manifest(_manifest({**STRIDED, "call": call}))


def test_a_strided_buffer_is_held_to_the_limits() -> None:
    """The padding is read like every input: its buffer is under the manifest's vocabulary
    limit and the per-case ceiling every verifier shares (no 4 GiB padding to inflate)."""
    from harness.core.errors import LimitError

    with pytest.raises(LimitError, match="row stride 262144 is over the limit"):
        parse_manifest(_manifest({**STRIDED, "call": {"logits_row_stride": 262144,
                                                      "padding_seed": 1}}))
    wide = copy.deepcopy(MANIFEST)
    wide["limits"] = {**wide["limits"], "max_vocab": 1048576}
    wide["cases"] = [{**STRIDED, "batch": 64, "call": {"logits_row_stride": 1048576,
                                                       "padding_seed": 1}}]
    with pytest.raises(LimitError, match="its logits buffer"):
        parse_manifest(json.dumps(wide).encode())


def test_a_call_pattern_needs_a_version_3_manifest() -> None:
    data = copy.deepcopy(synthetic.MANIFEST)
    data["cases"] = [{"id": "o", "kind": "ordinary", "seed": 1, "batch": 2, "vocab": 64,
                      "call": {"k_dtype": "int64"}}]
    parse_manifest(_manifest({**data["cases"][0]}))  # version 3 takes it
    with pytest.raises(ManifestError, match="needs a version 3 manifest"):
        parse_manifest(json.dumps(data).encode())


def test_builder_draws_the_padding_from_its_own_generator() -> None:
    layout = expected_layout(parse_manifest(_manifest(STRIDED, INDEXED)))
    strided = build_case(STRIDED, has_k=True)
    assert strided.layout == layout[0]
    expected = torch.randn(4, 10, generator=torch.Generator().manual_seed(5))
    assert strided.files()["inputs/padded-v200.pad.f32"] == expected.numpy().astype(
        "<f4").tobytes()
    indexed = build_case(INDEXED, has_k=True)
    assert indexed.files()["inputs/indexed-v128.idx.i64"] == struct.pack("<5q", 2, 0, 0, 1, 2)


def test_a_bundle_with_call_patterns_verifies(tmp_path: Path) -> None:
    verified = verify_bundle(_write(tmp_path / "b"), PUB)
    assert verified.rows == 4 + 3


@pytest.mark.parametrize(("edit", "message"), [
    (lambda r: r["call"]["logits"].update(stride=[200, 1]), "logits argument"),
    (lambda r: r.pop("call"), "call record"),
    (lambda r: r["call"].update(k={"shape": [4], "stride": [2], "storage_offset": 0,
                                   "dtype": "int32"}), "k argument"),
    (lambda r: r["call"]["p"].update(stride=[1]), "p argument"),
    (lambda r: r.pop("padding_intact"), "padding record"),
    (lambda r: r.update(padding_sha256="0" * 64), "padding_sha256"),
])
def test_verify_holds_the_recorded_call_to_the_declared_one(tmp_path: Path, edit: Any,
                                                             message: str) -> None:
    with pytest.raises(BindingMismatchError, match=message):
        verify_bundle(_write(tmp_path / "b", edit), PUB)


def test_verify_refuses_a_recorded_index_array_of_another_type(tmp_path: Path) -> None:
    bundle = _write(tmp_path / "b", lambda r: r["call"]["indices"].update(dtype="int32"),
                    "indexed-v128")
    with pytest.raises(BindingMismatchError, match="indices argument"):
        verify_bundle(bundle, PUB)


def test_a_kernel_that_wrote_into_the_padding_is_recorded_not_refused(tmp_path: Path) -> None:
    """Writing outside the view is evidence about the side (``padding_intact`` false), not a
    broken binding: the bundle still verifies."""
    bundle = _write(tmp_path / "b", lambda r: r.update(padding_intact=False))
    assert verify_bundle(bundle, PUB).rows == 7


def test_a_resigned_receipt_alone_cannot_change_the_recorded_call(tmp_path: Path) -> None:
    """The receipt binds each side's evidence file: an edit of one without the other is a
    binding failure."""
    bundle = _write(tmp_path / "b")

    def change(statement: dict[str, Any]) -> None:
        record = statement["predicate"]["kernel_path"]["stock"]["cases"][0]
        record["call"]["logits"]["stride"] = [200, 1]
    resign(change, KEY)(bundle)
    with pytest.raises(BindingMismatchError, match="kernel-path evidence"):
        verify_bundle(bundle, PUB)


def test_legacy_records_verify_only_for_a_default_call() -> None:
    record: dict[str, Any] = {"id": "c"}
    assert call_pattern.check_recorded_call("stock", "c", 2, 8, call_pattern.DEFAULT,
                                            record) == "legacy"
    with pytest.raises(BindingMismatchError):
        call_pattern.check_recorded_call("stock", "c", 2, 8, call_pattern.CallPattern(
            k_dtype="int64"), record)


def test_any_changed_byte_of_the_padding_fails_verify(tmp_path: Path) -> None:
    """The padding is read (stored and raw sha256) like every other input, not only under
    --regenerate."""
    bundle = _write(tmp_path / "b")
    stored = next((bundle / "inputs").glob("padded-v200.pad.f32*"))
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 1
    stored.write_bytes(bytes(data))
    with pytest.raises(BindingMismatchError, match="pad.f32"):
        verify_bundle(bundle, PUB)


def test_an_index_array_other_than_the_manifests_is_refused(tmp_path: Path) -> None:
    """A signer that captured (and hashed, consistently) other indices than the manifest
    declares: the index array is fully fixed by the manifest, so verify compares values."""
    bundle = fixture.content(MANIFEST, sources=synthetic.SOURCES_V3)
    other = struct.pack("<5q", 0, 0, 0, 1, 2)
    inputs = {**bundle.inputs, "inputs/indexed-v128.idx.i64": other}
    evidence = {}
    for side, raw in bundle.evidence.items():
        data = json.loads(raw)
        for record in data["cases"]:
            if record["id"] == "indexed-v128":
                record["indices_sha256"] = hashlib.sha256(other).hexdigest()
        evidence[side] = (json.dumps(data, indent=2) + "\n").encode()
    bundle = fixture.with_report(dataclasses.replace(bundle, inputs=inputs, evidence=evidence),
                                 MANIFEST)
    write_bundle(tmp_path / "b", bundle, KEY, max_bytes=MANIFEST["limits"]["max_bundle_bytes"])
    with pytest.raises(BindingMismatchError, match="the manifest's indices"):
        verify_bundle(tmp_path / "b", PUB)


def test_verify_regenerate_rebuilds_strided_buffers_and_index_arrays(tmp_path: Path) -> None:
    """Inputs captured as ``run`` builds them (the real builder, CPU torch): ``verify
    --regenerate`` rebuilds every file of both call patterns byte for byte, and refuses a
    padding a signer captured from another seed."""
    from harness.capture.regenerate import regenerate_inputs
    from harness.core.verify import open_bundle

    bundle = fixture.content(MANIFEST, sources=synthetic.SOURCES_V3, built_inputs=True)
    write_bundle(tmp_path / "b", bundle, KEY, max_bytes=MANIFEST["limits"]["max_bundle_bytes"])
    verify_bundle(tmp_path / "b", PUB)
    assert regenerate_inputs(open_bundle(tmp_path / "b", PUB)) == 4 + 4  # logits, p, k, call
    other = copy.deepcopy(MANIFEST)
    other["cases"][0]["call"]["padding_seed"] = 6
    moved = fixture.content(other, sources=synthetic.SOURCES_V3, built_inputs=True)
    inputs = {**bundle.inputs, "inputs/padded-v200.pad.f32":
              moved.inputs["inputs/padded-v200.pad.f32"]}
    evidence = {}
    for side, raw in bundle.evidence.items():
        data = json.loads(raw)
        for record in data["cases"]:
            if record["id"] == "padded-v200":
                record["padding_sha256"] = hashlib.sha256(
                    inputs["inputs/padded-v200.pad.f32"]).hexdigest()
        evidence[side] = (json.dumps(data, indent=2) + "\n").encode()
    lying = fixture.with_report(dataclasses.replace(bundle, inputs=inputs, evidence=evidence),
                                MANIFEST)
    write_bundle(tmp_path / "c", lying, KEY, max_bytes=MANIFEST["limits"]["max_bundle_bytes"])
    verify_bundle(tmp_path / "c", PUB)  # the padding is random: only a rebuild can tell
    with pytest.raises(BindingMismatchError, match="pad.f32 rebuilt from the manifest"):
        regenerate_inputs(open_bundle(tmp_path / "c", PUB))


@settings(max_examples=80, deadline=None)
@given(batch=st.integers(1, 12), data=st.data())
def test_every_output_row_reads_exactly_one_input_row(batch, data):
    """A case's outputs are spread over its input rows: without an index array each row is
    read once; with one, the counts sum to its length and a row outside it is read by none
    (``verify`` holds each row to the declared draws times this count)."""
    indices = data.draw(st.none() | st.lists(st.integers(0, batch - 1), min_size=1,
                                             max_size=20).map(tuple))
    reads = call_pattern.CallPattern(indices=indices).outputs_per_row(batch)
    assert len(reads) == batch
    assert sum(reads) == (batch if indices is None else len(indices))
    assert all(r >= 1 for r in reads) if indices is None else \
        {row for row, r in enumerate(reads) if r} == set(indices)
