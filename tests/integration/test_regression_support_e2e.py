"""Rule set ``regression-support/v1`` end to end on the CPU (issue 39), where FlashInfer
cannot run: the test-only sampling family ``torch-sampler`` (tests/assets/families/
torch_sampler.py: a sampling path that records its draws, as FlashInfer's do, and a mask
path) through `manifest new`, `run` and `verify` in real kernel children. The unchanged
kernel against itself PASSes (identical draws); a change that drops top-k before sampling
STOPs on the sampling rows it changes (drawn outside the allowed set where the base drew
inside), a verified STOP, and the report tells it in base/change words."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assets" / "families"))
import torch_sampler  # noqa: E402  (registers the family "torch-sampler")

from harness.capture.manifest_new import SideSpec, new_manifest  # noqa: E402
from harness.cli import main  # noqa: E402
from harness.core.errors import UsageError  # noqa: E402
from harness.core.manifest import load_manifest  # noqa: E402
from harness.pins.pinning import pin  # noqa: E402
from harness.pins.sources import kernel_diff  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PUB = ROOT / "tests/assets/keys/test-only-signing.pub"
RULES = "regression-support/v1"
MATRIX = {
    "schema": "topp-gate/matrix/v1",
    "description": "torch-sampler: a sampling path and a mask path (test).",
    "rules": RULES,
    "backend": {"required": "interpreter", "interpreter_sm_count": 2},
    "limits": {"max_vocab": 256, "max_batch": 4, "child_timeout_s": 300,
               "run_timeout_s": 600, "max_bundle_bytes": 1048576},
    "cases": [
        {"id": "sample-v256", "kind": "traffic", "vocab": 256, "batch": 4, "seed": 3,
         "rows": {"round": "bf16", "temperature": "0.7"},
         "sampling": [{"k": 1, "p": "0.9"}, {"k": 5, "p": "0.95"}, {"p": "0.5"}, {"k": 20}]},
        {"id": "mask-v256", "kind": "traffic", "vocab": 256, "batch": 3, "seed": 4,
         "rows": {"round": "bf16", "temperature": "0.7"},
         "sampling": [{"k": 3, "p": "0.9"}, {"p": "0.5"}, {"k": 10}],
         "paths": {"stock": "mask", "patched": "mask"}},
        {"id": "forced-v256", "kind": "forced", "vocab": 256, "background_seed": 9,
         "grid": {"value": ["1e9"], "p": ["0.5"], "forced_id": [0, 255]}},
    ],
}
KEEP = b"    in_k = ranks < k.unsqueeze(-1)\n"
DROP_K = b"    in_k = ranks < logits.shape[-1]\n"  # top-k lost


@pytest.fixture(autouse=True)
def _own_cache_only(monkeypatch):
    # these tests pin their own tree into their own cache: an exported-trees folder the
    # environment names (TOPP_GATE_SOURCES, as the Nix check and scripts/sandbox_tests.sh
    # set it) holds no test-only tree and would be read instead
    monkeypatch.delenv("TOPP_GATE_SOURCES", raising=False)


def _receipt(bundle: Path) -> dict:
    return json.loads((bundle / "receipt.json").read_bytes())["predicate"]


@pytest.fixture()
def pinned(tmp_path: Path):
    tree = tmp_path / "src"
    shutil.copytree(torch_sampler.TREE, tree)
    return pin(str(tree), tmp_path / "pins" / "sampler.pin.json", cache=tmp_path / "cache",
               family="torch-sampler"), tree


def _gate(tmp_path: Path, pin_path: Path, name: str, signing_key, patch: Path | None):
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps(MATRIX), encoding="utf-8")
    out = tmp_path / "gate" / f"{name}.json"
    new_manifest({"stock": SideSpec(pin_path), "patched": SideSpec(pin_path, patch=patch)},
                 str(matrix), out, cache=tmp_path / "cache")
    bundle = tmp_path / name
    args = ["run", "--manifest", str(out), "--out", str(bundle), "--key", str(signing_key),
            "--cache", str(tmp_path / "cache")]
    code = main(args + (["--patch", str(patch)] if patch else []))
    return out, bundle, code


@pytest.mark.slow
def test_an_unchanged_sampler_passes_and_one_that_drops_top_k_stops(tmp_path, capsys,
                                                                     signing_key, pinned):
    result, tree = pinned
    manifest, bundle, code = _gate(tmp_path, result.path, "same", signing_key, None)
    assert code == 0, capsys.readouterr().err
    assert load_manifest(manifest).rules == RULES
    predicate = _receipt(bundle)
    assert predicate["judgement"]["rules"] == RULES
    assert [c["paths"] for c in predicate["cases"]] == [
        {"stock": "sample", "patched": "sample"}, {"stock": "mask", "patched": "mask"},
        {"stock": "sample", "patched": "sample"}]
    rows = predicate["rows"]
    assert all("new_faults" in r["diagnostics"] for r in rows)  # sampling rows, judged
    assert all(r["diagnostics"]["patched_drawn"] >= 1 for r in rows[:4] + rows[7:])
    assert [r["diagnostics"]["patched_drawn"] for r in rows[7:]] == [1, 1]  # forced: 1e9
    assert "patched_drawn" not in rows[4]["diagnostics"]  # the mask case: regression/v2
    assert main(["verify", str(bundle), "--pubkey", str(PUB), "--frozen-manifest",
                 str(manifest), "--require-rules", RULES]) == 0, capsys.readouterr()
    assert "rows of a sampling path by the support of their draws" in \
        (bundle / "report.md").read_text("utf-8")

    source = (tree / torch_sampler.FAMILY.kernel_path).read_bytes()
    assert source.count(KEEP) == 1
    diff = tmp_path / "drop-k.diff"
    diff.write_bytes(kernel_diff(source, source.replace(KEEP, DROP_K),
                                 torch_sampler.FAMILY.kernel_path))
    capsys.readouterr()
    manifest, bundle, code = _gate(tmp_path, result.path, "drop-k", signing_key, diff)
    assert code == 1, capsys.readouterr().err
    broken = _receipt(bundle)["verdict"]["broken_rows"]
    # k 1 and k 5 rows of the sampler draw outside their k tokens; the mask's k rows too
    assert {"sample-v256[0]", "sample-v256[1]"} <= set(broken["new_fault"])
    assert broken["outside_support_growth"] == ["sample-v256[0]", "sample-v256[1]",
                                                "sample-v256[3]"]  # the rows with top-k
    assert {"mask-v256[0]", "mask-v256[2]"} <= set(broken["symdiff_growth"])  # as v2 judges
    assert "outside_support_growth" not in {r for r, rows in broken.items()
                                            if any(x.startswith("mask") for x in rows)}
    stopped = sum(broken.values(), [])
    assert "sample-v256[2]" not in stopped  # no top-k there: unchanged
    assert not any(r.startswith("forced") for r in stopped)  # the forced token holds all
    assert main(["verify", str(bundle), "--pubkey", str(PUB), "--frozen-manifest",
                 str(manifest), "--require-rules", RULES]) == 1  # a verified STOP


@pytest.mark.slow
def test_pr_answers_a_sampler_change_by_row_and_reuses_the_base(tmp_path, capsys,
                                                                 signing_key, pinned):
    """`topp-gate pr` with the sampler's matrix: a harmless change PASSes with both sides
    run, a harmful one STOPs reusing the verified base side, naming the broken sampling
    rows with their kept (drawn) counts."""
    result, tree = pinned
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps(MATRIX), encoding="utf-8")
    source = (tree / torch_sampler.FAMILY.kernel_path).read_bytes()
    path = torch_sampler.FAMILY.kernel_path
    harmless, harmful = tmp_path / "harmless.diff", tmp_path / "harmful.diff"
    harmless.write_bytes(kernel_diff(source, source.replace(b"\n", b"\n# reviewed\n", 1), path))
    harmful.write_bytes(kernel_diff(source, source.replace(KEEP, DROP_K), path))
    common = ["--matrix", str(matrix), "--backend", "interpreter", "--key", str(signing_key),
              "--cache", str(tmp_path / "cache")]
    assert main(["pr", str(result.path), "--patch", str(harmless), "--out",
                 str(tmp_path / "pr-harmless"), *common]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.startswith("PASS") and "outputs: 0 of 9 rows differ" in out
    assert main(["pr", str(result.path), "--patch", str(harmful), "--out",
                 str(tmp_path / "pr-harmful"), *common]) == 1
    out = capsys.readouterr().out
    assert out.startswith("STOP: the change broke 5 of 9 rows")
    assert "  sample-v256[0]  mass_outside_growth,new_fault,outside_support_growth  sample" in out
    assert "base: reused" in out, out


SAMPLING = {"draws_per_row": 16, "seed": 7, "offset": 3}


def _freeze(tmp_path: Path, pin_path: Path, matrix: dict, name: str, **spec):
    path = tmp_path / f"{name}-matrix.json"
    path.write_text(json.dumps(matrix), encoding="utf-8")
    out = tmp_path / "gate" / f"{name}.json"
    new_manifest({side: SideSpec(pin_path, **spec) for side in ("stock", "patched")},
                 str(path), out, cache=tmp_path / "cache")
    return out


def test_manifest_new_freezes_the_declared_draws_and_refuses_bad_or_unread_ones(tmp_path,
                                                                               pinned):
    result, _ = pinned
    frozen = _freeze(tmp_path, result.path, {**MATRIX, "sampling": SAMPLING}, "declared")
    assert load_manifest(frozen).sampling == SAMPLING
    assert json.loads(frozen.read_bytes())["sampling"] == SAMPLING
    assert load_manifest(_freeze(tmp_path, result.path, MATRIX, "none")).sampling is None
    for bad, says in [({**SAMPLING, "draws_per_row": 0}, "draws_per_row 0 is not an integer"),
                      ({**SAMPLING, "seed": 1 << 64}, "seed 18446744073709551616 is not"),
                      ({**SAMPLING, "offset": -1}, "offset -1 is not an integer in 0.."),
                      ({**SAMPLING, "seed": True}, "seed True is not an integer"),
                      ({"seed": 7}, "an object of exactly draws_per_row, seed, offset")]:
        with pytest.raises(UsageError) as err:
            _freeze(tmp_path, result.path, {**MATRIX, "sampling": bad}, "bad")
        assert says in str(err.value) and "\n" not in str(err.value)
        assert not (tmp_path / "gate" / "bad.json").exists()
    # no case draws when both sides take the mask path: nothing would read the declaration
    masks = {**MATRIX, "sampling": SAMPLING, "rules": "regression/v2",
             "cases": [{k: v for k, v in c.items() if k != "paths"} for c in MATRIX["cases"]
                       if c["kind"] == "traffic"]}
    with pytest.raises(UsageError, match="no case takes a path that draws tokens on either "
                                         r"side \(torch-sampler\)"):
        _freeze(tmp_path, result.path, masks, "masks", dispatch="mask")


@pytest.mark.slow
def test_the_kernel_child_draws_with_the_declared_values_and_verify_holds_it_to_them(
        tmp_path, capsys, signing_key, pinned):
    """run with a manifest that declares 16 draws, seed 7, offset 3: the cases index carries
    them, every sampling case's record of each side drew with them (16 draws a row), the
    bundle verifies, and its inputs refuse to be reused for a manifest declaring others."""
    from harness.capture.reused_inputs import copy_inputs
    from harness.core.keys import load_public_key

    result, _ = pinned
    frozen = _freeze(tmp_path, result.path, {**MATRIX, "sampling": SAMPLING}, "declared")
    bundle = tmp_path / "bundle"
    assert main(["run", "--manifest", str(frozen), "--out", str(bundle), "--key",
                 str(signing_key), "--cache", str(tmp_path / "cache")]) == 0, \
        capsys.readouterr().err
    assert json.loads((bundle / "cases.json").read_bytes())["sampling"] == SAMPLING
    for side in ("stock", "patched"):
        evidence = _receipt(bundle)["kernel_path"][side]
        assert {k: evidence[k] for k in SAMPLING} == SAMPLING
        drawing = [r for r in evidence["cases"] if "draws" in r]
        assert [r["id"] for r in drawing] == ["sample-v256", "forced-v256"]
        for record in drawing:
            assert {k: record["sample"][k] for k in SAMPLING} == SAMPLING
            assert all(sum(c for _, c in row) == 16 for row in record["draws"])
    assert main(["verify", str(bundle), "--pubkey", str(PUB), "--frozen-manifest",
                 str(frozen)]) == 0, capsys.readouterr()
    other = _freeze(tmp_path, result.path, {**MATRIX, "sampling": {**SAMPLING, "seed": 8}},
                    "other")
    with pytest.raises(UsageError, match="its cases are not this manifest's"):
        copy_inputs(bundle, load_public_key(PUB), load_manifest(other), tmp_path / "reuse")
