"""scripts/verify_committed.sh verifies bundles concurrently (issue 28): each bundle's output
is printed whole and in order, and every unexpected exit code fails the script. It verifies
only with key files under evidence/keys/: a verdicts.tsv line naming any other key is refused
before anything is verified.

The script runs on a copy of itself in a scratch repository whose "verifier" is a stub that
sleeps and exits with what each bundle's folder says: what is under test is the script's
own bookkeeping (order, exit codes, failures), not the verifier it calls."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUB = """#!/bin/sh
# verify BUNDLE --pubkey KEY --workers 1: sleep, say, exit as the bundle's files say
[ "$1" = verify ] && [ "$3" = --pubkey ] && [ "$5" = --workers ] || exit 2
sleep "$(cat "$2/sleep")"
echo "stub verified $2 with $4"
echo "stub note on stderr for $2" >&2
exit "$(cat "$2/exit")"
"""


def _repo(tmp_path: Path, bundles: list[tuple[str, str, int, float]]) -> Path:
    """A scratch repository: the script, a verdict table and one folder per bundle
    (name, expected verdict, the stub's exit code, its sleep)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "verify_committed.sh", repo / "scripts")
    lines = []
    for name, verdict, code, sleep in bundles:
        folder = repo / "evidence" / "bundles" / name
        folder.mkdir(parents=True)
        (folder / "exit").write_text(str(code))
        (folder / "sleep").write_text(str(sleep))
        key = repo / "evidence" / "keys" / f"{name}.pub"
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text(f"stub key of {name}\n")
        lines.append(f"evidence/bundles/{name}\tevidence/keys/{name}.pub\t{verdict}")
    (repo / "evidence" / "verdicts.tsv").write_text("# path\tkey\tverdict\n"
                                                     + "\n".join(lines) + "\n")
    stub = tmp_path / "stub-topp-gate"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    return repo


def _run(repo: Path, jobs: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(repo / "scripts" / "verify_committed.sh"),
                           str(repo.parent / "stub-topp-gate")],
                          env={**os.environ, "VERIFY_JOBS": str(jobs)},
                          capture_output=True, text=True, timeout=120, check=False)


def test_outputs_come_whole_and_in_table_order_when_later_bundles_finish_first(tmp_path):
    # glob order is name order: a-slow finishes last but is printed first
    repo = _repo(tmp_path, [("a-slow", "PASS", 0, 1.5), ("b-fast", "STOP", 1, 0),
                            ("c-fast", "PASS", 0, 0)])
    done = _run(repo, jobs=3)
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    names = ["a-slow", "b-fast", "c-fast"]
    for name in names:
        block = said.index(f"stub verified evidence/bundles/{name} with "
                           f"evidence/keys/{name}.pub")
        assert said[block + 1] == f"stub note on stderr for evidence/bundles/{name}"
        assert said[block + 2].startswith(f"evidence/bundles/{name}: verified, verdict")
    starts = [said.index(f"stub verified evidence/bundles/{n} with evidence/keys/{n}.pub")
              for n in names]
    assert starts == sorted(starts)
    assert said[-1] == "verify_committed: 3 bundles verified"


def test_every_unexpected_exit_fails_and_is_named(tmp_path):
    # a PASS that exits 1, a verification failure (4), and a good one between them
    repo = _repo(tmp_path, [("a-pass-but-stop", "PASS", 1, 0.5), ("b-good", "STOP", 1, 0),
                            ("c-broken", "PASS", 4, 0)])
    done = _run(repo, jobs=2)
    assert done.returncode == 1
    assert ("verify_committed: evidence/bundles/a-pass-but-stop: exit 1, expected a "
            "verified PASS") in done.stderr
    assert ("verify_committed: evidence/bundles/c-broken: exit 4, expected a verified "
            "PASS") in done.stderr
    assert "evidence/bundles/b-good: verified, verdict STOP as expected" in done.stdout
    assert "verify_committed: 2 of 3 bundles failed" in done.stderr
    assert "bundles verified" not in done.stdout


