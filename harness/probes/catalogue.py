"""The probe catalogue: the seed's breakage probes, each a function of the run's context.

A probe breaks one thing on purpose (a tampered bundle, a bad input, a limit exceeded, a
drifted source) and drives the real module that must refuse it: the oracle, the judge and
gate, the manifest loader, the kernel runner, the bundle writer, the sources checker or the
offline verifier. It declares in advance the error code (or gate stop reason) that refusal
must carry; it passes only when exactly that code is observed. Anything else (no error, a
different code, an unexpected exception) is a failed probe.

Bundles are tiny (:mod:`harness.probes.fixture`), written in the run's temporary
directory by the real writer, signed with a throwaway Ed25519 key that is never stored, and
tampered with by the mutators of :mod:`harness.probes.tamper`.

Groups (the seed's "Breakage probes"): ``unreadable`` state, ``boundary`` input,
``bounds``, ``drift``.
"""

from __future__ import annotations

import dataclasses
import math
import random
import shutil
import struct
from typing import Any

from ..capture.bundle_writer import BundleContent
from ..core.errors import HarnessError
from ..core.f32 import encode, runtime_p, to_float32
from . import tamper
from .fixture import content, manifest_bytes
from .probe import Probe, ProbeContext, ProbeSkipped, SignedBundle, WrongReason

NEG = -math.inf
FLOAT32_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]


# --- helpers -------------------------------------------------------------------------------------


def _stops(results: list[dict[str, Any]]) -> str:
    """The observed code of a judged set: its verdict's stop reasons, or ``accepted``."""
    from ..core.gate import verdict

    v = verdict(results)
    return ",".join(v["reasons"]) if v["verdict"] == "STOP" else "accepted"


def _rng(seed: int) -> random.Random:
    """Reproducible probe data (not security-relevant)."""
    return random.Random(seed)  # noqa: S311


def _row(rnd: random.Random, vocab: int) -> list[float]:
    return [to_float32(rnd.gauss(0.0, 1.0)) for _ in range(vocab)]


def _masked(row: list[float], kept: set[int]) -> list[float]:
    return [v if i in kept else NEG for i, v in enumerate(row)]


def _judge_one(row: list[float], p32: float, stock: list[float] | bytes | str,
               patched: list[float] | bytes | str, *, kind: str = "ordinary",
               forced_id: int | None = None, logits: bytes | None = None) -> str:
    from ..core.judge import CaseBytes, RowSpec, judge_cases

    def side(value: list[float] | bytes | str) -> bytes | str:
        return encode(value) if isinstance(value, list) else value

    case = CaseBytes("probe", len(row), [RowSpec(kind, forced_id)],
                     encode(row) if logits is None else logits, encode([p32]),
                     side(stock), side(patched), split_path=True)
    return _stops(judge_cases([case]))


def _oracle_kept(row: list[float], p32: float) -> list[int]:
    from ..core.oracle import Certified, reference

    outcome = reference(row, p32)
    if not isinstance(outcome, Certified):
        raise AssertionError("precondition: the oracle did not certify the probe row")
    return list(outcome.kept)


# --- a tiny bundle -------------------------------------------------------------------------------


def probe_manifest(*, vocab: int = 48, max_vocab: int = 4096, batch: int = 3,
                   max_bundle_bytes: int = 4_000_000) -> dict[str, Any]:
    """A small manifest (pins from the package) for probe bundles and limit checks."""
    from ..pins.sources import load_pins

    pins = load_pins()
    sides = {name: {"version": s.version, "wheel": s.wheel, "wheel_sha256": s.wheel_sha256,
                    "kernel_sha256": s.kernel_sha256} for name, s in pins.sides.items()}
    return {
        "schema": "topp-gate/manifest/v1",
        "name": "breakage-probe",
        "description": "PROBE FIXTURE: a tiny matrix for topp-gate probe; never evidence.",
        "sources": {"sides": sides, "patch_sha256": pins.patch_sha256},
        "backend": {"required": "interpreter", "split_path_required": True,
                    "interpreter_sm_count": 132},
        "limits": {"max_vocab": max_vocab, "max_batch": 64, "child_timeout_s": 60,
                   "run_timeout_s": 600, "max_bundle_bytes": max_bundle_bytes},
        "cases": [
            {"id": "forced-v32", "kind": "forced", "vocab": 32, "background_seed": 0,
             "grid": {"value": ["1e30"], "p": ["0.9"], "forced_id": [0, 17]}},
            {"id": "ordinary-s1-b3", "kind": "ordinary", "seed": 1, "batch": batch,
             "vocab": vocab},
        ],
    }


