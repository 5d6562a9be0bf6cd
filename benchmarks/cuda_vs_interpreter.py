#!/usr/bin/env python3
"""CUDA (the signed H200 bundle) against Triton's interpreter (this CPU), on identical bytes.

    .venv/bin/python benchmarks/cuda_vs_interpreter.py [--sizing] [--bundle DIR]
        [--pubkey FILE] [--cache DIR] [--workdir DIR] [--json OUT] [--txt OUT]

The bundle is opened with ``harness.core.verify.open_bundle`` (signature, schema, file set; every
artifact read here is digest-checked). The cases in PLAN (declared below, before any run)
are rebuilt from the bundle's captured raw input bytes: whole cases byte for byte, or a
sub-case made of chosen rows of a case, each row's logits and p kept exactly. Both pinned
sides then run in the interpreter through ``harness.kernels.runner.run_side`` (same child,
same split-path proof as the gate), and every row is compared with the CUDA output the
bundle holds for that row: byte-identical output, equal kept sets, kept counts, and the
binary64 oracle count from the bundle's ``results/rows.json``.

Like for like: a row's result depends on its bytes, its p and the slice count S the split
kernels use; in both pinned kernels ``num_sm`` enters only through ``_topp_split_count``,
which also takes the batch (and, in 0.33.0, the vocab). Every comparison therefore
requires the interpreter's observed S (the child's split proof) to equal the S the CUDA
run's evidence records for the source case, side by side; a mismatch is reported and the
script exits 1. Whole cases use num_sm=132, the H200's. A sub-case has a smaller batch, so
at num_sm=132 it would get another S (forced-v32000's 45 rows ran at S=2 stock, S=4
patched; 4 of its rows at 132 would get S=32): each sub-case declares the num_sm at which
its batch gets the H200's S, and the check above proves it did.

``--sizing`` runs only SIZING (one 1-row case, both sides) and prints its timings; it
writes nothing unless --json/--txt are given. Exit codes: 0 every planned row compared
like for like (whatever the comparison found), 1 some case could not be compared (a side
failed or the slice counts differ), 2 bad input, 4 the bundle did not verify.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.core.digest import sha256_hex  # noqa: E402
from harness.core.names import SIDES, SPLIT  # noqa: E402

DEFAULT_BUNDLE = ROOT / "evidence" / "bundles" / "h200-forced-logit-gate-cuda-20261129"
DEFAULT_PUBKEY = ROOT / "evidence" / "keys" / "topp-gate-evidence.pub"
H200_SM = 132
TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Planned:
    """One interpreter case: a whole bundle case (rows None) or chosen rows of one."""

    source: str
    rows: tuple[int, ...] | None
    num_sm: int
    why: str

    @property
    def id(self) -> str:
        if self.rows is None:
            return self.source
        return f"{self.source}.rows-{'-'.join(str(r) for r in self.rows)}"


# Declared before the run and never changed after seeing results; sized from --sizing (see
# SIZING_MEASURED). Interpreter cost follows launches x blocks: with S=32 every program of a
# vocab-32000 row does one block per kernel, like the 1-row sizing case (unit U, about 21 s
# per side here, sides in parallel). Estimate: group 132 about 10 U, forced (8 programs x 44
# blocks, 16 x 22) about 2 U, boundary-huge (32 programs x 22 blocks) about 3 U; about 15 U
# in all, 5-6 minutes with both cores free.
# forced-v32000's grid is value x p x id = 5 x 3 x 3 rows in that order: value 1e4 rows
# 0-8, 1e10 9-17, 1e20 18-26, 1e30 27-35, FLT_MAX 36-44; p 0.5, 0.9, 0.999 within each
# value; ids 0, 16001, 31999 within each p.
PLAN: tuple[Planned, ...] = (
    Planned("ordinary-s42-b1-v1024", None, H200_SM, "ordinary, vocab 1024"),
    Planned("ordinary-s1234-b1-v1024", None, H200_SM, "ordinary, vocab 1024, second seed"),
    Planned("ordinary-s42-b1-v32000", None, H200_SM, "ordinary, vocab 32000"),
    Planned("ordinary-s1234-b1-v32000", None, H200_SM, "ordinary, vocab 32000, second seed"),
    Planned("boundary-p-float32-v32000", None, H200_SM,
            "whole case (batch 3 as on the H200): row 0 count_bound STOP, row 2 the "
            "under_keep/missing_oracle_token STOP of both sides"),
    Planned("boundary-adjacent-v32000", None, H200_SM,
            "whole case (batch 3 as on the H200): row 0 count_bound STOP (kept 64, oracle 42)"),
    Planned("forced-v32000", (0, 13, 29, 42), 8,
            "forced rows 1e4/p0.5/id0 (stock kept it on CUDA), 1e10/p0.9/id16001, "
            "1e30/p0.5/id31999, FLT_MAX/p0.999/id0 (stock kept nothing on CUDA); num_sm 8 "
            "gives batch 4 the H200's slice counts at batch 45 (S=2 stock, S=4 patched)"),
    Planned("boundary-huge-v128256", (1, 3), 32,
            "rows 1 (+1e6: stock kept 78278 of the oracle's 78355 on CUDA) and 3 (two 1e30: "
            "stock kept 0); num_sm 32 gives batch 2 the H200's S=16 at batch 5"),
)

SIZING: tuple[Planned, ...] = (
    Planned("ordinary-s42-b1-v1024", None, H200_SM, "sizing: one row, S=32"),
)

# What --sizing measured on this machine before PLAN was fixed (2 cores, shared).
SIZING_MEASURED: dict[str, Any] = {
    "date": "2026-11-29",
    "case": "ordinary-s42-b1-v1024", "num_sm": H200_SM, "slices": 32,
    "runs": [
        {"stock_side_s": 21.1, "patched_side_s": 21.3},
        {"stock_side_s": 25.0, "patched_side_s": 25.3,
         "stock_kernel_s": 20.97, "patched_kernel_s": 21.23},
    ],
    "result": "both sides byte-identical to CUDA",
}


# --- comparison (pure; unit-tested) ---------------------------------------------------------


def _words(data: bytes) -> memoryview:
    """The float32 values as 32-bit words, for bit-for-bit comparison."""
    if len(data) % 4:
        raise ValueError("float32 bytes must be a multiple of 4 long")
    return memoryview(data).cast("I")


def kept_ids(row: bytes) -> list[int]:
    """Token ids a kernel kept: neither -inf nor NaN (``harness.core.gate``'s definition)."""
    from harness.core.f32 import decode

    return [i for i, v in enumerate(decode(row)) if v != -math.inf and v == v]


def compare_row(cuda: bytes, interpreter: bytes, logits: bytes,
                oracle_count: int | None, show: int = 8) -> dict[str, Any]:
    """Compare one row's CUDA and interpreter outputs (raw little-endian float32)."""
    if not len(cuda) == len(interpreter) == len(logits):
        raise ValueError("rows of different lengths")
    a, b, x = _words(cuda), _words(interpreter), _words(logits)
    kc, ki = kept_ids(cuda), kept_ids(interpreter)
    sc, si = set(kc), set(ki)
    # Bitwise, at positions both kept: the kernel should leave a kept logit unchanged.
    both_changed = sum(1 for i in sc & si if a[i] != b[i])
    only_cuda, only_interp = sorted(sc - si), sorted(si - sc)
    differing = [i for i in range(len(a)) if a[i] != b[i]]
    return {
        "byte_identical": cuda == interpreter,
        "kept_sets_equal": sc == si,
        "kept_cuda": len(kc),
        "kept_interpreter": len(ki),
        "oracle_count": oracle_count,
        "symdiff": len(only_cuda) + len(only_interp),
        "only_cuda": only_cuda[:show],
        "only_interpreter": only_interp[:show],
        "differing_words": len(differing),
        "first_differing_id": differing[0] if differing else None,
        "kept_values_differ": both_changed,
        "cuda_kept_not_input_bits": sum(1 for i in kc if a[i] != x[i]),
        "interpreter_kept_not_input_bits": sum(1 for i in ki if b[i] != x[i]),
    }


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rows": len(rows),
        "byte_identical": sum(1 for r in rows if r["byte_identical"]),
        "kept_sets_equal": sum(1 for r in rows if r["kept_sets_equal"]),
        "kept_count_equal": sum(1 for r in rows if r["kept_cuda"] == r["kept_interpreter"]),
    }


