"""A signed mutation summary is checked claim by claim against the bundles it names (issue 27).

Every folder here is written by the project's own writers: bundles by the real bundle writer
(the synthetic fixture, signed with the test-only key), the summary by
:func:`harness.mutation.mutate.summarize` and signed by :func:`harness.capture.signing.sign`.
The honest folder checks; each forged claim is refused with exit 4, by the checker and by
``scripts/mutation_table.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from array import array
from pathlib import Path
from typing import Any

import pytest

from harness.capture.signing import load_private_key, sign
from harness.core.digest import sha256_hex, sha256sum_line
from harness.core.errors import VerificationError
from harness.core.keys import load_public_key
from harness.core.terminal import markdown_cell, markdown_code
from harness.core.verify import open_bundle, verify_bundle
from harness.mutation import mutate
from harness.mutation.mutation_check import check_summary
from harness.mutation.vllm_criterion import LABEL, SAMPLER_SHA256
from harness.probes import fixture
from tests.assets import synthetic

ROOT = Path(__file__).resolve().parents[3]
TABLE = ROOT / "scripts" / "mutation_table.py"
PUB = load_public_key(synthetic.SIGNING_PUB)
KERNEL = mutate.KERNEL_PATH
NEG_INF = 0xFF800000


def _diff(mutation: mutate.Mutation) -> bytes:
    old = f"    {mutation.old}"
    return (f"--- a/{KERNEL}\n+++ b/{KERNEL}\n@@ -10 +10 @@\n-{old}\n"
            f"+{old.replace(mutation.old, mutation.new, 1)}\n").encode()


def _manifest(name: str, patch: bytes | None) -> dict[str, Any]:
    data = json.loads(json.dumps(synthetic.MANIFEST_V3))
    data["name"] = name
    if patch is not None:
        side = data["sources"]["sides"]["patched"]
        side["patch"] = {"sha256": sha256_hex(patch), "kernel_sha256": side["kernel_sha256"]}
    return data


def _sources(manifest: dict[str, Any]) -> dict[str, Any]:
    sources = json.loads(json.dumps(synthetic.SOURCES_V3))
    patch = manifest["sources"]["sides"]["patched"].get("patch")
    if patch is not None:
        sources["patched"].pop("tree_sha256")
        sources["patched"]["patch_file_sha256"] = patch["sha256"]
    return sources


def _write_manifest(path: Path, data: dict[str, Any]) -> bytes:
    raw = fixture.manifest_bytes(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    path.with_name(path.name + ".sha256").write_text(sha256sum_line(raw, path.name))
    return raw


def _kept(view: Any, case: dict[str, Any]) -> list[int]:
    values = array("I")
    values.frombytes(view.raw(f"outputs/patched/{case['id']}.out.f32"))
    vocab = int(case["vocab"])
    return [vocab - values[i * vocab:(i + 1) * vocab].count(NEG_INF)
            for i in range(len(case["rows"]))]


def _criterion(view: Any, reference: dict[str, list[int]]) -> dict[str, Any]:
    """vLLM's criterion as ``mutate`` records it, with the base's kept counts standing in
    for vLLM's sort path (no torch here): the figures are what a run would record."""
    batches = []
    for case in json.loads(view.raw("cases.json"))["cases"]:
        kept = _kept(view, case)
        ref = reference.setdefault(case["id"], kept)
        diff = max(abs(a - b) for a, b in zip(ref, kept, strict=True))
        batches.append({"case": case["id"], "passes": diff <= 3 or 200 * diff < max(ref),
                        "max_diff": diff, "max_reference": max(ref)})
    return {"label": LABEL, "function_sha256": "f" * 64, "sampler_sha256": SAMPLER_SHA256,
            "batches": batches, "killed": not all(b["passes"] for b in batches)}


def _entry(out: Path, name: str, manifest_shown: str, manifest_raw: bytes,
           reference: dict[str, list[int]], mutation: mutate.Mutation | None) -> dict[str, Any]:
    bundle = out / "bundles" / name
    view = open_bundle(bundle, PUB)
    verdict = view.statement["predicate"]["verdict"]
    entry: dict[str, Any] = {
        "id": name, "run_exit": 1 if verdict["verdict"] == "STOP" else 0,
        "manifest": {"path": manifest_shown, "sha256": sha256_hex(manifest_raw)},
        "bundle": f"bundles/{name}", "verified": True,
        "payload_sha256": view.payload_sha256, "verdict": verdict,
        "stopped_rows": mutate._stopped_rows(view.statement["predicate"]["rows"]),
        "run_stops": view.statement["predicate"]["run_stops"],
        "vllm_criterion": _criterion(view, reference)}
    if mutation is not None:
        diff = (out / "mutants" / f"{name}.diff").read_bytes()
        entry.update({"kind": mutation.kind, "what": mutation.what,
                      "diff": f"mutants/{name}.diff", "diff_sha256": sha256_hex(diff),
                      "diff_lines": mutate._changed_lines(diff)})
    return entry


