"""How a case's kernel is called (issue 36): the call pattern a server uses, as data.

Verifier side: standard library only. A version 3 ordinary or traffic case may carry a
``call`` object; without one, the kernel gets what it always got (contiguous float32 logits
rows, int32 k, no index array). With one:

* ``logits_row_stride`` S (> vocab) and ``padding_seed``: the logits are the view
  ``buffer[:, :vocab]`` of a contiguous float32 ``[batch, S]`` buffer, as a server hands over
  a padded vocabulary (``lm_head`` rows beyond the tokenizer's) or a slice of a larger buffer.
  The view's rows are the case's logits as before (``inputs/<id>.logits.f32``, what the
  oracle reads); the buffer's other columns are captured apart
  (``inputs/<id>.pad.f32``: batch x (S - vocab) float32, row-major), drawn as
  ``torch.randn(batch, S - vocab, generator=torch.Generator().manual_seed(padding_seed))``.
* ``k_dtype`` (``int32``, the default, or ``int64``): the integer type of the top-k tensor
  the kernel gets (the captured k file stays int32).
* ``param_stride`` s (>= 2): k and p reach the kernel as non-contiguous views, every s-th
  element of a buffer (``buffer[::s]``, as a column of a per-request ``[batch, s]`` table),
  the other elements zero; the captured k and p files are the views' values as before.
* ``indices`` (with ``indices_dtype``): FlashInfer's optional index array for its sampling
  functions: output row j draws from probability row ``indices[j]``, repeated or out of
  order, fewer or more output rows than probability rows; captured as
  ``inputs/<id>.idx.i32`` or ``.idx.i64``.

The kernel child records, per case, what it passed (``call``: shape, stride, storage offset
and dtype of every tensor argument) and whether the buffer's padding was left as captured;
:func:`check_recorded_call` holds that record to the declared pattern.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import BindingMismatchError, ManifestError

INT32, INT64 = "int32", "int64"
INDEX_DTYPES = (INT32, INT64)
FLOAT32 = "float32"
MAX_INDICES = 4096
_SUFFIX = {INT32: "i32", INT64: "i64"}
_ITEM_BYTES = {INT32: 4, INT64: 8}


@dataclass(frozen=True)
class CallPattern:
    """A case's declared call; the defaults are the contiguous call every case had before."""

    row_stride: int | None = None  # elements between rows of the logits buffer
    padding_seed: int | None = None
    k_dtype: str = INT32
    param_stride: int = 1  # elements between consecutive rows' k and p
    indices: tuple[int, ...] | None = None
    indices_dtype: str = INT32

    @property
    def is_default(self) -> bool:
        return self == CallPattern()

    def outputs_per_row(self, batch: int) -> tuple[int, ...]:
        """How many output rows read each of the ``batch`` input rows: one each without an
        index array; with one, how often each row occurs in ``indices`` (output j reads
        ``indices[j]``), counted in one pass."""
        if self.indices is None:
            return (1,) * batch
        counts = Counter(self.indices)
        return tuple(counts[row] for row in range(batch))

DEFAULT = CallPattern()


def from_manifest(case: Mapping[str, Any]) -> CallPattern:
    """The call pattern of a manifest case (its ``call`` object, schema-checked), checked
    against the case: a stride above the vocabulary, indices inside the batch."""
    spec = case.get("call")
    if spec is None:
        return DEFAULT
    cid, vocab, batch = case["id"], int(case["vocab"]), int(case["batch"])
    stride = spec.get("logits_row_stride")
    if stride is not None and int(stride) <= vocab:
        raise ManifestError(f"case {cid}: logits_row_stride {stride} must exceed the "
                            f"vocabulary {vocab} (a contiguous call declares none)")
    if (stride is None) != ("padding_seed" not in spec):
        raise ManifestError(f"case {cid}: logits_row_stride and padding_seed go together")
    indices = spec.get("indices")
    if indices is not None and any(int(i) >= batch for i in indices):
        raise ManifestError(f"case {cid}: an index is outside the batch {batch}")
    if indices is None and "indices_dtype" in spec:
        raise ManifestError(f"case {cid}: indices_dtype without indices")
    pattern = CallPattern(
        row_stride=None if stride is None else int(stride),
        padding_seed=None if stride is None else int(spec["padding_seed"]),
        k_dtype=str(spec.get("k_dtype", INT32)),
        param_stride=int(spec.get("param_stride", 1)),
        indices=None if indices is None else tuple(int(i) for i in indices),
        indices_dtype=str(spec.get("indices_dtype", INT32)))
    if pattern.is_default:
        raise ManifestError(f"case {cid}: its call object declares nothing a default call "
                            "does not (leave it out)")
    return pattern


# --- the captured files and the cases.json entry ---------------------------------------------


def padding_path(case_id: str, pattern: CallPattern) -> str | None:
    return f"inputs/{case_id}.pad.f32" if pattern.row_stride is not None else None


def indices_path(case_id: str, pattern: CallPattern) -> str | None:
    if pattern.indices is None:
        return None
    return f"inputs/{case_id}.idx.{_SUFFIX[pattern.indices_dtype]}"