# --- bundle side ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    planned: Planned
    layout: Any  # harness.core.manifest.CaseLayout
    source_layout: Any
    source_rows: tuple[int, ...]
    logits: bytes
    p: bytes


def _slice_rows(data: bytes, rows: Sequence[int], width: int) -> bytes:
    return b"".join(data[r * width:(r + 1) * width] for r in rows)


def build_cases(view: Any, layout: Sequence[Any], plan: Sequence[Planned]) -> list[Built]:
    from harness.core.errors import UsageError
    from harness.core.manifest import CaseLayout

    by_id = {c.id: c for c in layout}
    built = []
    for item in plan:
        source = by_id.get(item.source)
        if source is None:
            raise UsageError(f"planned case {item.source} is not in the bundle")
        rows = tuple(range(source.batch)) if item.rows is None else item.rows
        if not rows or any(not 0 <= r < source.batch for r in rows) or len(set(rows)) != len(rows):
            raise UsageError(f"planned rows {rows} do not fit case {source.id}")
        logits = view.raw(source.logits_path)
        p = view.raw(source.p_path)
        case = CaseLayout(item.id, source.kind, len(rows), source.vocab,
                          tuple(source.rows[r] for r in rows))
        built.append(Built(item, case, source, rows,
                           _slice_rows(logits, rows, 4 * source.vocab), _slice_rows(p, rows, 4)))
    return built