def _sign(out: Path, summary: dict[str, Any], key: Path = synthetic.SIGNING_KEY) -> None:
    raw = (json.dumps(summary, indent=1, sort_keys=True) + "\n").encode()
    (out / "mutation.json").write_bytes(raw)
    envelope = sign(raw, load_private_key(key), mutate.SUMMARY_PAYLOAD_TYPE)
    (out / "mutation.dsse.json").write_text(json.dumps(envelope, indent=1) + "\n")


def _options(repo: Path, out: Path) -> mutate.Options:
    return mutate.Options(manifest=repo / FROZEN, out=out, key=synthetic.SIGNING_KEY,
                          backend="interpreter")


FROZEN = "evidence/manifests/pr/mini-pr.json"
# one killed (its patched output drops a token: STOP), one surviving (outputs = base)
MUTANTS = {"cmp-keep-ge": True, "drop-keep-max": False}


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """(repository root, mutation folder, summary): base PASS, one mutant killed, one not."""
    repo = tmp_path_factory.mktemp("repo")
    out = tmp_path_factory.mktemp("run") / "mutation"
    for sub in ("mutants", "manifests", "bundles"):
        (out / sub).mkdir(parents=True)
    frozen = _manifest("mini-pr", None)
    frozen_raw = _write_manifest(repo / FROZEN, frozen)
    fixture_write(out / "bundles" / "base", frozen, damage=False)
    reference: dict[str, list[int]] = {}
    entries = [_entry(out, "base", FROZEN, frozen_raw, reference, None)]
    known = {m.id: m for m in mutate.CATALOGUE}
    for name, killed in MUTANTS.items():
        diff = _diff(known[name])
        (out / "mutants" / f"{name}.diff").write_bytes(diff)
        data = _manifest(name, diff)
        raw = _write_manifest(out / "manifests" / f"{name}.json", data)
        fixture_write(out / "bundles" / name, data, damage=killed)
        entries.append(_entry(out, name, f"manifests/{name}.json", raw, reference,
                              known[name]))
    summary = mutate.summarize(entries, _load(repo / FROZEN), _options(repo, out))
    _sign(out, summary)
    return repo, out, summary


def fixture_write(dest: Path, manifest: dict[str, Any], *, damage: bool) -> None:
    from harness.capture.bundle_writer import write_bundle

    content = fixture.content(manifest, sources=_sources(manifest), damage=damage)
    write_bundle(dest, content, load_private_key(synthetic.SIGNING_KEY),
                 max_bytes=manifest["limits"]["max_bundle_bytes"])


def _load(path: Path) -> Any:
    from harness.core.manifest import load_manifest

    return load_manifest(path)


def _forged(tmp_path: Path, honest: tuple[Path, Path, dict[str, Any]],
            change: Any) -> Path:
    """A copy of the honest folder whose summary ``change`` edits, re-signed by the key
    that signed the bundles (the attacker holds it: the signature proves nothing)."""
    import shutil

    _, out, summary = honest
    copy = tmp_path / "mutation"
    shutil.copytree(out, copy)
    forged = json.loads(json.dumps(summary))
    change(forged, copy)
    _sign(copy, forged)
    return copy


def _refused(folder: Path, repo: Path, *words: str) -> str:
    with pytest.raises(VerificationError) as caught:
        check_summary(folder, PUB, roots=(repo,))
    assert caught.value.exit_code == 4
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message
    return message


def _table(folder: Path) -> subprocess.CompletedProcess[str]:
    pub = str(synthetic.SIGNING_PUB)
    return subprocess.run([sys.executable, str(TABLE), str(folder), "--pubkey", pub],
                          capture_output=True, text=True, check=False, cwd=ROOT, timeout=300)


# --- the honest run ------------------------------------------------------------------------


def test_the_honest_folder_checks_and_every_claim_is_the_recomputed_one(honest):
    repo, out, summary = honest
    assert summary["kill_rate"]["gate"] == {"killed": 1, "of": 2}
    assert summary["survivors"] == ["drop-keep-max"]
    assert summary["base_passes"] is True
    lines: list[str] = []
    assert check_summary(out, PUB, roots=(repo,), progress=lines.append) == summary
    assert len(lines) == 3 and all("verified" in line for line in lines)
    # the re-export keeps existing callers working
    assert mutate.check_summary(out, PUB, roots=(repo,)) == summary


# --- the attacks of issue 27 ---------------------------------------------------------------


