"""Exact float32 <-> Python float conversions, on raw little-endian bytes.

Every float32 is exactly representable as a binary64 Python float, so decoding loses
nothing. Values that must round-trip bit-exactly through JSON are written as IEEE-754 hex
strings (``float.hex``), never as decimal JSON numbers.
"""

from __future__ import annotations

import math
import struct
import sys
from array import array

from .errors import InvalidPError, ShapeError

NEG_INF = -math.inf
FLOAT32_BYTES = 4


def decode(data: bytes) -> list[float]:
    """Raw little-endian float32 bytes to exact Python floats."""
    if len(data) % FLOAT32_BYTES:
        raise ShapeError(f"{len(data)} bytes is not a whole number of float32 values")
    values = array("f")
    values.frombytes(data)
    if sys.byteorder != "little":  # pragma: no cover - no big-endian CI machine
        values.byteswap()
    return values.tolist()


def encode(values: list[float]) -> bytes:
    """Python floats (each already a float32 value) to raw little-endian float32 bytes."""
    packed = array("f", values)
    if sys.byteorder != "little":  # pragma: no cover
        packed.byteswap()
    return packed.tobytes()


def row_length(nbytes: int, vocab: int | None) -> int:
    """The row length of ``nbytes`` raw float32 bytes in rows of ``vocab`` values (one row
    when vocab is None); refuses empty input, a partial value or a partial row."""
    if nbytes % FLOAT32_BYTES:
        raise ShapeError(f"{nbytes} bytes is not a whole number of float32 values")
    count = nbytes // FLOAT32_BYTES
    if not count:
        raise ShapeError("no float32 values in input")
    if vocab is None:
        return count
    if vocab <= 0:
        raise ShapeError(f"vocab must be positive, got {vocab}")
    if count % vocab:
        raise ShapeError(f"{count} float32 values is not a whole number of rows of {vocab}")
    return vocab


def rows(data: bytes, vocab: int | None) -> list[list[float]]:
    """Split raw float32 bytes into rows of ``vocab`` values (one row when vocab is None)."""
    length = row_length(len(data), vocab)
    values = decode(data)
    return [values[i : i + length] for i in range(0, len(values), length)]


def to_float32(value: float) -> float:
    """Round a binary64 value to the nearest float32 (ties to even), as torch does.

    Values beyond the float32 range become +-inf, exactly as a cast would.
    """
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def runtime_p(given: str | float) -> float:
    """The kernel's runtime p: the decimal (or float) ``given`` converted to float32.

    Refuses anything that is not finite and strictly inside (0, 1) after conversion.
    """
    try:
        p64 = float(given)
    except (TypeError, ValueError):
        raise InvalidPError(given, None) from None
    if math.isnan(p64):
        raise InvalidPError(given, None)
    p32 = to_float32(p64)
    if not (math.isfinite(p32) and 0.0 < p32 < 1.0):
        raise InvalidPError(given, p32)
    return p32


def runtime_top_p(given: str | float) -> float | None:
    """:func:`runtime_p` for top-k rows: a float32 p that is finite and >= 1 means no top-p
    (None); otherwise the same refusals."""
    try:
        p64 = float(given)
    except (TypeError, ValueError):
        raise InvalidPError(given, None) from None
    p32 = to_float32(p64)
    if math.isfinite(p32) and p32 >= 1.0:
        return None
    return runtime_p(given)


def hexf(value: float) -> str:
    """IEEE-754 hex string of a float, for bit-exact JSON."""
    return float.hex(value)


def unhexf(text: str) -> float:
    return float.fromhex(text)
