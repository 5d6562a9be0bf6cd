"""The offline tier also runs with a Nix the flake's pin supports (issue 38, item 6).

nixpkgs' lib/minfeatures.nix at the pin needs Nix >= 2.18; Debian bookworm's nix-bin is
2.8. scripts/install_nix.sh unpacks Debian trixie's nix-bin (2.26.3) under
/opt/topp-gate-nix (TOPP_GATE_NEWER_NIX_PREFIX) without touching the system, and
scripts/nix_offline_checks.sh runs its Nix steps with both; CI (scripts/test) calls both.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NEWER = Path(os.environ.get("TOPP_GATE_NEWER_NIX_PREFIX", "/opt/topp-gate-nix")) / "bin"


def _version(text: str) -> tuple[int, ...]:
    found = re.search(r"\(Nix\) (\d+(?:\.\d+)+)", text)
    assert found, text
    return tuple(int(p) for p in found.group(1).split("."))


def test_ci_installs_a_newer_nix_and_runs_the_tier() -> None:
    test = (ROOT / "scripts" / "test").read_text()
    assert "scripts/install_nix.sh" in test
    assert "scripts/nix_offline_checks.sh --nix-only" in test
    install = (ROOT / "scripts" / "install_nix.sh").read_text()
    assert "trixie" in install and "apt-get" in install and "download nix-bin" in install
    tier = (ROOT / "scripts" / "nix_offline_checks.sh").read_text()
    assert "TOPP_GATE_NEWER_NIX_PREFIX" in tier and "--all-systems" in tier


@pytest.mark.skipif(shutil.which("nix") is None or not (NEWER / "nix").exists(),
                    reason=f"no nix, or no newer Nix at {NEWER} (scripts/install_nix.sh)")
def test_the_offline_tier_runs_with_a_nix_the_pin_supports() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "nix_offline_checks.sh"), "--nix-only"],  # noqa: S603,S607
        env={**os.environ, "TOPP_GATE_REQUIRE_NEWER_NIX": "1"},
        capture_output=True, text=True, timeout=600, check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    versions = [_version(line) for line in out.splitlines() if re.match(r"^nix \(Nix\) ", line)]
    print(f"\noffline tier ran with Nix {', '.join('.'.join(map(str, v)) for v in versions)}")
    assert any(v >= (2, 18) for v in versions), out[-3000:]
    # the newer pass got as far as the package source on its fresh store
    assert out.count("pyproject.toml and harness/ among them") == len(versions)
