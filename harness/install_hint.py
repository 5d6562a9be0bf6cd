"""The install command an error prints for a missing extra, as a command that works when
pasted (issue 37, item 5): topp-gate is installed from its checkout, not from a package
index (the index has no ``topp-gate``), so the hint names this interpreter's pip and the
checkout this copy of topp-gate came from, editable when this install is.

- the checkout: the folder above ``harness/`` when it holds topp-gate's ``pyproject.toml``
  (an editable install or a run from the checkout: the hint installs it editable), else
  the local folder pip recorded in ``direct_url.json`` when it still holds one;
- no checkout found (an installed copy whose source folder is gone): the hint says to run
  ``pip install '.[EXTRA]'`` in a topp-gate checkout.
"""

from __future__ import annotations

import importlib.metadata
import json
import shlex
import sys
import urllib.parse
import urllib.request
from pathlib import Path

from .core.errors import MissingExtraError, UsageError

DISTRIBUTION = "topp-gate"


def _is_checkout(folder: Path) -> bool:
    try:
        text = (folder / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return False
    return f'name = "{DISTRIBUTION}"' in text


def _distribution() -> importlib.metadata.Distribution | None:
    try:
        return importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def checkout() -> tuple[Path, bool] | None:
    """(the checkout this copy came from, whether it is installed editable), or None."""
    here = Path(__file__).resolve().parents[1]
    if _is_checkout(here):
        return here, True  # this code runs from the checkout: an editable install
    dist = _distribution()
    if dist is not None:
        try:
            recorded = json.loads(dist.read_text("direct_url.json") or "null")
        except ValueError:
            recorded = None
        url = recorded.get("url") if isinstance(recorded, dict) else None
        if isinstance(url, str) and url.startswith("file://"):
            folder = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
            if _is_checkout(folder):
                dir_info = recorded.get("dir_info") if isinstance(recorded, dict) else None
                return folder, bool(isinstance(dir_info, dict) and dir_info.get("editable"))
    return None


def install_command(extra: str) -> str:
    """The command that installs ``extra`` into this interpreter's environment."""
    found = checkout()
    if found is None:
        return (f"pip install '.[{extra}]' (run in a topp-gate checkout: topp-gate is not on "
                "the package index)")
    folder, editable = found
    return " ".join([shlex.quote(sys.executable), "-m", "pip", "install",
                     *(["-e"] if editable else []), shlex.quote(f"{folder}[{extra}]")])


def missing_extra(extra: str) -> MissingExtraError:
    """:class:`MissingExtraError` whose hint is :func:`install_command`."""
    error = MissingExtraError(extra)
    UsageError.__init__(error, f"needs the {extra} extra: {install_command(extra)}")
    return error
