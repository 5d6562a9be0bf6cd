"""Commands that failed when followed to the letter (issue 18): keygen into a folder,
verify of a missing path or a file, verify without --pubkey, run from another directory,
a missing signing key."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.commands.run import packaged_manifest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "evidence/bundles/smoke-interpreter-20261129"
OTHER = ROOT / "tests/assets/keys/test-only-other.pub"


@pytest.mark.parametrize("spelling", ["kdir", "kdir/"])
def test_keygen_refuses_a_folder_and_writes_nothing_beside_it(tmp_path, monkeypatch, capsys,
                                                              spelling):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kdir").mkdir()
    assert main(["keygen", "--out", spelling]) == 2
    assert "names a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kdir"]
    assert list((tmp_path / "kdir").iterdir()) == []


def test_keygen_refuses_a_trailing_slash_of_a_new_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["keygen", "--out", "new/"]) == 2
    assert list(tmp_path.iterdir()) == []


def test_keygen_prefix_inside_a_folder_and_never_overwrites(tmp_path):
    prefix = tmp_path / "kdir" / "signing"
    assert main(["keygen", "--out", str(prefix)]) == 0
    assert (tmp_path / "kdir/signing.key").is_file() and (tmp_path / "kdir/signing.pub").is_file()
    before = (tmp_path / "kdir/signing.key").read_bytes()
    assert main(["keygen", "--out", str(prefix)]) == 2
    assert (tmp_path / "kdir/signing.key").read_bytes() == before


def test_verify_of_a_missing_path_or_a_file_is_usage(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "nonexistent")]) == 2
    assert "no bundle at" in capsys.readouterr().err
    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["verify", str(afile)]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_verify_without_pubkey_names_the_built_in_keys_it_tried(tmp_path, capsys):
    # a bundle signed by neither built-in key: the test-only key's bundles are
    from harness.core.keys import project_public_keys

    bundles = sorted((ROOT / "tests/assets/tamper").glob("*"))
    signed_by_test_key = next((b for b in bundles if (b / "receipt.dsse.json").is_file()), None)
    if signed_by_test_key is None:
        pytest.skip("no tamper fixture bundle")
    code = main(["verify", str(signed_by_test_key)])
    err = capsys.readouterr().err
    if code != 4 or "no signature verifies" not in err:
        pytest.skip(f"{signed_by_test_key.name} fails for another reason first")
    assert "given public key" not in err
    assert "built-in topp-gate project keys" in err
    for kid in project_public_keys():
        assert kid in err


def test_verify_without_pubkey_still_verifies_a_project_bundle(capsys):
    assert main(["verify", str(SMOKE)]) == 1  # a verified STOP
    assert main(["verify", str(SMOKE), "--pubkey", str(OTHER)]) == 4


def test_the_default_manifest_is_the_packages_frozen_copy():
    for name in ("h200-forced-logit-gate.json", "smoke-interpreter.json"):
        for suffix in ("", ".sha256"):
            packaged = packaged_manifest(name + suffix)
            assert packaged.read_bytes() == (ROOT / "evidence/manifests" / (name + suffix)
                                             ).read_bytes()
    h200 = packaged_manifest()
    assert hashlib.sha256(h200.read_bytes()).hexdigest() in \
        (h200.parent / (h200.name + ".sha256")).read_text()


def test_run_from_another_directory_names_a_missing_key_and_keygen(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOPP_GATE_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    code = main(["run", "--out", "X", "--key", "nokey.key"])
    err = capsys.readouterr().err
    if "extra" in err and code == 2 and "keygen" not in err:
        pytest.skip("the gpu extra is not installed")
    assert code == 2
    assert "topp-gate keygen --out nokey" in err
    assert not (tmp_path / "X").exists()


def test_run_default_manifest_loads_from_any_directory(tmp_path, monkeypatch):
    from harness.core.manifest import load_manifest

    monkeypatch.chdir(tmp_path)
    assert os.getcwd() == str(tmp_path)
    assert load_manifest(packaged_manifest()).name