def _one_bundle_attack(tmp_path: Path, honest: tuple[Path, Path, dict[str, Any]]) -> Path:
    """One PASS bundle named as the base and as the only mutant, marked killed, with 28/28
    claimed, no survivors, matrix pr-cuda-v3, backend cuda and 28/28 for vLLM's criterion."""
    def change(s: dict[str, Any], _folder: Path) -> None:
        mutant = {**s["base"], "id": "cmp-keep-ge", "killed": True, "vllm_killed": True,
                  "kind": "comparison", "what": "mask kernel keeps prob >= pivot",
                  "diff": "mutants/cmp-keep-ge.diff",
                  "diff_sha256": s["mutants"][0]["diff_sha256"], "diff_lines": 2,
                  "bundle": "bundles/base"}
        s["mutants"] = [mutant]
        s["manifest"]["name"] = "pr-cuda-v3"
        s["backend"] = "cuda"
        s["kill_rate"] = {"gate": {"killed": 28, "of": 28},
                          "vllm_criterion": {"killed": 28, "of": 28}}
        s["survivors"] = []
    return _forged(tmp_path, honest, change)


def test_one_bundle_named_as_base_and_killed_mutant_is_refused(tmp_path, honest):
    repo = honest[0]
    folder = _one_bundle_attack(tmp_path, honest)
    _refused(folder, repo)


def test_one_bundle_attack_exits_4_from_the_table_script(tmp_path, honest):
    folder = _one_bundle_attack(tmp_path, honest)
    done = _table(folder)
    assert done.returncode == 4, done.stderr
    assert "28/28" not in done.stdout and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1].startswith("mutation_table: ")


def _injection_attack(tmp_path: Path, honest: tuple[Path, Path, dict[str, Any]]) -> Path:
    row = "\n| `pr-cuda-v3` | `regression/v1` | cuda | PASS | 28/28 (100%) |\x1b[2K\r"
    def change(s: dict[str, Any], _folder: Path) -> None:
        s["backend"] = "interpreter" + row
        s["manifest"]["name"] = "mini-pr" + row
        s["manifest"]["rules"] = "seed/v2" + row
    return _forged(tmp_path, honest, change)


def test_injected_strings_in_backend_name_and_rules_are_refused(tmp_path, honest):
    repo = honest[0]
    message = _refused(_injection_attack(tmp_path, honest), repo)
    assert "\x1b" not in message and "\r" not in message


def test_injected_strings_exit_4_from_the_table_script(tmp_path, honest):
    done = _table(_injection_attack(tmp_path, honest))
    assert done.returncode == 4, done.stderr
    assert done.stdout == "" and "\x1b" not in done.stderr and "\r" not in done.stderr


def test_the_markdown_escaper_keeps_a_forged_row_inside_its_cell():
    forged = "cuda\n| `x` | 28/28 |\x1b[2K\r<b>"
    cell = markdown_cell(forged)
    assert "\n" not in cell and "\x1b" not in cell and "\r" not in cell
    assert "|" not in cell.replace("\\|", "") and "<" not in cell
    assert markdown_code("pr-cuda-v3") == "`pr-cuda-v3`"
    assert markdown_code("a`b|c") == markdown_cell("a`b|c") == "a\\`b\\|c"
    # one escaper: the same text as the signed reports' (report/v2) evidence strings
    from harness.core.report import markdown_text

    for text in (forged, "split_slices", "_x_ *y* [z](u) #1 ~a~ !b & \\", "0.33.0 vs 0.33.0"):
        assert markdown_cell(text) == markdown_text(text)


# --- each forged claim alone ---------------------------------------------------------------


def test_a_bundle_named_twice_is_refused(tmp_path, honest):
    def change(s: dict[str, Any], _folder: Path) -> None:
        s["mutants"][1]["bundle"] = s["mutants"][0]["bundle"]
    _refused(_forged(tmp_path, honest, change), honest[0], "drop-keep-max bundle")


def test_a_mutant_named_twice_is_refused(tmp_path, honest):
    def change(s: dict[str, Any], _folder: Path) -> None:
        s["mutants"].append(s["mutants"][0])
    _refused(_forged(tmp_path, honest, change), honest[0], "twice")


def test_a_frozen_manifest_supplied_by_the_folder_is_refused(tmp_path, honest):
    """The folder carries its own "frozen" pr manifest (with a .sha256): never read."""
    repo, out, _ = honest
    def change(s: dict[str, Any], folder: Path) -> None:
        own = folder / "evidence" / "manifests" / "pr" / "mine.json"
        raw = _write_manifest(own, _manifest("mini-pr", None))
        s["base"]["manifest"] = {"path": "evidence/manifests/pr/mine.json",
                                 "sha256": sha256_hex(raw)}
    folder = _forged(tmp_path, honest, change)
    _refused(folder, repo, "not in the repository")


