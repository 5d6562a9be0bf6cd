"""``topp-gate pr --sources DIR`` on a machine with no network reads the pinned trees from the
export and fetches nothing (on the H200, 2026-12-03, it tried to download the pinned wheel and
exited 2): both the tree check and ``manifest new`` take the export, with an empty cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.capture.manifest_new import SideSpec, new_manifest
from harness.cli import main
from harness.pr.flow import ensure_tree

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "evidence/pins/vllm-0.33.0.json"

pytestmark = [pytest.mark.sources]


def test_an_export_and_an_empty_cache_freeze_a_pr_manifest_without_fetching(tmp_path, capsys):
    export = tmp_path / "export"
    assert main(["sources", "export", str(export), "--pin", str(BASE)]) == 0
    empty_cache = tmp_path / "cache"
    said: list[str] = []
    ensure_tree(BASE, empty_cache, said.append, export)
    assert not [line for line in said if "fetching" in line]
    out = tmp_path / "gate" / "pr.json"
    new_manifest({"stock": SideSpec(BASE), "patched": SideSpec(BASE)}, "pr-cuda-v4", out,
                 cache=empty_cache, sources=export)
    frozen = json.loads(out.read_text("utf-8"))
    assert frozen["rules"] == "regression/v2"
    assert not (empty_cache / "wheels").exists()  # nothing was downloaded into the cache


def test_without_the_export_an_empty_cache_is_refused_in_one_line(tmp_path):
    from harness.core.errors import UsageError

    with pytest.raises(UsageError, match="not in the cache"):
        new_manifest({"stock": SideSpec(BASE), "patched": SideSpec(BASE)}, "pr-cuda-v4",
                     tmp_path / "pr.json", cache=tmp_path / "cache")
