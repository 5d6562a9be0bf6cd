"""Strict JSON parsing for evidence: duplicate keys, NaN/Infinity and bad UTF-8 are refused.

Python's ``json`` module silently keeps the last of duplicate keys and accepts ``NaN``;
either would let two readers disagree about the same signed bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .errors import HarnessError, MalformedEvidenceError


def no_duplicate_keys(what: str, error: type[HarnessError] = MalformedEvidenceError
                      ) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """An ``object_pairs_hook`` that raises ``error`` on a duplicate key."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise error(f"{what}: duplicate JSON key {key!r}")
            out[key] = value
        return out

    return hook


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def loads_strict(data: bytes, what: str) -> Any:
    """Parse UTF-8 JSON bytes strictly; every failure is a MalformedEvidenceError."""
    try:
        text = data.decode("utf-8")
        return json.loads(text, object_pairs_hook=no_duplicate_keys(what),
                          parse_constant=_no_constant)
    except MalformedEvidenceError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise MalformedEvidenceError(f"{what} is not valid JSON: {type(err).__name__}") from err
