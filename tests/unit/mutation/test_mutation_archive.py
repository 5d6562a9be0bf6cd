"""A mutation folder committed as a .tar.xz (harness.mutation.mutate.mutation_folder): read
whole and refused unless every member is a plain file or folder under one top folder, then
extracted to a temporary folder that is removed afterwards; and the README table built from
the committed archive through scripts/mutation_table.py."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.mutation.mutate import mutation_folder

ROOT = Path(__file__).resolve().parents[3]


def _archive(path: Path, members: list[tuple[str, bytes | None, bytes]]) -> Path:
    """members: (name, data or None for a folder, type flag)."""
    with tarfile.open(path, "w:xz") as out:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
            if data is not None:
                info.size = len(data)
            out.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def test_a_good_archive_is_extracted_and_removed_afterwards(tmp_path: Path):
    path = _archive(tmp_path / "m.tar.xz", [("m", None, tarfile.DIRTYPE),
                                           ("m/mutation.json", b"{}", tarfile.REGTYPE),
                                           ("m/bundles/base/receipt.json", b"[]",
                                            tarfile.REGTYPE)])
    with mutation_folder(path) as folder:
        assert folder.name == "m" and (folder / "mutation.json").read_bytes() == b"{}"
        assert (folder / "bundles/base/receipt.json").read_bytes() == b"[]"
        extracted = folder
    assert not extracted.exists()


def test_a_folder_is_used_as_it_is(tmp_path: Path):
    with mutation_folder(tmp_path) as folder:
        assert folder == tmp_path


@pytest.mark.parametrize(("members", "why"), [
    ([("m/a", b"x", tarfile.REGTYPE), ("m/link", b"", tarfile.SYMTYPE)], "not a regular file"),
    ([("m/a", b"x", tarfile.REGTYPE), ("m/fifo", b"", tarfile.FIFOTYPE)], "not a regular file"),
    ([("m/../escape", b"x", tarfile.REGTYPE)], "not a plain relative path"),
    ([("/m/abs", b"x", tarfile.REGTYPE)], "not a plain relative path"),
    ([("m/a", b"x", tarfile.REGTYPE), ("n/b", b"y", tarfile.REGTYPE)], "top-level names"),
])
def test_a_hostile_archive_is_refused_before_anything_is_extracted(tmp_path: Path, members,
                                                                    why):
    path = _archive(tmp_path / "m.tar.xz", [(n, d if k != tarfile.SYMTYPE else None, k)
                                           for n, d, k in members])
    before = set(Path(tmp_path).iterdir())
    with pytest.raises(UsageError, match=why), mutation_folder(path):
        pass
    assert set(Path(tmp_path).iterdir()) == before


def test_a_huge_declared_size_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("harness.mutation.mutate.MAX_ARCHIVE_BYTES", 10)
    path = _archive(tmp_path / "m.tar.xz", [("m/a", b"x" * 11, tarfile.REGTYPE)])
    with pytest.raises(UsageError, match="declares 11 bytes"), mutation_folder(path):
        pass


def test_not_an_archive_is_one_line(tmp_path: Path):
    bad = tmp_path / "m.tar.xz"
    bad.write_bytes(b"not xz")
    with pytest.raises(UsageError, match="not a readable"), mutation_folder(bad):
        pass
    with pytest.raises(UsageError, match="not a mutation folder"), \
            mutation_folder(tmp_path / "missing.zip"):
        pass


def _mutation_table():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("mutation_table",
                                                  ROOT / "scripts/mutation_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_table"] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_interpreter_archive_verifies_and_a_wrong_key_exits_4(
        capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the repository: the frozen manifest is found anyway
    table = _mutation_table()
    archive = str(ROOT / "evidence/mutation/pr-interpreter-v2-cpu-20261203.tar.xz")
    assert table.main([archive, "--pubkey",
                       str(ROOT / "evidence/keys/topp-gate-evidence-4.pub")]) == 0
    out = capsys.readouterr().out
    assert "| `pr-interpreter-v2` | `regression/v1` | interpreter | PASS" in out
    assert table.main([archive, "--pubkey",
                       str(ROOT / "evidence/keys/topp-gate-evidence-3.pub")]) == 4
    err = capsys.readouterr().err
    assert err.startswith("mutation_table: bad_signature") and len(err.splitlines()) == 1
    assert table.main([str(ROOT / "missing.tar.xz"), "--pubkey",
                       str(ROOT / "evidence/keys/topp-gate-evidence-4.pub")]) == 2
    # --check FILE / --write FILE: the file that holds the table (docs/mutation.md by default)
    key = ["--pubkey", str(ROOT / "evidence/keys/topp-gate-evidence-4.pub")]
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{table.BEGIN}\nold\n{table.END}\noutro\n", "utf-8")
    assert table.main([archive, *key, "--check", str(doc)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert table.main([archive, *key, "--write", str(doc)]) == 0
    assert doc.read_text("utf-8") == f"intro\n{out}outro\n"
    assert table.main([archive, *key, "--check", str(doc)]) == 0
    doc.write_text("no table here\n", "utf-8")
    assert table.main([archive, *key, "--check", str(doc)]) == 1
    assert "has no mutation-table section" in capsys.readouterr().err


def test_a_fifo_in_place_of_the_summary_is_refused_not_waited_on(tmp_path):
    import os

    from harness.core.keys import load_public_key
    from harness.mutation.mutate import check_summary

    os.mkfifo(tmp_path / "mutation.dsse.json")
    key = load_public_key(ROOT / "evidence/keys/topp-gate-evidence-4.pub")
    with pytest.raises(UsageError, match="not a regular file|mutation envelope"):
        check_summary(tmp_path, key)


@pytest.mark.parametrize("shown", ["../../etc/passwd", "/etc/passwd", "bundles/../x",
                                   "bundles/a\x1b[31m", "bundles/a/b", 7, "logs/base"])
def test_a_summary_path_outside_bundles_or_mutants_is_refused(tmp_path, shown):
    from harness.core.errors import MalformedEvidenceError
    from harness.mutation.mutate import summary_path

    with pytest.raises(MalformedEvidenceError, match="names the path"):
        summary_path(tmp_path, shown)
    assert summary_path(tmp_path, "bundles/cmp-ties-le") == tmp_path / "bundles/cmp-ties-le"
    assert summary_path(tmp_path, "mutants/x.diff") == tmp_path / "mutants/x.diff"


@pytest.mark.parametrize("shown", ["`x`", "a|b", "A", "x\n", "", None, "a" * 65])
def test_a_mutant_id_that_could_break_a_table_is_refused(shown):
    from harness.core.errors import MalformedEvidenceError
    from harness.mutation.mutate import summary_id

    with pytest.raises(MalformedEvidenceError, match="names the mutant"):
        summary_id(shown)
    assert summary_id("const-min-prob-1e-12") == "const-min-prob-1e-12"