def write_cases(dest: Path, cases: Sequence[Built]) -> Path:
    from harness.core.cases_index import parse_cases_index, render_cases_index

    (dest / "inputs").mkdir(parents=True)
    raw = render_cases_index([c.layout for c in cases])
    parse_cases_index(raw)  # the schema the child and the gate use
    for c in cases:
        (dest / c.layout.logits_path).write_bytes(c.logits)
        (dest / c.layout.p_path).write_bytes(c.p)
    (dest / "cases.json").write_bytes(raw)
    return dest / "cases.json"


def cuda_split(evidence: dict[str, Any], case_id: str) -> dict[str, Any]:
    for record in evidence.get("cases", []):
        if record.get("id") == case_id:
            return dict(record.get(SPLIT) or {})
    return {}


# --- interpreter side -----------------------------------------------------------------------


def run_interpreter(cases: Sequence[Built], work: Path, cache: Path | None) -> dict[str, Any]:
    """Both sides, per num_sm group; the two sides of a group run in parallel."""
    from harness.kernels.runner import run_side
    from harness.pins.sources import cache_root, load_pins, resolve_tree

    pins = load_pins()
    root = cache_root(cache)
    trees = {s: resolve_tree(pins.side(s), cache=root) for s in SIDES}
    groups: dict[int, list[Built]] = {}
    for c in cases:
        groups.setdefault(c.planned.num_sm, []).append(c)
    results: dict[str, Any] = {}
    for num_sm, members in sorted(groups.items(), reverse=True):
        base = work / f"sm{num_sm}"
        index = write_cases(base / "cases", members)

        def one(side: str, num_sm: int = num_sm, base: Path = base,
                index: Path = index) -> tuple[str, Any, float]:
            started = time.perf_counter()
            result = run_side(pins.side(side), trees[side], "interpreter", num_sm, index,
                              base / side, TIMEOUT_S)
            return side, result, time.perf_counter() - started

        with ThreadPoolExecutor(max_workers=len(SIDES)) as pool:
            for side, result, seconds in pool.map(one, SIDES):
                print(f"interpreter {side} num_sm={num_sm}: {result.status} in {seconds:.1f} s"
                      f"{' (' + result.reason + ')' if result.reason else ''}", flush=True)
                results[f"{num_sm}/{side}"] = (result, seconds)
    return {"pins": pins, "trees": trees, "results": results}


# --- putting it together --------------------------------------------------------------------