def _recorded_sources() -> dict[str, dict[str, Any]]:
    """``hashes.sources`` exactly as ``harness.capture.run`` records it: each side's pins as the
    sources module describes them (tree digest included)."""
    from ..pins.sources import load_pins

    return {name: side.describe()
            for name, side in load_pins().sides.items()}


PROBE_SEED = 20251129


def bundle_content(manifest: dict[str, Any] | None = None) -> BundleContent:
    """A complete BundleContent of the probe manifest (the shared synthetic builder)."""
    return content(manifest or probe_manifest(), seed=PROBE_SEED, sources=_recorded_sources())


def _refusal(err: HarnessError, because: str | tuple[str, ...]) -> str:
    """``err.code`` when the refusal's message names ``because`` (or one of them); else
    :class:`WrongReason`."""
    if not any(text in err.detail for text in
               ((because,) if isinstance(because, str) else because)):
        raise WrongReason(err.code, err.detail)
    return err.code


def _verify_copy(ctx: ProbeContext, name: str, mutate: tamper.Mutation,
                 because: str | tuple[str, ...]) -> str:
    """Copy the good bundle, apply one defect, run the real verifier; return its code.

    ``because`` is text the refusal must name (the tampered file or field), so a probe
    cannot pass on an unrelated failure that happens to carry the same code."""
    from ..core.verify import verify_bundle

    good = good_bundle(ctx)
    copy = ctx.work / name
    shutil.copytree(good.path, copy)
    mutate(copy)
    try:
        verify_bundle(copy, good.key.public_key(), workers=1)
    except HarnessError as err:
        return _refusal(err, because)
    return "accepted"


# --- probes: unreadable state --------------------------------------------------------------------

def good_bundle(ctx: ProbeContext) -> SignedBundle:
    """The good bundle of this run, written on first use; it must verify before any probe
    tampers with a copy of it (else every verifier probe would prove nothing)."""
    if ctx.good is None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        from ..capture.bundle_writer import write_bundle
        from ..core.verify import verify_bundle

        key = Ed25519PrivateKey.generate()
        try:
            write_bundle(ctx.work / "good", bundle_content(), key)
            verify_bundle(ctx.work / "good", key.public_key(), workers=1)
        except HarnessError as err:
            raise AssertionError(f"precondition: the untampered probe bundle does not "
                                 f"write and verify: {err}") from err
        ctx.good = SignedBundle(ctx.work / "good", key)
    return ctx.good


# artifacts by their receipt names (raw paths); the stored files are looked up in the receipt
STOCK_OUT = "outputs/stock/forced-v32.out.f32"
PATCHED_OUT = "outputs/patched/forced-v32.out.f32"
LOGITS = "inputs/ordinary-s1-b3.logits.f32"


def _ordinary_fixture() -> tuple[list[float], float, list[float]]:
    rnd = _rng(7)
    row, p32 = _row(rnd, 64), runtime_p("0.9")
    return row, p32, _masked(row, set(_oracle_kept(row, p32)))


def _p_missing_stock(ctx: ProbeContext) -> str:
    stored = good_bundle(ctx).stored(STOCK_OUT)
    return _verify_copy(ctx, "missing-stock", tamper.delete(stored), because=stored)


def _p_unparsable_patched(ctx: ProbeContext) -> str:
    row, p32, good = _ordinary_fixture()
    return _judge_one(row, p32, good, encode(good)[:-3])  # not whole float32 values


def _p_missing_output_status(ctx: ProbeContext) -> str:
    row, p32, good = _ordinary_fixture()
    return _judge_one(row, p32, "unreadable_output", good)


def _p_unparsable_bundle_output(ctx: ProbeContext) -> str:
    stored = good_bundle(ctx).stored(PATCHED_OUT)
    return _verify_copy(ctx, "garbled-patched", tamper.flip(stored),
                        because=f"sha256 of stored {stored}")


