"""The mutant catalogues (harness.mutation.mutant_catalogue): v1 frozen, v2 = v1 + the
monolithic kernel and the dispatch, every entry applying exactly to vLLM 0.33.0's kernel."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import rfc8785

from harness.cli import main
from harness.core.digest import sha256_hex
from harness.core.errors import HarnessError, UsageError
from harness.mutation import mutate as mutate_module
from harness.mutation.mutant_catalogue import (
    CATALOGUES,
    DEFAULT_ID,
    KINDS,
    MONOLITHIC_AND_DISPATCH,
    PYTORCH_V1_ID,
    V1,
    V1_ID,
    V2,
    V2_ID,
    Mutation,
)
from harness.mutation.mutate import CATALOGUE, CATALOGUE_ID, Options, catalogue, mutant_diff
from harness.mutation.mutate import mutate as apply_mutation
from harness.pins import sources

KERNEL_SHA256 = "6264a524884274824b65c3a3a91d4d34418561cde566c31879cb394acd85f2ef"
ID_SHAPE = re.compile(r"[a-z0-9][a-z0-9.-]{0,63}")
V1_FIELDS = ("id", "kind", "what", "old", "new", "occurrence")
# sha256 of each v1 entry's RFC 8785 canonical JSON over its six original fields, computed
# from the catalogue as committed before v2 existed (mutate.py at 68572f0): committed
# mutation summaries bind these entries, so none may change, move or go.
V1_PINS = (
    ("cmp-keep-ge", "158f5319dec6fbc1200f87df6970ac15025f5622ed87f0257cbbb05a8d172ac9"),
    ("cmp-above-ge", "88427c893dd56e872518e2293dbbc7f92f9c3927a988dd42d9e32832dd20716c"),
    ("cmp-ok-gt", "2ee3aa03bb728838e6f8c77783400bff1296a472052d739bcb1394a379eeb3e8"),
    ("cmp-ok-dup-le", "0135089551dc601d893fa70ba9e8e348cfba72b98c881124029d26548ab5c76a"),
    ("cmp-nomask-gt", "e0df31192696e8fdc31aa06ce322955e3ddc083317762601855338a3e672f928"),
    ("cmp-best-lt", "38db50e12271c3e86049d052f96c84232d19166c30066c9b87af949a0a149ef5"),
    ("cmp-ties-le", "a529eed2463906685f80a40f977e7aa29fc315970dbc97a9f4fe1920d390f92e"),
    ("obo-dup-budget-lt", "bd2c8169786b69817a5d48a7da4a39732e6f6d7b72152ed58a8ad9e1e5eb82fa"),
    ("obo-dup-budget-plus1", "e58f36f04b760035695f4bf195e23e50d7ed161461494261423931a89dfd57ae"),
    ("obo-numkeep-floor0", "998d1a6e6436c0ea21bc48680ae2e4762869e595a37c4c68b354411e41168ba2"),
    ("obo-preceding-le", "c622e128a3358c09fe024e6711bddad8c15bc3d8bc4946242ff2dc0db659f465"),
    ("obo-slice-len-mask", "806217cbca5b285b52e477a6e36b21a955f8d69cc7e3cb74f974d08947a9f0c8"),
    ("obo-slice-len-step", "4bd0ba194c06155dbd714e86da7747b79c18fe0d57cf7d72acff68bca3214e86"),
    ("obo-split-count", "5247c42f63b033cab59227d2b781d36efb2d316226048bc79dbf514a88a96c28"),
    ("drop-keep-max", "f5888d7caa94c78027467f8adb4ebcda8fc9ac32f11222263051b0292b42e044"),
    ("drop-ok-minimal", "62ff382c4a19da73adffe2a440fb8c3e348131dd99fa592e74c5f67480bfaefb"),
    ("drop-dup-mask", "d70cb4db1afc6879b7957f315e15f6df94479f63cc7d4ca3b0795d8f88633f19"),
    ("const-rounds-3", "e49ae3cf844c86153ed38c21414668d0d7099e9d374ac833886200fdea46dea5"),
    ("const-fanout-4", "f897a03165c72a0814f91fcd72f8972f00f02223ed247db8ce91cb2a3fbe579f"),
    ("const-collapse-1e-3", "5b9877f100bc7f05a57eb9377d028355de3b33e1ce60dfc21c247b93991543ca"),
    ("const-tie-tol-1e-6", "63b24c731770d954553968a51728b900f7ec78e7d66d39e5cbdb61d077dea5d7"),
    ("const-uniform-1e-3", "b680633550922f1e3aa2e28f5dc19378f00d69797eaf5bf4dd58cac39d0bd6cd"),
    ("const-min-prob-1e-12", "3a4e06249897b6dcb1b52f18bb0419943f24307c34bfa4dcd65412334ef7e0ff"),
    ("const-ladder-top", "88ce074421f90e0d1c4818993a59fd999664a6e08d8452ebb9591bf654f650ab"),
    ("prec-mask-recip", "e338f24272357adfed31ddbf1dbf92780618d1acd8b2f5a6631eff5c9edbe4d6"),
    ("prec-step-fp16", "b03409c6690a9ac5a8f0bb46c8421c5d97d454823c0466c94d375af085ae709f"),
    ("prec-stats-fp16", "d3fbd64b7694c98f9b20c0fac084ea7276965485f7a0dd1390266923ca8c5012"),
    ("prec-rowsum-fp16", "86110469e5219f96daea09f69916f60611b34d9559efc602a1c30d3e90df7a8c"),
)


def _v1_digest(m: Mutation) -> str:
    return hashlib.sha256(rfc8785.dumps({f: getattr(m, f) for f in V1_FIELDS})).hexdigest()


def test_v1_is_exactly_the_committed_catalogue():
    assert [(m.id, _v1_digest(m)) for m in CATALOGUES[V1_ID]] == list(V1_PINS)
    assert all(m.target == "" and m.principle == "" for m in V1)


def test_v2_is_v1_unchanged_then_the_new_entries():
    assert CATALOGUES[V2_ID][:len(V1)] == V1
    assert CATALOGUES[V2_ID][len(V1):] == MONOLITHIC_AND_DISPATCH == V2[len(V1):]
    assert 20 <= len(MONOLITHIC_AND_DISPATCH) <= 28
    assert set(CATALOGUES) == {V1_ID, V2_ID, PYTORCH_V1_ID, "topp-gate/mutants/flashinfer-v1"}
    assert DEFAULT_ID == V2_ID


@pytest.mark.parametrize("catalogue_id", [V1_ID, V2_ID, PYTORCH_V1_ID])
def test_ids_are_unique_and_catalogue_shaped(catalogue_id):
    ids = [m.id for m in CATALOGUES[catalogue_id]]
    assert len(set(ids)) == len(ids)
    assert all(ID_SHAPE.fullmatch(i) for i in ids)
    assert all(m.kind in KINDS for m in CATALOGUES[catalogue_id])


def test_every_new_entry_names_its_target_and_principle_and_one_line():
    for m in MONOLITHIC_AND_DISPATCH:
        assert m.target and m.principle and m.what, m.id
        assert m.occurrence >= 1, m.id  # one line, never every line
        assert m.old != m.new and "\n" not in m.old + m.new, m.id
        assert m.target.startswith(("_topk_topp_kernel", "_update_min_larger_stats",
                                     "apply_top_k_top_p_triton", "_topp_split_count",
                                     "_topp_sb_stats_kernel")), m.id
    kinds = {m.kind for m in MONOLITHIC_AND_DISPATCH}
    assert kinds == set(KINDS)


def test_mutate_keeps_its_public_names_for_existing_callers():
    assert CATALOGUE_ID == DEFAULT_ID and CATALOGUE == CATALOGUES[DEFAULT_ID]
    assert mutate_module.Mutation is Mutation and mutate_module.CATALOGUES is CATALOGUES
    assert mutate_module.KINDS == KINDS
    assert catalogue() == list(V2)
    assert catalogue(None, V1_ID) == list(V1)
    assert [m.id for m in catalogue(["mk-final-dup-lt", "cmp-keep-ge"])] == [
        "mk-final-dup-lt", "cmp-keep-ge"]
    assert Options(manifest=Path("m"), out=Path("o"), key=Path("k")).catalogue == V2_ID


def test_unknown_catalogue_or_mutant_is_refused_in_one_line():
    with pytest.raises(UsageError, match="unknown mutant catalogue"):
        catalogue(None, "topp-gate/mutants/v9")
    with pytest.raises(UsageError, match="unknown mutant 'mk-final-dup-lt' in"):
        catalogue(["mk-final-dup-lt"], V1_ID)  # a v2 entry is not in v1


def test_summary_records_the_catalogue_it_ran(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_bytes(b"{}\n")
    options = Options(manifest=manifest, out=tmp_path / "o", key=tmp_path / "k",
                      catalogue=V1_ID)
    base = {"id": "base", "verified": True, "verdict": {"verdict": "PASS"}}
    mutant = {"id": "cmp-keep-ge", "verified": True, "verdict": {"verdict": "STOP"},
              "diff_lines": 2}
    frozen = SimpleNamespace(name="m", rules="regression/v1")
    summary = mutate_module.summarize([base, mutant], frozen, options)
    assert summary["catalogue"] == V1_ID
    assert summary["kill_rate"]["gate"] == {"killed": 1, "of": 1}
    summary = mutate_module.summarize([dict(base), dict(mutant)], frozen,
                                      replace(options, catalogue=V2_ID))
    assert summary["catalogue"] == V2_ID


def test_list_prints_the_chosen_catalogue_with_targets(capsys):
    assert main(["mutate", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"# {V2_ID}: {len(V2)} mutants" and len(lines) == 1 + len(V2)
    row = dict((line.split("\t")[0], line.split("\t")) for line in lines[1:])
    entry = MONOLITHIC_AND_DISPATCH[0]
    assert row[entry.id] == [entry.id, entry.kind, entry.what, entry.target, entry.principle]
    assert row["cmp-keep-ge"][3:] == ["-", "-"]
    assert main(["mutate", "--list", "--catalogue", V1_ID]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"# {V1_ID}: {len(V1)} mutants" and len(lines) == 1 + len(V1)
    assert main(["mutate", "--list", "--catalogue", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown mutant catalogue 'nope'" in err and len(err.strip().splitlines()) == 1


# --- against the pinned kernel -----------------------------------------------------------


@pytest.fixture(scope="module")
def kernel() -> bytes:
    side = sources.load_pins().side("patched")
    try:
        tree = sources.resolve_tree(side, cache=sources.cache_root())
    except HarnessError as err:
        pytest.skip(f"vLLM 0.33.0 sources: {err}")
    raw = (tree / side.kernel_path).read_bytes()
    assert side.version == "0.33.0" and sha256_hex(raw) == KERNEL_SHA256
    return raw


@pytest.mark.sources
@pytest.mark.parametrize("entry", V2, ids=[m.id for m in V2])
def test_every_v2_entry_applies_to_its_stated_line_only(kernel, entry):
    lines = kernel.decode("utf-8").splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if entry.old in line]
    assert hits and (entry.occurrence == 0 or entry.occurrence <= len(hits)), entry.id
    targets = hits if entry.occurrence == 0 else [hits[entry.occurrence - 1]]
    mutated = apply_mutation(kernel, entry).decode("utf-8").splitlines(keepends=True)
    assert len(mutated) == len(lines)
    changed = [i for i, (a, b) in enumerate(zip(lines, mutated, strict=True)) if a != b]
    assert changed == targets
    for i in changed:
        assert mutated[i] == lines[i].replace(entry.old, entry.new, 1)
    ast.parse("".join(mutated))  # importable text
    diff = mutant_diff(kernel, kernel, entry)  # the strict applier reproduces it
    assert mutate_module._changed_lines(diff) == 2 * len(targets)  # one line out, one in


@pytest.mark.sources
def test_each_new_entry_names_a_line_the_kernel_holds_the_stated_number_of_times(kernel):
    text = kernel.decode("utf-8").splitlines()
    counts = {m.id: sum(1 for line in text if m.old in line) for m in MONOLITHIC_AND_DISPATCH}
    several = {mid: n for mid, n in counts.items() if n > 1}
    # the lines vLLM repeats: each entry picks its copy by occurrence
    assert several == {
        "mk-topk-iters-6": 2, "mk-topk-fallback-stop-1e-3": 2, "mk-kp-iters-8": 3,
        "mk-kp-budget-plus1": 2, "mk-p-iters-8": 3, "mk-p-full-stop-1e-6": 3,
        "mk-p-probs-fp16": 4, "mk-p-budget-round": 2, "mk-final-dup-carry": 2,
        "disp-slice-len-stats": 3}


def test_a_line_another_release_lacks_is_refused():
    entry = MONOLITHIC_AND_DISPATCH[0]
    with pytest.raises(UsageError, match="is not in this kernel"):
        apply_mutation(b"x = 1\n", entry)
    with pytest.raises(UsageError, match="occurrence 2"):
        apply_mutation(entry.old.encode() + b"\n", replace(entry, occurrence=2))