def compare(view: Any, built: Sequence[Built], ran: dict[str, Any],
            cuda_evidence: dict[str, dict[str, Any]],
            oracle: dict[tuple[str, int], int]) -> tuple[list[dict[str, Any]], list[str]]:
    rows_out: list[dict[str, Any]] = []
    problems: list[str] = []
    for c in built:
        width = 4 * c.layout.vocab
        for side in SIDES:
            result, _ = ran["results"][f"{c.planned.num_sm}/{side}"]
            cuda_s = cuda_split(cuda_evidence[side], c.source_layout.id).get("slices")
            record = next((r for r in (result.evidence or {}).get("cases", [])
                           if r.get("id") == c.layout.id), None)
            interp_s = (record or {}).get(SPLIT, {}).get("slices")
            if not result.ok or record is None:
                problems.append(f"{c.layout.id} {side}: interpreter {result.status}: "
                                f"{result.reason}")
                continue
            if (record["logits_sha256"] != sha256_hex(c.logits)
                    or record["p_sha256"] != sha256_hex(c.p)):
                problems.append(f"{c.layout.id} {side}: the child read other input bytes")
                continue
            if cuda_s is None or interp_s != cuda_s:
                problems.append(f"{c.layout.id} {side}: slices CUDA {cuda_s}, interpreter "
                                f"{interp_s}: not like for like, not compared")
                continue
            interp_out = (result.out_dir / f"{c.layout.id}.out.f32").read_bytes()
            cuda_out = view.raw(f"outputs/{side}/{c.source_layout.id}.out.f32")
            for k, src_row in enumerate(c.source_rows):
                logits_row = c.logits[k * width:(k + 1) * width]
                cmp = compare_row(cuda_out[src_row * width:(src_row + 1) * width],
                                  interp_out[k * width:(k + 1) * width], logits_row,
                                  oracle.get((c.source_layout.id, src_row)))
                rows_out.append({
                    "case": c.source_layout.id, "row": src_row, "side": side,
                    "label": c.source_layout.rows[src_row].label,
                    "interpreter_case": c.layout.id, "num_sm": c.planned.num_sm,
                    "slices": interp_s, **cmp,
                })
    return rows_out, problems


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in ("torch", "triton", "numpy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _evidence_brief(evidence: dict[str, Any] | None) -> dict[str, Any] | None:
    if evidence is None:
        return None
    keep = ("backend", "interpreter", "device", "python", "torch", "triton", "vllm_version",
            "kernel_sha256", "env", "status")
    return {k: evidence.get(k) for k in keep}


def render_txt(report: dict[str, Any]) -> str:
    lines = [
        f"# {report['date']} CUDA (H200 bundle) vs Triton interpreter (this CPU), same bytes",
        f"# bundle {report['bundle']['path']} receipt sha256 {report['bundle']['receipt_sha256']}",
        f"# interpreter: python {report['interpreter']['python']} torch "
        f"{report['interpreter']['torch']} triton {report['interpreter']['triton']} numpy "
        f"{report['interpreter']['numpy']}; CUDA: {report['cuda']['device']} torch "
        f"{report['cuda']['torch']} triton {report['cuda']['triton']}",
        "case,row,side,num_sm,slices,oracle,kept_cuda,kept_interp,kept_sets_equal,"
        "byte_identical,symdiff",
    ]
    for r in report["rows"]:
        lines.append(",".join(str(v) for v in (
            r["case"], r["row"], r["side"], r["num_sm"], r["slices"], r["oracle_count"],
            r["kept_cuda"], r["kept_interpreter"], r["kept_sets_equal"], r["byte_identical"],
            r["symdiff"])))
    s = report["summary"]
    lines.append(f"# {s['rows']} row-sides compared: {s['byte_identical']} byte-identical, "
                 f"{s['kept_sets_equal']} equal kept sets, {s['kept_count_equal']} equal "
                 f"kept counts")
    for problem in report["problems"]:
        lines.append(f"# NOT COMPARED: {problem}")
    for note in report["notes"]:
        lines.append(f"# note: {note}")
    lines.append(f"# wall: interpreter {report['timings']['interpreter_s']} s, total "
                 f"{report['timings']['total_s']} s; command: {report['command']}")
    return "\n".join(lines) + "\n"


NOTES = (
    "whole cases run at num_sm 132 (the H200's); sub-cases run at the num_sm for which their "
    "smaller batch gets the H200's slice count (forced-v32000 rows: 8, for S=2 stock and S=4 "
    "patched; boundary-huge rows: 32, for S=16); num_sm enters the pinned kernels only "
    "through _topp_split_count, and every compared row's observed slice count is checked "
    "equal to the CUDA evidence's",
    "the bundle's CUDA evidence says repeat_outputs_bit_identical false for most ordinary "
    "cases; the child (harness/kernels/child.py) refills its repeat buffer from `logits` "
    "after apply_top_k_top_p_triton has masked that tensor in place, so those repeats ran on "
    "already-masked logits and say nothing about CUDA run-to-run determinism",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE)
    parser.add_argument("--pubkey", type=Path, default=DEFAULT_PUBKEY)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the interpreter's inputs and outputs here (must not exist)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--txt", type=Path, default=None)
    parser.add_argument("--sizing", action="store_true",
                        help="run only the 1-row sizing case and print its timings")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from harness.core.errors import HarnessError

    try:
        return _run(args, argv)
    except HarnessError as err:
        print(f"cuda_vs_interpreter: {err}", file=sys.stderr)
        return err.exit_code


def _run(args: argparse.Namespace, argv: list[str] | None) -> int:
    from harness.core import receipt
    from harness.core.cases_index import parse_cases_index
    from harness.core.errors import UsageError
    from harness.core.keys import load_public_key
    from harness.core.verify import open_bundle

    started = time.perf_counter()
    view = open_bundle(args.bundle, load_public_key(args.pubkey))
    predicate = view.statement["predicate"]
    layout = parse_cases_index(view.raw("cases.json"))
    cuda_evidence = {s: json.loads(view.raw(f"outputs/{s}/evidence.json")) for s in SIDES}
    oracle = {(r["case"], r["row"]): r["oracle"].get("count")
              for r in json.loads(view.raw("results/rows.json"))}
    plan = SIZING if args.sizing else PLAN
    built = build_cases(view, layout, plan)

    from harness.pins.sources import load_pins

    pins = load_pins()
    for side in SIDES:
        recorded = predicate["hashes"]["sources"][side]["kernel_sha256"]
        if pins.side(side).kernel_sha256 != recorded:
            raise UsageError(f"{side}: local pin {pins.side(side).kernel_sha256} is not the "
                             f"bundle's kernel {recorded}")

    work_ctx = tempfile.TemporaryDirectory(prefix="cuda-vs-interp-") \
        if args.workdir is None else None
    work = Path(work_ctx.name) if work_ctx else args.workdir
    try:
        if args.workdir is not None:
            args.workdir.mkdir(parents=True)
        t0 = time.perf_counter()
        ran = run_interpreter(built, work, args.cache)
        interp_s = time.perf_counter() - t0
        rows, problems = compare(view, built, ran, cuda_evidence, oracle)
    finally:
        if work_ctx is not None:
            work_ctx.cleanup()

    any_result = next(iter(ran["results"].values()))[0]
    interp_ev = any_result.evidence or {}
    cuda_ev = cuda_evidence["stock"]
    report = {
        "schema": "topp-gate/cuda-vs-interpreter/v1",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": shlex.join([".venv/bin/python", "benchmarks/cuda_vs_interpreter.py",
                               *(sys.argv[1:] if argv is None else argv)]),
        "host": {"platform": platform.platform(), "cpus": len(os.sched_getaffinity(0))},
        "bundle": {
            "path": str(args.bundle.resolve().relative_to(ROOT)
                        if args.bundle.resolve().is_relative_to(ROOT) else args.bundle),
            "receipt_sha256": sha256_hex(receipt.canonical(view.statement)),
            "verdict": predicate["verdict"],
            "harness_sha256": predicate["harness"]["sha256"],
        },
        "harness_sha256_here": receipt.harness_code_digest()["sha256"],
        "interpreter": {"python": interp_ev.get("python"), "torch": interp_ev.get("torch"),
                        "triton": interp_ev.get("triton"), "numpy": _versions()["numpy"],
                        "evidence": {k: _evidence_brief(r.evidence)
                                     for k, (r, _) in ran["results"].items()}},
        "cuda": {"device": (cuda_ev.get("device") or {}).get("name"),
                 "torch": cuda_ev.get("torch"), "triton": cuda_ev.get("triton"),
                 "python": cuda_ev.get("python")},
        "plan": [{"id": c.layout.id, "source": c.source_layout.id, "rows": list(c.source_rows),
                  "num_sm": c.planned.num_sm, "why": c.planned.why,
                  "source_logits_sha256": _subject_digest(
                      view, c.source_layout.logits_path),
                  "logits_sha256": sha256_hex(c.logits), "p_sha256": sha256_hex(c.p),
                  "cuda_slices": {s: cuda_split(cuda_evidence[s], c.source_layout.id)
                                  .get("slices") for s in SIDES},
                  "cuda_repeat_outputs_bit_identical": {
                      s: _cuda_timings(cuda_evidence[s], c.source_layout.id)
                      .get("repeat_outputs_bit_identical") for s in SIDES}}
                 for c in built],
        "sizing_measured": SIZING_MEASURED,
        "timings": {"interpreter_s": round(interp_s, 1),
                    "total_s": round(time.perf_counter() - started, 1),
                    "per_side_s": {k: round(sec, 1) for k, (_, sec) in ran["results"].items()},
                    "per_case_wall_s": {k: {r["id"]: r.get("timings", {}).get("wall_s")
                                            for r in (res.evidence or {}).get("cases", [])}
                                        for k, (res, _) in ran["results"].items()}},
        "rows": rows,
        "summary": summarize(rows),
        "problems": problems,
        "notes": list(NOTES),
    }
    text = render_txt(report)
    print(text, end="")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.txt is not None:
        args.txt.write_text(text, encoding="utf-8")
    return 1 if problems else 0


def _subject_digest(view: Any, name: str) -> str | None:
    for subject in view.statement["subject"]:
        if subject["name"] == name:
            return str(subject["digest"]["sha256"])
    return None


def _cuda_timings(evidence: dict[str, Any], case_id: str) -> dict[str, Any]:
    for record in evidence.get("cases", []):
        if record.get("id") == case_id:
            return dict(record.get("timings") or {})
    return {}


if __name__ == "__main__":
    sys.exit(main())