def _p_mismatched_input_hash(ctx: ProbeContext) -> str:
    stored = good_bundle(ctx).stored(LOGITS)
    return _verify_copy(ctx, "changed-input", tamper.flip(stored),
                        because=f"sha256 of stored {stored}")


def _p_child_read_other_bytes(ctx: ProbeContext) -> str:
    row, p32, good = _ordinary_fixture()
    return _judge_one(row, p32, good, "input_mismatch")


def _p_absent_logits_bundle(ctx: ProbeContext) -> str:
    stored = good_bundle(ctx).stored(LOGITS)
    return _verify_copy(ctx, "no-logits", tamper.delete(stored), because=stored)


def _p_absent_logits_judge(ctx: ProbeContext) -> str:
    row, p32, good = _ordinary_fixture()
    try:
        return _judge_one(row, p32, good, good, logits=b"")
    except HarnessError as err:
        return err.code


# --- probes: boundary input ----------------------------------------------------------------------


def _p_exact_ties(ctx: ProbeContext) -> str:
    """Ties canonicalize by id: keeping a later tied id before an earlier one stops."""
    row = [to_float32(-20.0)] * 64
    for i in (3, 9, 20, 41):
        row[i] = 1.0
    p32 = runtime_p("0.4")
    kept = _oracle_kept(row, p32)
    if kept != [3, 9]:
        raise AssertionError(f"precondition: oracle kept {kept}, expected tied ids [3, 9]")
    wrong = _masked(row, {3, 9, 41})  # holds the oracle set, but id 41 before tied id 20
    return _judge_one(row, p32, _masked(row, {3, 9, 20}), wrong)


def _p_adjacent_logits(ctx: ProbeContext) -> str:
    """Adjacent float32 logits stay distinct: the oracle keeps only the higher of two
    neighbours; a side keeping the lower one instead is refused."""
    from ..core.oracle import canonical_order

    row = _row(_rng(11), 64)
    hi = to_float32(5.0)
    lo = struct.unpack("<f", struct.pack("<I", struct.unpack("<I", struct.pack("<f", hi))[0]
                                         - 1))[0]
    row[10], row[50] = lo, hi
    p32 = runtime_p("0.1")
    if canonical_order(row)[:2] != [50, 10] or _oracle_kept(row, p32) != [50]:
        raise AssertionError("precondition: oracle does not order 5.0 before its neighbour "
                             "and keep only it")
    third = canonical_order(row)[2]
    return _judge_one(row, p32, _masked(row, {50, 10, third}), _masked(row, {10}))


def _p_huge_logits(ctx: ProbeContext) -> str:
    """1e30 and FLT_MAX are finite: the oracle certifies one token; masking it all stops."""
    rnd = _rng(12)
    row = _row(rnd, 64)
    row[5], row[6] = to_float32(1e30), FLOAT32_MAX
    p32 = runtime_p("0.5")
    kept = _oracle_kept(row, p32)
    if kept != [6]:
        raise AssertionError(f"precondition: oracle kept {kept}, expected [6] (FLT_MAX)")
    return _judge_one(row, p32, _masked(row, {6}), [NEG] * 64)


def _p_float32_p(ctx: ProbeContext) -> str:
    """p is judged only after float32 conversion: an output right for the decimal p but
    not for float32(p) is the worse one. 4096 equal logits: decimal 0.6999512 needs 2868 tokens,
    float32(0.6999512) is exactly 2867/4096 and needs 2867."""
    row = [0.0] * 4096
    p32 = runtime_p("0.6999512")
    if p32 != 2867 / 4096 or 0.6999512 * 4096 <= 2867:
        raise AssertionError("precondition: float32(0.6999512) is not exactly 2867/4096")
    if len(_oracle_kept(row, p32)) != 2867:
        raise AssertionError("precondition: the oracle did not keep 2867 tokens")
    decimal_kept = _masked(row, set(range(2868)))  # what a binary64 p would keep
    float32_kept = _masked(row, set(range(2867)))
    # stock follows float32(p); patched follows the decimal p: one token further from the
    # oracle than stock, so the row stops
    return _judge_one(row, p32, float32_kept, decimal_kept)


def _p_p_rounds_to_one(ctx: ProbeContext) -> str:
    try:
        runtime_p("0.99999999")  # below 1 in decimal, exactly 1.0 in float32
    except HarnessError as err:
        return err.code
    return "accepted"