def input_sizes(case_id: str, batch: int, vocab: int, pattern: CallPattern) -> dict[str, int]:
    """The captured files the pattern adds, with their raw sizes."""
    sizes = {}
    pad = padding_path(case_id, pattern)
    if pad is not None and pattern.row_stride is not None:
        sizes[pad] = 4 * batch * (pattern.row_stride - vocab)
    idx = indices_path(case_id, pattern)
    if idx is not None and pattern.indices is not None:
        sizes[idx] = _ITEM_BYTES[pattern.indices_dtype] * len(pattern.indices)
    return sizes


def index_bytes(pattern: CallPattern) -> bytes:
    """The captured index array: each index little-endian in the declared integer type."""
    code = "i" if pattern.indices_dtype == INT32 else "q"
    indices = pattern.indices or ()
    return struct.pack(f"<{len(indices)}{code}", *indices)


def to_index_json(case_id: str, pattern: CallPattern) -> dict[str, Any] | None:
    """The ``call`` object of a cases.json entry (None for the default call)."""
    if pattern.is_default:
        return None
    entry: dict[str, Any] = {}
    if pattern.row_stride is not None:
        entry.update(logits_row_stride=pattern.row_stride,
                     padding_seed=pattern.padding_seed,
                     padding=padding_path(case_id, pattern))
    if pattern.k_dtype != INT32:
        entry["k_dtype"] = pattern.k_dtype
    if pattern.param_stride != 1:
        entry["param_stride"] = pattern.param_stride
    if pattern.indices is not None:
        entry.update(indices=list(pattern.indices), indices_dtype=pattern.indices_dtype,
                     indices_file=indices_path(case_id, pattern))
    return entry


def from_index_json(case_id: str, entry: Mapping[str, Any] | None) -> CallPattern:
    """The pattern a cases.json ``call`` object describes (file names checked by the
    caller, which compares the whole entry with the manifest's)."""
    if entry is None:
        return DEFAULT
    indices = entry.get("indices")
    return CallPattern(
        row_stride=entry.get("logits_row_stride"),
        padding_seed=entry.get("padding_seed"),
        k_dtype=str(entry.get("k_dtype", INT32)),
        param_stride=int(entry.get("param_stride", 1)),
        indices=None if indices is None else tuple(int(i) for i in indices),
        indices_dtype=str(entry.get("indices_dtype", INT32)))


# --- what the child must record ---------------------------------------------------------------


def vector(length: int, dtype: str, stride: int = 1) -> dict[str, Any]:
    """A one-dimensional argument as the child records it (contiguous unless ``stride``)."""
    return {"shape": [length], "stride": [stride], "storage_offset": 0, "dtype": dtype}


def expected_logits(batch: int, vocab: int, pattern: CallPattern) -> dict[str, Any]:
    """The logits argument the kernel must get: shape, stride, storage offset, dtype."""
    stride = pattern.row_stride if pattern.row_stride is not None else vocab
    return {"shape": [batch, vocab], "stride": [stride, 1], "storage_offset": 0,
            "dtype": FLOAT32}


def check_recorded_call(side: str, case_id: str, batch: int, vocab: int,
                        pattern: CallPattern, record: Mapping[str, Any]) -> str:
    """Hold one case record of a side's kernel evidence to the declared call. Returns
    ``recorded`` or ``legacy`` (evidence from before call records, for a default call only);
    BindingMismatchError when the child passed anything else, or wrote into the padding."""
    call = record.get("call")
    if call is None:
        if not pattern.is_default:
            raise BindingMismatchError(f"{side} case {case_id} call record",
                                       "the declared call", "none recorded")
        return "legacy"
    if not isinstance(call, Mapping):
        raise BindingMismatchError(f"{side} case {case_id} call record", "an object",
                                   type(call).__name__)
    want = expected_logits(batch, vocab, pattern)
    if call.get("logits") != want:
        raise BindingMismatchError(f"{side} case {case_id} logits argument", str(want),
                                   str(call.get("logits")), said_by="the manifest")
    for name, dtype in (("k", pattern.k_dtype), ("p", FLOAT32)):
        found = call.get(name)
        want_vector = vector(batch, dtype, pattern.param_stride)
        if found is not None and found != want_vector:
            raise BindingMismatchError(f"{side} case {case_id} {name} argument",
                                       str(want_vector), str(found), said_by="the manifest")
    if pattern.indices is not None:
        want_idx = vector(len(pattern.indices), pattern.indices_dtype)
        if call.get("indices") != want_idx:
            raise BindingMismatchError(f"{side} case {case_id} indices argument", str(want_idx),
                                       str(call.get("indices")), said_by="the manifest")
    if pattern.row_stride is not None and not isinstance(record.get("padding_intact"), bool):
        # whether the kernel wrote outside its view is evidence about the side (reported
        # beside the verdict), so the record must say it either way
        raise BindingMismatchError(f"{side} case {case_id} padding record",
                                   "padding_intact true or false",
                                   str(record.get("padding_intact")))
    return "recorded"
