"""Which committed bundles PASS, as docs/verifying-a-bundle.md (README's "Verifying a bundle"
until issue 29 moved it) and VERIFYING.md say it, computed from
``evidence/verdicts.tsv`` and the receipts (issue 29: both said only the three sweep bundles
PASS; FlashInfer's ``top-p-sampling`` bundle PASSes too). ``scripts/verify_committed.sh``
verifies every bundle against verdicts.tsv in CI; here the prose is held to that table."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1].parent
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


def recorded() -> dict[str, str]:
    rows = [line.split("\t") for line in (ROOT / "evidence" / "verdicts.tsv")
            .read_text("utf-8").splitlines() if line and not line.startswith("#")]
    return {path: verdict for path, _key, verdict in rows}


def test_verdicts_tsv_is_every_bundle_folder_with_its_receipts_verdict():
    table = recorded()
    receipts = {str(r.parent.relative_to(ROOT)): json.loads(r.read_text("utf-8"))
                ["predicate"]["verdict"]["verdict"]
                for r in (ROOT / "evidence").rglob("receipt.json")
                if "mutation" not in r.parts}  # mutation runs: their summaries list them
    assert {p: v for p, v in table.items() if p in receipts} == receipts


def test_verifying_md_lists_exactly_the_pass_bundles():
    text = (ROOT / "VERIFYING.md").read_text("utf-8")
    block = text.split("<!-- pass-bundles:begin -->")[1].split("<!-- pass-bundles:end -->")[0]
    listed = set(re.findall(r"`(evidence/[^`]+)`", block))
    assert listed == {p for p, v in recorded().items() if v == "PASS"}


def test_verifying_a_bundle_counts_the_pass_bundles():
    text = " ".join((ROOT / "docs" / "verifying-a-bundle.md").read_text("utf-8").split())
    passing = [p for p, v in recorded().items() if v == "PASS"]
    assert f"of the committed bundles, {NUMBERS[len(passing)]} verify as PASS" in text
    if any("flashinfer" in p for p in passing):
        assert "FlashInfer's `top-p-sampling` bundle" in text
