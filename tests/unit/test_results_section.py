"""scripts/results_section.py: the README results section, generated from real bundles
(SYNTHETIC ones here, written by the real bundle writer with the test-only key). The
renderer itself (:mod:`harness.present.results`) is tested in tests/unit/present/."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "assets"))

import synthetic  # noqa: E402

from harness.capture.bundle_writer import write_bundle  # noqa: E402
from harness.capture.signing import load_private_key  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.probes import fixture  # noqa: E402

_spec = importlib.util.spec_from_file_location("results_section",
                                               ROOT / "scripts" / "results_section.py")
assert _spec and _spec.loader
results_section = importlib.util.module_from_spec(_spec)
sys.modules["results_section"] = results_section
_spec.loader.exec_module(results_section)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """evidence/bundles-like layout: one interpreter bundle and one 'cuda' bundle holding
    the same captured bytes (the synthetic manifest with its backend changed)."""
    root = tmp_path_factory.mktemp("bundles")
    synthetic.write(root / "smoke")
    cuda_manifest = dict(synthetic.MANIFEST, name="synthetic-cuda",
                         backend={**synthetic.MANIFEST["backend"], "required": "cuda"})
    # the same captured bytes, its evidence naming the backend its manifest requires, so it
    # verifies (the script reads only bundles it has just verified)
    content = fixture.content(cuda_manifest)
    write_bundle(root / "h200", content, load_private_key(synthetic.SIGNING_KEY),
                 max_bytes=synthetic.MANIFEST["limits"]["max_bundle_bytes"])
    return root


def _readme(tmp_path: Path, section: str) -> Path:
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nintro\n\n{section}\n## After\n\ntext\n", "utf-8")
    return readme


PUB = load_public_key(synthetic.SIGNING_PUB)


def _flint_missing() -> bool:
    try:
        import flint  # noqa: F401
    except ImportError:
        return True
    return False


# generate() runs the exact-real diagnostic (topp-gate exact) on every row: without the
# exact extra those tests skip, saying so (the Nix sandbox's test environment has no
# python-flint: docs/nix.md), instead of failing with missing_extra.
needs_flint = pytest.mark.skipif(
    _flint_missing(),
    reason="python-flint is not installed: the results section runs topp-gate exact, which "
    "needs the exact extra (pip install '.[exact]' in the checkout)",
)


def _args(bundles: Path, *rest: str, comparison: Path | None = None) -> list[str]:
    return ["--bundles", str(bundles), "--pubkey", str(synthetic.SIGNING_PUB),
            "--comparison", str(comparison or bundles / "no-comparison.json"), *rest]


def test_committed_bundles_read_through_both_codecs(tmp_path: Path) -> None:
    """The real committed bundles (CUDA on an H200; Triton's interpreter), checked with the
    project's public key. Their shared rows are forced-v32000 rows whose logits are stored
    as xz and p as zlib: both are decoded and digest-checked to compare them."""
    bundles = ROOT / "evidence" / "bundles"
    cuda = bundles / "h200-forced-logit-gate-cuda-20261129"
    smoke = bundles / "smoke-interpreter-20261129"
    if not (cuda.is_dir() and smoke.is_dir()):
        pytest.skip("the committed evidence bundles are not in this checkout")
    for bundle in (cuda, smoke):
        suffixes = {p.name.rsplit(".", 1)[1] for p in (bundle / "inputs").iterdir()}
        assert suffixes == {"xz", "zz"}
    pub = load_public_key(ROOT / "evidence" / "keys" / "topp-gate-evidence.pub")
    text = results_section.generate(bundles, public_key=pub,
                                    comparison=tmp_path / "absent.json", exact=False)
    assert "- Backend: cuda on NVIDIA H200." in text
    assert "### CUDA (`h200-forced-logit-gate-cuda-20261129`) against the interpreter " \
           "(`smoke-interpreter-20261129`)" in text
    assert "shared row(s): same case id and label and identical captured logits" in text


@needs_flint
def test_section_holds_the_figures(bundles: Path) -> None:
    text = results_section.generate(bundles, public_key=PUB)
    assert text.startswith(results_section.BEGIN + "\n## Results")
    assert text.endswith(results_section.END + "\n")
    assert "### synthetic-test-fixture" in text and "### synthetic-cuda" in text
    assert "- Verdict: **PASS** over 7 rows (0 stopped)" in text
    # the synthetic stock side masks every forced row: it lost the token on all 4 at 1e30
    assert ("stock lost the forced token on 4 of 4 rows (forced values 1e30); "
            "patched held on 4 of 4") in text
    assert "Triton's interpreter on the CPU (not GPU evidence)" in text
    assert "0 better, 3 equal, 0 worse" in text
    assert "### CUDA (`h200`) against the interpreter (`smoke`)" in text
    assert "- 7 shared row(s): same case id and label and identical captured logits" in text
    assert ("- stock: output bytes identical on 7 of 7, kept set equal on 7 of 7, kept count "
            "equal on 7 of 7") in text
    assert "cuda_vs_interpreter" not in text  # no comparison file given
    # every row's exact-real count, derived from the same bytes (7 rows, none stopped)
    assert text.count("- Exact-real counts (derived by `topp-gate exact`, not attested by the "
                      "receipt; never a stop): binary64 and exact-real counts agree on 7 of 7 "
                      "rows.") == 2
    assert "| stopped row |" not in text


@needs_flint
def test_check_passes_on_current_and_fails_on_stale(bundles: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    section = results_section.generate(bundles, public_key=PUB)
    readme = _readme(tmp_path, section)
    assert results_section.main(_args(bundles, "--check", str(readme))) == 0

    stale = _readme(tmp_path, section.replace("**PASS**", "**STOP**", 1))
    assert results_section.main(_args(bundles, "--check", str(stale))) == 1
    assert "out of date" in capsys.readouterr().err

    assert results_section.main(_args(bundles, "--write", str(stale))) == 0
    assert results_section.main(_args(bundles, "--check", str(stale))) == 0
    assert stale.read_text("utf-8").endswith("\n## After\n\ntext\n")


@needs_flint
def test_check_refuses_missing_markers_and_tampered_bundles(bundles: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n", "utf-8")
    assert results_section.main(_args(bundles, "--check", str(readme))) == 2
    assert "results:begin" in capsys.readouterr().err

    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(bundles / "smoke", copy / "smoke")
    rows = copy / "smoke" / "results" / "rows.json"
    rows.write_bytes(rows.read_bytes().replace(b"true", b"True", 1))  # same size, new bytes
    assert results_section.main(_args(copy)) == 2
    err = capsys.readouterr().err
    assert "binding_mismatch: sha256 of stored results/rows.json" in err


def test_a_bundle_signed_by_another_key_is_refused(bundles: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    args = _args(bundles)
    args[args.index("--pubkey") + 1] = str(synthetic.OTHER_PUB)
    assert results_section.main(args) == 2
    assert "bad_signature" in capsys.readouterr().err


def test_no_bundles_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert results_section.main(_args(tmp_path)) == 2
    assert "no bundle" in capsys.readouterr().err


def _comparison(path: Path, rows: object, problems: object = ()) -> Path:
    """A file shaped as benchmarks/cuda_vs_interpreter.py --json writes it."""
    document = {"schema": "topp-gate/cuda-vs-interpreter/v1",
                "bundle": {"path": "evidence/bundles/h200"}, "rows": rows,
                "problems": list(problems) if isinstance(problems, tuple) else problems}
    path.write_text(json.dumps(document), "utf-8")
    return path


def _row(case: str, row: int, side: str, same: bool, cuda: int, interp: int
         ) -> dict[str, object]:
    return {"case": case, "row": row, "side": side, "label": "x", "byte_identical": same,
            "kept_sets_equal": same, "kept_cuda": cuda, "kept_interpreter": interp,
            "oracle_count": cuda, "slices": 16}


@needs_flint
def test_comparison_file_is_summarized(bundles: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = _comparison(tmp_path / "cmp.json", [
        _row("ordinary-a", 0, "stock", True, 5, 5), _row("ordinary-a", 0, "patched", True, 4, 4),
        _row("ordinary-a", 1, "stock", False, 7, 6),
        _row("ordinary-a", 1, "patched", False, 3, 3),
        _row("forced-b", 2, "stock", True, 0, 0),
    ], problems=("forced-c patched: interpreter timeout: over 600 s",))
    assert results_section.main(_args(bundles, comparison=path)) == 0
    out = capsys.readouterr().out
    assert ("### CUDA (`evidence/bundles/h200`) against the interpreter on the same captured "
            f"bytes (`{path}`)") in out
    assert "- 3 row(s) of 2 case(s) compared (forced-b, ordinary-a): " in out
    assert ("- stock: output bytes identical on 2 of 3, kept set equal on 2 of 3, kept count "
            "equal on 2 of 3 (kept counts CUDA/interpreter seen: 0/0, 5/5, 7/6); counts "
            "differ on ordinary-a[1] 7/6.") in out
    assert ("- patched: output bytes identical on 1 of 2, kept set equal on 1 of 2, kept "
            "count equal on 2 of 2") in out
    assert "- Not compared (1): forced-c patched: interpreter timeout: over 600 s." in out


@needs_flint
@pytest.mark.parametrize("rows, problems, message", [
    ({"case": "x"}, (), "needs a rows list"),
    ([], "none", "needs a rows list"),
    ([{**_row("x", 0, "stock", True, 1, 1), "row": "0"}], (), "rows[0] needs case (str)"),
    ([{**_row("x", 0, "stock", True, 1, 1), "byte_identical": 1}], (), "rows[0] needs"),
    ([_row("x", 0, "both", True, 1, 1)], (), "side stock or patched"),
    ([_row("x", 0, "stock", True, 1, 1)] * 2, (), "rows[1] repeats x[0] stock"),
])
def test_malformed_comparison_file_is_bad_input(bundles: Path, tmp_path: Path, rows: object,
                                                problems: object, message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _comparison(tmp_path / "cmp.json", rows, problems)
    assert results_section.main(_args(bundles, comparison=path)) == 2
    assert message in capsys.readouterr().err


@needs_flint
def test_comparison_file_of_another_schema_is_bad_input(bundles: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    path = tmp_path / "cmp.json"
    path.write_text(json.dumps({"rows": []}), "utf-8")
    assert results_section.main(_args(bundles, comparison=path)) == 2
    assert "not a topp-gate/cuda-vs-interpreter/v1 document" in capsys.readouterr().err