def _p_nonfinite_logits(ctx: ProbeContext) -> str:
    rnd = _rng(13)
    row = _row(rnd, 64)
    row[30] = math.inf
    try:
        return _judge_one(row, runtime_p("0.9"), row, row)
    except HarnessError as err:
        return err.code


def _p_nan_logits(ctx: ProbeContext) -> str:
    from ..core.oracle import reference

    row = _row(_rng(14), 64)
    row[2] = math.nan
    try:
        reference(row, runtime_p("0.9"))
    except HarnessError as err:
        return err.code
    return "accepted"


# --- probes: bounds ------------------------------------------------------------------------------


def _p_matrix_over_vocab(ctx: ProbeContext) -> str:
    from ..core.manifest import parse_manifest

    try:
        parse_manifest(manifest_bytes(probe_manifest(vocab=4097)), source="probe")
    except HarnessError as err:
        return err.code
    return "accepted"


def _p_matrix_over_batch(ctx: ProbeContext) -> str:
    from ..core.manifest import parse_manifest

    try:
        parse_manifest(manifest_bytes(probe_manifest(batch=65)), source="probe")
    except HarnessError as err:
        return err.code
    return "accepted"


def _p_child_timeout(ctx: ProbeContext) -> str:
    """The real runner with a 0 s limit: any child is past it, so it must be killed and
    recorded as ``timeout``; the gate then stops on every row of that side."""
    try:
        from ..kernels.runner import run_side
        from ..pins.sources import load_pins
    except ImportError as err:  # pragma: no cover - the runner ships with the package
        raise ProbeSkipped(f"needs harness.kernels.runner ({err})") from err
    cases = ctx.work / "timeout-cases.json"
    cases.write_text('{"schema": "topp-gate/cases/v1", "cases": []}\n', encoding="utf-8")
    tree = ctx.work / "timeout-tree"
    tree.mkdir()
    # a side pinning no file: its (empty) private copy is made and the child started
    side = dataclasses.replace(load_pins().side("stock"), files={})
    result = run_side(side, tree, "interpreter", 132, cases, ctx.work / "timeout-out", 0.0)
    if result.status != "timeout":
        return result.status
    row, p32, good = _ordinary_fixture()
    return _judge_one(row, p32, result.status, good)


def _p_bundle_over_cap(ctx: ProbeContext) -> str:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..capture.bundle_writer import write_bundle

    dest = ctx.work / "over-cap"
    try:
        write_bundle(dest, bundle_content(), Ed25519PrivateKey.generate(), max_bytes=1024)
    except HarnessError as err:
        leftovers = [p.name for p in ctx.work.iterdir() if p.name.startswith(".over-cap")]
        if dest.exists() or leftovers:
            return f"{err.code} but left {dest.name if dest.exists() else leftovers[0]}"
        return _refusal(err, "over its cap of 1024")
    return "accepted"