def test_one_at_a_time_gives_the_same_verdicts(tmp_path):
    repo = _repo(tmp_path, [("a", "PASS", 0, 0), ("b", "STOP", 4, 0)])
    done = _run(repo, jobs=1)
    assert done.returncode == 1
    assert "evidence/bundles/a: verified, verdict PASS as expected" in done.stdout
    assert "verify_committed: evidence/bundles/b: exit 4, expected a verified STOP" in done.stderr


def test_a_bundle_folder_missing_from_the_table_fails_before_any_verify(tmp_path):
    repo = _repo(tmp_path, [("a", "PASS", 0, 0)])
    (repo / "evidence" / "bundles" / "unlisted").mkdir()
    done = _run(repo, jobs=2)
    assert done.returncode == 1
    assert "evidence/bundles/unlisted has no line in evidence/verdicts.tsv" in done.stderr
    assert "stub verified" not in done.stdout


def _name_key(repo: Path, bundle: str, key: str) -> int:
    """Point BUNDLE's line of the verdict table at KEY; returns that line's number."""
    table = repo / "evidence" / "verdicts.tsv"
    lines = table.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1)
                  if line.startswith(f"evidence/bundles/{bundle}\t"))
    path, _, verdict = lines[number - 1].split("\t")
    lines[number - 1] = f"{path}\t{key}\t{verdict}"
    table.write_text("\n".join(lines) + "\n")
    return number


@pytest.mark.parametrize("key", [
    "/etc/passwd",                               # an absolute path
    "evidence/keys/../../attacker.pub",          # .. out of evidence/keys
    "evidence/keys/./a.pub",                     # a . component
    "evidence/keys//a.pub",                      # an empty component
    "keys/attacker.pub",                         # another folder of the repository
    "evidence/attacker.pub",
    "evidence/keys",                             # the folder, not a key file in it
    "evidence/keys/missing.pub",                 # no such key file
    "evidence/keys/link.pub",                    # a link out of evidence/keys
    "evidence/keys/sub/passwd",                  # through a linked folder
    "--help",
])
def test_a_key_outside_evidence_keys_is_refused_before_any_verify(tmp_path, key):
    # an edited verdicts.tsv must not choose the key a bundle is verified with
    repo = _repo(tmp_path, [("a", "PASS", 0, 0), ("b", "STOP", 1, 0)])
    outside = tmp_path / "attacker.pub"
    outside.write_text("attacker key\n")
    (repo / "attacker.pub").write_text("attacker key\n")
    (repo / "keys").mkdir()
    (repo / "keys" / "attacker.pub").write_text("attacker key\n")
    (repo / "evidence" / "attacker.pub").write_text("attacker key\n")
    (repo / "evidence" / "keys" / "link.pub").symlink_to(outside)
    (repo / "evidence" / "keys" / "sub").symlink_to(tmp_path)
    (tmp_path / "passwd").write_text("attacker key\n")
    number = _name_key(repo, "b", key)
    done = _run(repo, jobs=2)
    assert done.returncode != 0
    refusal = [line for line in done.stderr.splitlines() if line.startswith("verify_committed:")]
    assert refusal == [f"verify_committed: evidence/verdicts.tsv line {number} "
                       f"(evidence/bundles/b) names the key {key}, not a key file under "
                       "evidence/keys/"], done.stderr
    assert "stub verified" not in done.stdout


def test_keys_in_a_folder_under_evidence_keys_are_accepted(tmp_path):
    repo = _repo(tmp_path, [("a", "PASS", 0, 0)])
    (repo / "evidence" / "keys" / "old").mkdir()
    (repo / "evidence" / "keys" / "old" / "a.pub").write_text("stub key\n")
    _name_key(repo, "a", "evidence/keys/old/a.pub")
    done = _run(repo, jobs=1)
    assert done.returncode == 0, done.stderr
    assert "stub verified evidence/bundles/a with evidence/keys/old/a.pub" in done.stdout
