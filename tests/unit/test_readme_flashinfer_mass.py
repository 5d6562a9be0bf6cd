"""The FlashInfer mass range the docs state (docs/findings.md, docs/implementations.md) is
what the signed bundle says (issue 27: it said 3.5e-4 to
2.4e-3; the seven stopped rows' drawn tokens weigh 8.9e-5 to 2.4e-3, three under 3.5e-4).

The bundle is verified first (signature, digests, the rerun of every row), then the stopped
rows' signed ``patched_mass_outside`` are read from the verified view."""

from __future__ import annotations

from pathlib import Path

from harness.core.keys import load_public_key
from harness.core.verify import open_bundle, verify_bundle

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "evidence/impls/bundles/h200-deploy-flashinfer-0.7.2.post1-sampling-24mib-cuda"
KEY = load_public_key(ROOT / "evidence/keys/topp-gate-evidence-4.pub")


def test_readme_states_the_signed_mass_range_of_flashinfers_stopped_rows():
    verify_bundle(BUNDLE, KEY, workers=2)
    rows = open_bundle(BUNDLE, KEY).statement["predicate"]["rows"]
    masses = [float.fromhex(r["diagnostics"]["patched_mass_outside"]) for r in rows
              if r["stops"]]
    assert len(masses) == 7
    low, high = (f"{m:.1e}".replace("e-0", "e-") for m in (min(masses), max(masses)))
    findings = " ".join((ROOT / "docs/findings.md").read_text("utf-8").split())
    impls = " ".join((ROOT / "docs/implementations.md").read_text("utf-8").split())
    assert f"{low} to {high} of the row's mass" in findings
    assert f"{low} to {high} of the row (" in impls
    assert sum(m < 3.5e-4 for m in masses) == 3 and "three of them under 3.5e-4" in impls
    for text in (findings, impls):
        assert "3.5e-4 to 2.4e-3" not in text
