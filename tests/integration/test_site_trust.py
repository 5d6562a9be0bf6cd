"""``topp-gate site`` trusts only keys it is given (issue 35, item 6): the built-in project
keys and each ``--pubkey PUB``. A key named by ``verdicts.tsv`` is a record, never a grant
of trust: a record line naming a key that is not trusted leaves its bundle refused (page
and ``--check``), whatever the bundle's signature.

The "attacker" bundle is a real bundle written by the real bundle writer and signed with a
real Ed25519 key that is not a project key (``tests/assets/keys/test-only-other.key``); its
verdict is PASS, the outcome an attacker would want shown."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "assets"))

import synthetic  # noqa: E402

from harness.cli import main  # noqa: E402
from harness.core.keys import keyid, load_public_key  # noqa: E402

EVIL = "evidence/bundles/evil"
EVIL_KEY_ID = keyid(load_public_key(synthetic.OTHER_PUB))


@pytest.fixture(scope="module")
def evil_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("attacker") / "evil"
    synthetic.write(path, key=synthetic.OTHER_KEY)
    return path


def _evidence(base: Path, bundle: Path, key_column: str) -> Path:
    """An evidence folder holding the attacker's bundle, the attacker's public key inside
    it (evidence/keys/evil.pub), and a record naming ``key_column`` as the bundle's key."""
    evidence = base / "evidence"
    shutil.copytree(bundle, base / EVIL)
    (evidence / "keys").mkdir()
    shutil.copyfile(synthetic.OTHER_PUB, evidence / "keys" / "evil.pub")
    (evidence / "verdicts.tsv").write_text(
        f"# path\tkey\tverdict\n{EVIL}\t{key_column}\tPASS\n", "utf-8")
    return evidence


def _page(site: Path, shown: str) -> str:
    """The page the front page links for the bundle shown as ``shown``."""
    import re

    index = (site / "index.html").read_text("utf-8")
    found = re.findall(r'<a href="([^"]+)">' + re.escape(shown) + "</a>", index)
    assert len(found) == 1, index
    return (site / found[0]).read_text("utf-8")


def _key_columns(tmp_path: Path) -> list[str]:
    outside = tmp_path / "elsewhere" / "evil.pub"
    outside.parent.mkdir()
    shutil.copyfile(synthetic.OTHER_PUB, outside)
    return ["evidence/keys/evil.pub", str(outside.resolve())]


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_a_record_naming_an_attacker_key_trusts_nothing(evil_bundle: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        where: str):
    column = _key_columns(tmp_path)[where == "absolute"]
    evidence = _evidence(tmp_path, evil_bundle, column)
    site = tmp_path / "site"
    assert main(["site", str(evidence), "--out", str(site), "--check", "--no-mutation",
                 "--workers", "1"]) == 4
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("site: --check: ")]
    assert len(lines) == 2, err
    assert lines[0].startswith(f"site: --check: {EVIL}: refused: ")
    assert "not a trusted key" in lines[0] and EVIL_KEY_ID in lines[0]
    assert lines[1] == "site: --check: 1 problems against verdicts.tsv"
    page = _page(site, EVIL)
    assert 'class="v-refused"' in page and "not a trusted key" in page
    assert "verified verdict" not in page and "PASS" not in page
    assert '<td class="v-pass"' not in (site / "index.html").read_text("utf-8")


def test_without_check_the_page_shows_the_attacker_bundle_refused(
        evil_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    evidence = _evidence(tmp_path, evil_bundle, "evidence/keys/evil.pub")
    site = tmp_path / "site"
    assert main(["site", str(evidence), "--out", str(site), "--no-mutation",
                 "--workers", "1"]) == 0
    assert f"{EVIL}: refused: " in capsys.readouterr().err
    page = _page(site, EVIL)
    assert "refused" in page and "verified verdict" not in page


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_the_same_bundle_verifies_when_its_key_is_given_with_pubkey(
        evil_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str):
    """The record alone trusts nothing (exit 4); the same record with the key given by
    ``--pubkey`` (another copy of it: trust goes by key id, not by file) verifies."""
    column = _key_columns(tmp_path)[where == "absolute"]
    evidence = _evidence(tmp_path, evil_bundle, column)
    args = ["site", str(evidence), "--check", "--no-mutation", "--workers", "1"]
    assert main([*args, "--out", str(tmp_path / "untrusted")]) == 4
    capsys.readouterr()
    given = tmp_path / "given.pub"
    shutil.copyfile(synthetic.OTHER_PUB, given)
    site = tmp_path / "trusted"
    assert main([*args, "--out", str(site), "--pubkey", str(given)]) == 0
    err = capsys.readouterr().err
    assert f"{EVIL}: verified, PASS" in err
    assert "site: --check: every piece verified; 1 bundles" in err
    assert "verified verdict: <strong>PASS</strong>" in _page(site, EVIL)


def test_a_record_naming_another_trusted_key_than_the_signer_is_refused(
        evil_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """Both keys trusted (``--pubkey``), the record naming the one that did not sign: the
    record is held exactly, so the bundle is refused and ``--check`` fails."""
    evidence = _evidence(tmp_path, evil_bundle, "evidence/keys/signing.pub")
    shutil.copyfile(synthetic.SIGNING_PUB, evidence / "keys" / "signing.pub")
    assert main(["site", str(evidence), "--out", str(tmp_path / "site"), "--check",
                 "--no-mutation", "--workers", "1", "--pubkey", str(synthetic.OTHER_PUB),
                 "--pubkey", str(synthetic.SIGNING_PUB)]) == 4
    assert f"site: --check: {EVIL}: refused: " in capsys.readouterr().err


def test_a_record_naming_a_missing_key_file_is_refused_in_one_line(
        evil_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    evidence = _evidence(tmp_path, evil_bundle, "evidence/keys/gone.pub")
    assert main(["site", str(evidence), "--out", str(tmp_path / "site"), "--check",
                 "--no-mutation", "--workers", "1", "--pubkey", str(synthetic.OTHER_PUB)]) == 4
    lines = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith(f"site: --check: {EVIL}: ")]
    assert len(lines) == 1 and "evidence/keys/gone.pub" in lines[0]
