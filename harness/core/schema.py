"""The JSON Schemas (2020-12) shipped as package data, and one way to check a document.

Callers turn a violation into their own typed error; a failure of the schema engine itself
is reported as a violation too, never as a pass.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

MAX_MESSAGE = 200


@cache
def load(name: str) -> dict[str, Any]:
    """A schema from ``harness/core/schemas/`` (read once)."""
    text = resources.files("harness.core").joinpath("schemas", name).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def violation(name: str, document: Any) -> str | None:
    """None when ``document`` is valid against schema ``name``; else one line.

    The line names the most relevant error (jsonschema's ``best_match``) and where it is.
    """
    import jsonschema  # type: ignore[import-untyped]

    validator = jsonschema.Draft202012Validator(
        load(name), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    except Exception as err:  # noqa: BLE001 - an engine failure is still a refusal
        return f"(schema check failed: {type(err).__name__})"
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(top)"
    message = error.message
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "..."
    return f"at {where}: {message}"