def _p_bundle_cap_verifier(ctx: ProbeContext) -> str:
    """A bundle whose artifacts exceed its manifest's cap is refused by the verifier too
    (the bundle is signed by an honest-looking key; the cap comes from its own manifest)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..capture.bundle_writer import write_bundle
    from ..core.verify import verify_bundle

    manifest = probe_manifest(max_bundle_bytes=1024)
    key = Ed25519PrivateKey.generate()
    dest = ctx.work / "cap-in-manifest"
    write_bundle(dest, bundle_content(manifest), key, max_bytes=None)
    try:
        verify_bundle(dest, key.public_key(), workers=1)
    except HarnessError as err:
        return _refusal(err, "over the manifest's cap of 1024")
    return "accepted"


# --- probes: drift -------------------------------------------------------------------------------


def _p_source_file_changed(ctx: ProbeContext) -> str:
    """A pinned source file whose bytes changed: the real tree check refuses it. Uses the
    stock tree from ``--sources`` or the cache when present, else a one-file tree pinned
    the same way."""
    from ..core.digest import sha256_hex as sha256_bytes
    from ..pins.sources import cache_root, load_pins, verify_tree

    stock = load_pins().side("stock")
    cached = (ctx.sources / stock.digest if ctx.sources is not None
              else cache_root() / "trees" / stock.digest)
    tree = ctx.work / "drift-tree"
    if cached.is_dir():
        shutil.copytree(cached, tree)
        side = stock
    else:
        kernel = b"# stand-in for the pinned kernel file\n"
        side = dataclasses.replace(stock, kernel_sha256=sha256_bytes(kernel),
                                   files={stock.kernel_path: sha256_bytes(kernel)})
        (tree / stock.kernel_path).parent.mkdir(parents=True)
        (tree / stock.kernel_path).write_bytes(kernel)
    verify_tree(side, tree)  # precondition: the untouched tree verifies
    with open(tree / side.kernel_path, "ab") as handle:
        handle.write(b"# drift\n")
    try:
        verify_tree(side, tree)
    except HarnessError as err:
        return err.code
    return "accepted"


def _p_patch_changed(ctx: ProbeContext) -> str:
    def change(m: Any) -> None:
        m["sources"]["patch_sha256"] = "0" * 64
    stored = good_bundle(ctx).stored("manifest.json")
    return _verify_copy(ctx, "patch-changed", tamper.edit_json(stored, change),
                        because=f"stored {stored}")


def _p_patch_hash_resigned(ctx: ProbeContext) -> str:
    """The receipt's patch hash no longer matches the manifest's pinned patch, and the
    statement is signed again by the same key: the verifier must still see the mismatch."""
    def change(statement: dict[str, Any]) -> None:
        statement["predicate"]["hashes"]["patch"] = "0" * 64
    return _verify_copy(ctx, "patch-resigned", tamper.resign(change, good_bundle(ctx).key),
                        because="patch hash vs the manifest's pin")


def _p_manifest_changed(ctx: ProbeContext) -> str:
    def change(m: Any) -> None:
        m["cases"][1]["seed"] = 2
    stored = good_bundle(ctx).stored("manifest.json")
    return _verify_copy(ctx, "manifest-changed", tamper.edit_json(stored, change),
                        because=f"stored {stored}")


def _p_frozen_manifest(ctx: ProbeContext) -> str:
    from ..core.verify import verify_bundle

    good = good_bundle(ctx)
    frozen = ctx.work / "other.json.sha256"
    frozen.write_text("1" * 64 + "  other.json\n", encoding="utf-8")
    try:
        verify_bundle(good.path, good.key.public_key(), frozen_manifest=frozen, workers=1)
    except HarnessError as err:
        return _refusal(err, "vs --frozen-manifest")
    return "accepted"


def _p_configuration_changed(ctx: ProbeContext) -> str:
    def change(m: Any) -> None:
        m["backend"]["required"] = "cuda"
    stored = good_bundle(ctx).stored("manifest.json")
    return _verify_copy(ctx, "backend-changed", tamper.edit_json(stored, change),
                        because=f"stored {stored}")


def _p_dispatch_changed(ctx: ProbeContext) -> str:
    def change(ev: Any) -> None:
        ev["cases"][0]["split"]["proven"] = False
    stored = good_bundle(ctx).stored("outputs/patched/evidence.json")
    return _verify_copy(ctx, "dispatch-changed", tamper.edit_json(stored, change),
                        because=f"stored {stored}")


def _p_split_flag_resigned(ctx: ProbeContext) -> str:
    """The receipt says the split path was not taken, re-signed by the same key: the
    signed kernel evidence proves the split path for every case, so the flag no longer
    matches what it must be derived from."""
    def change(statement: dict[str, Any]) -> None:
        for case in statement["predicate"]["cases"]:
            case["split_path"] = False
    return _verify_copy(ctx, "split-flag-resigned", tamper.resign(change, good_bundle(ctx).key),
                        because="split-path flag vs the kernel evidence")


def _p_swapped_sides(ctx: ProbeContext) -> str:
    good = good_bundle(ctx)
    stock, patched = good.stored(STOCK_OUT), good.stored(PATCHED_OUT)
    return _verify_copy(ctx, "swapped-sides", tamper.swap(stock, patched),
                        because=(f"stored {stock}", f"stored {patched}"))


# --- the catalogue -------------------------------------------------------------------------------

PROBES: tuple[Probe, ...] = (
    Probe("missing-stock-output", "unreadable", "malformed_evidence",
          "bundle without its stock output file (verifier)", _p_missing_stock),
    Probe("unreadable-stock-output", "unreadable", "unreadable_output",
          "runner recorded the stock output as unreadable (judge)", _p_missing_output_status),
    Probe("unparsable-patched-output", "unreadable", "unreadable_output",
          "patched output is not whole float32 values (judge)", _p_unparsable_patched),
    Probe("garbled-patched-output", "unreadable", "binding_mismatch",
          "a byte of the stored patched output flipped (verifier)",
          _p_unparsable_bundle_output),
    Probe("mismatched-input-hash", "unreadable", "binding_mismatch",
          "captured logits changed after signing (verifier)", _p_mismatched_input_hash),
    Probe("child-read-other-input", "unreadable", "input_mismatch",
          "a child hashed different input bytes than captured (judge)",
          _p_child_read_other_bytes),
    Probe("absent-logits-bundle", "unreadable", "malformed_evidence",
          "bundle without its captured logits (verifier)", _p_absent_logits_bundle),
    Probe("absent-logits-judge", "unreadable", "bad_shape",
          "a case with no logits bytes (judge)", _p_absent_logits_judge),
    Probe("exact-ties", "boundary", "noncanonical_tie",
          "patched keeps tied id 41 but not the earlier tied id 20", _p_exact_ties),
    Probe("adjacent-float32", "boundary", "missing_oracle_token,non_prefix",
          "patched keeps the lower of two adjacent float32 logits instead of the higher",
          _p_adjacent_logits),
    Probe("huge-finite-logits", "boundary", "missing_oracle_token,symdiff_regression,under_keep",
          "1e30 and FLT_MAX in one row; patched masks the whole row", _p_huge_logits),
    Probe("p-after-float32", "boundary", "symdiff_regression",
          "patched follows decimal p 0.6999512, stock float32(p): judged by float32(p)",
          _p_float32_p),
    Probe("p-rounds-to-one", "boundary", "invalid_p",
          "decimal p 0.99999999 is 1.0 in float32", _p_p_rounds_to_one),
    Probe("infinite-ordinary-logit", "boundary", "non_finite_logit",
          "an ordinary row holds +inf (judge)", _p_nonfinite_logits),
    Probe("nan-ordinary-logit", "boundary", "non_finite_logit",
          "an ordinary row holds NaN (oracle)", _p_nan_logits),
    Probe("matrix-over-vocab", "bounds", "over_limit",
          "a case's vocabulary over the manifest's max_vocab", _p_matrix_over_vocab),
    Probe("matrix-over-batch", "bounds", "over_limit",
          "a case's batch over 64 (the split path's ceiling)", _p_matrix_over_batch),
    Probe("child-timeout", "bounds", "timeout",
          "a kernel child still running at its limit (runner, then judge)", _p_child_timeout),
    Probe("bundle-over-cap", "bounds", "over_limit",
          "a bundle larger than its cap (writer; nothing left behind)", _p_bundle_over_cap),
    Probe("bundle-over-manifest-cap", "bounds", "malformed_evidence",
          "signed bundle larger than its own manifest's cap (verifier)",
          _p_bundle_cap_verifier),
    Probe("source-file-changed", "drift", "evidence_drift",
          "a pinned vLLM source file's bytes changed (sources)", _p_source_file_changed),
    Probe("patch-changed", "drift", "binding_mismatch",
          "the manifest's pinned patch hash edited in a bundle (verifier)", _p_patch_changed),
    Probe("patch-hash-resigned", "drift", "binding_mismatch",
          "receipt patch hash differs from the manifest's, re-signed (verifier)",
          _p_patch_hash_resigned),
    Probe("manifest-changed", "drift", "binding_mismatch",
          "a case seed edited in a bundle's manifest (verifier)", _p_manifest_changed),
    Probe("manifest-not-frozen-one", "drift", "binding_mismatch",
          "bundle manifest differs from the frozen hash given (verifier)", _p_frozen_manifest),
    Probe("configuration-changed", "drift", "binding_mismatch",
          "the bundle's backend configuration edited (verifier)", _p_configuration_changed),
    Probe("dispatch-path-changed", "drift", "binding_mismatch",
          "patched kernel-path evidence edited (verifier)", _p_dispatch_changed),
    Probe("split-path-flag-resigned", "drift", "binding_mismatch",
          "receipt says the split path was not taken, re-signed (verifier)",
          _p_split_flag_resigned),
    Probe("swapped-sides", "drift", "binding_mismatch",
          "stock and patched outputs swapped (verifier)", _p_swapped_sides),
)