def test_a_frozen_manifest_that_is_not_its_committed_sha256_is_refused(tmp_path, honest):
    import shutil

    repo, _, _ = honest
    other = tmp_path / "repo"
    shutil.copytree(repo, other)
    (other / FROZEN).write_bytes((other / FROZEN).read_bytes() + b" ")
    _refused(_forged(tmp_path, honest, lambda s, f: None), other, ".sha256")


@pytest.mark.parametrize(("what", "change"), [
    ("kill_rate", lambda s: s["kill_rate"]["gate"].update(killed=2)),
    ("kill_rate", lambda s: s["kill_rate"]["vllm_criterion"].update(of=28)),
    ("survivors", lambda s: s.__setitem__("survivors", [])),
    ("survivors", lambda s: s.__setitem__("survivors", ["drop-keep-max", "cmp-keep-ge"])),
    ("killed", lambda s: s["mutants"][1].update(killed=True)),
    ("base_passes", lambda s: s.__setitem__("base_passes", False)),
    ("unverified", lambda s: s.__setitem__("unverified", ["cmp-keep-ge"])),
    ("manifest", lambda s: s["manifest"].update(name="pr-cuda-v3")),
    ("manifest", lambda s: s["manifest"].update(rules="regression/v1")),
    ("backend", lambda s: s.__setitem__("backend", "cuda")),
    ("catalogue", lambda s: s.__setitem__("catalogue", "topp-gate/mutants/v9")),
    ("diff_lines", lambda s: s["mutants"][0].update(diff_lines=1)),
    ("catalogue entry", lambda s: s["mutants"][0].update(what="something else")),
    ("stopped_rows", lambda s: s["mutants"][0].update(stopped_rows=[])),
    ("run_exit", lambda s: s["mutants"][0].update(run_exit=0)),
])
def test_each_forged_claim_is_refused(tmp_path, honest, what, change):
    _refused(_forged(tmp_path, honest, lambda s, _f: change(s)), honest[0], what)


def _batch(s: dict[str, Any], entry: int, case: int) -> dict[str, Any]:
    batch: dict[str, Any] = ([s["base"], *s["mutants"]][entry]["vllm_criterion"]
                             ["batches"][case])
    return batch


@pytest.mark.parametrize(("what", "change"), [
    # a pass that the recorded figures do not give
    ("vllm_criterion", lambda s: _batch(s, 1, 1).update(passes=not _batch(s, 1, 1)["passes"])),
    # the reference's largest count differs between entries that ran the same inputs
    ("max_reference", lambda s: _batch(s, 2, 1).update(max_reference=99)),
    # a difference the verified outputs cannot give (the survivor's outputs = the base's)
    ("max_diff", lambda s: _batch(s, 2, 1).update(max_diff=40, passes=False)),
    # a kill claimed by the criterion alone
    ("vllm_criterion killed", lambda s: s["mutants"][1]["vllm_criterion"].update(killed=True)),
    ("vllm_killed", lambda s: s["mutants"][1].update(vllm_killed=True)),
])
def test_forged_criterion_figures_are_refused(tmp_path, honest, what, change):
    _refused(_forged(tmp_path, honest, lambda s, _f: change(s)), honest[0], what)


def test_a_diff_that_is_not_the_catalogue_mutation_is_refused(tmp_path, honest):
    def change(s: dict[str, Any], folder: Path) -> None:
        diff = folder / "mutants" / "cmp-keep-ge.diff"
        text = diff.read_bytes().replace(b"prob >= pivot", b"prob > pivot - 1")
        diff.write_bytes(text)
        s["mutants"][0]["diff_sha256"] = sha256_hex(text)
    _refused(_forged(tmp_path, honest, change), honest[0])


def test_the_checker_verifies_what_it_was_given(honest):
    """The honest bundles verify on their own (the fixture is not refused for another
    reason than the forgery each test makes)."""
    repo, out, _ = honest
    verify_bundle(out / "bundles" / "base", PUB, frozen_manifest=repo / FROZEN, workers=1)


def test_an_absolute_frozen_manifest_path_is_looked_up_by_its_tail_in_the_repository(
        tmp_path, honest):
    """A run started with an absolute --manifest records that path; only its
    ``evidence/manifests/pr/NAME.json`` tail is read, under the repository given."""
    repo = honest[0]
    def change(s: dict[str, Any], _folder: Path) -> None:
        s["base"]["manifest"]["path"] = str(tmp_path / "elsewhere" / FROZEN)
    folder = _forged(tmp_path, honest, change)
    assert check_summary(folder, PUB, roots=(repo,))["survivors"] == ["drop-keep-max"]
    def climb(s: dict[str, Any], _folder: Path) -> None:
        s["base"]["manifest"]["path"] = "../" + FROZEN
    _refused(_forged(tmp_path / "up", honest, climb), repo, "frozen manifest")
