"""The front page's findings: each a sentence whose figures are computed here from verified
bundles' models, a plot drawn from the same values and links to the rows that prove it.

Nothing here is typed from README: a finding whose evidence is not among the verified
bundles (:class:`harness.present.model.BundleModel`; refused ones never count) is not
returned at all. Every evidence string is escaped (:func:`_e`) before it reaches the HTML.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from ..core.names import PATCHED, SIDES, STOCK
from . import svg
from .model import TIE_MEMBERS, BundleModel, Row, TieRow

FORCED_LOST = "forced_token_dropped"  # a forced row's failure: the forced token is masked
ROWS_ANCHORED = 3000  # the bundle page gives the first this many rows an anchor
LOST, HELD, OVER, REFERENCE = "#c0392b", "#55a868", "#dd8452", "#55a868"


@dataclass(frozen=True)
class Finding:
    key: str  # the section's id on the front page
    title: str  # HTML (escaped)
    sentence: str  # HTML (escaped)
    plot: str  # inline SVG
    links: tuple[tuple[str, str], ...]  # (href, text), both raw: the page escapes them


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def row_anchor(index: int) -> str:
    """The id of a bundle page's row (its position in the bundle's rows)."""
    return f"row-{index}"


def bundle_href(b: BundleModel) -> str:
    return f"bundles/{b.slug}.html"


def _row_link(b: BundleModel, index: int, text: str) -> tuple[str, str]:
    if index < ROWS_ANCHORED:
        return f"{bundle_href(b)}#{row_anchor(index)}", text
    return bundle_href(b), text


def _version_key(version: str) -> tuple[int, ...]:
    import re

    return tuple(int(x) for x in re.findall(r"\d+", version))


def _span(versions: Sequence[str]) -> str:
    if len(versions) <= 3:
        return " and ".join(", ".join(versions).rsplit(", ", 1)) if versions else ""
    return f"{versions[0]} to {versions[-1]}"


def _count(value: float) -> str:
    return f"{value:g}" if value < 1e6 else f"{value:.3g}"


# --- 1: the forced token lost ------------------------------------------------------------


def forced_lost(bundles: Sequence[BundleModel]) -> Finding | None:
    """Per vLLM release on the split path (the release sweep, else the forced-logit
    bundles): forced rows whose kept set lost the forced token, beside the fix's."""
    pool = [b for b in bundles if b.group == "sweep"] or [
        b for b in bundles if b.group == "bundles"]
    per: dict[str, tuple[BundleModel, list[int], int]] = {}  # version -> bundle, lost, forced
    fixed: dict[str, tuple[BundleModel, int, int]] = {}  # patched version -> held, forced
    for b in pool:
        if b.sides[STOCK].family != "vllm-triton":
            continue
        forced = [(i, r) for i, r in enumerate(b.rows) if r.kind == "forced"]
        if not forced:
            continue
        lost = [i for i, r in forced if FORCED_LOST in r.forced_failures.get(STOCK, ())]
        version = b.sides[STOCK].version
        if version not in per or len(forced) > per[version][2]:
            per[version] = (b, lost, len(forced))
        held = sum(1 for _, r in forced if not r.forced_failures.get(PATCHED)
                   and r.kept.get(PATCHED) is not None)
        p = b.sides[PATCHED]
        if p.family == "vllm-triton" and (p.version not in fixed
                                          or len(forced) > fixed[p.version][2]):
            fixed[p.version] = (b, held, len(forced))
    losing = sorted((v for v, (_, lost, _) in per.items() if lost), key=_version_key)
    if not losing:
        return None
    keeping = sorted((v for v, (_, lost, _) in per.items() if not lost), key=_version_key)
    same: dict[tuple[int, int, bool], list[str]] = defaultdict(list)
    for v in losing:
        b, lost, total = per[v]
        empty = all(b.rows[i].kept.get(STOCK) == 0 for i in lost)
        same[(len(lost), total, empty)].append(v)
    parts = [f"{_e(_span(vs))}{' each' if len(vs) > 1 else ''} on {n} of {total} forced rows"
             + (" (the whole row masked: 0 tokens kept)" if empty else "")
             for (n, total, empty), vs in same.items()]
    b0 = per[losing[0]][0]
    threshold = _threshold(b0)
    if len(same) == 1:
        (n, total, empty), _ = next(iter(same.items()))
        parts = [f"on {n} of {total} forced rows{' each' if len(losing) > 1 else ''}"
                 + (" (the whole row masked: 0 tokens kept)" if empty else "")]
    sentence = (f"vLLM {_e(_span(losing))}'s split top-p kernel loses the forced token "
                + "; ".join(parts)
                + (f", every forced row with a forced logit of {_e(threshold)} or more"
                   if threshold else "") + ", where the reference keeps exactly the forced token.")
    if keeping:
        sentence += f" {_e(_span(keeping))} never lose it on the same rows."
    for v, (_, held, total) in sorted(fixed.items(), key=lambda kv: _version_key(kv[0])):
        if v not in per:
            sentence += (f" {_e(v)} (the fix) keeps the forced token on {held} of {total} "
                         "forced rows.")
    bars = [(f"vLLM {v}", float(len(per[v][1])), float(per[v][2]),
             LOST if per[v][1] else HELD) for v in sorted(per, key=_version_key)]
    bars += [(f"vLLM {v} (the fix)", float(f - h), float(f), LOST if f - h else HELD)
             for v, (_, h, f) in sorted(fixed.items(), key=lambda kv: _version_key(kv[0]))
             if v not in per]
    plot = svg.hbars("forced rows where the forced token was lost, per release",
                     "lost forced rows (bar) of all forced rows (tick)", bars,
                     marker="forced rows in the bundle") or ""
    links = []
    for v in losing:
        b, lost, _ = per[v]
        links.append(_row_link(b, lost[0], f"{v}: {b.rows[lost[0]].label}"))
    return Finding("finding-forced-lost", "Releases that lose the forced token", sentence,
                   plot, tuple(links))


def _threshold(b: BundleModel) -> str | None:
    """The smallest forced logit from which every forced group of the bundle's figures lost
    the forced token on every row (None when no such value splits them cleanly)."""
    groups = b.figures.get("forced") or []
    try:
        values = sorted({(float(g["value"]), str(g["value"])) for g in groups})
        lost = {str(g["value"]): g["stock_lost_forced"] == g["rows"] and g["rows"] > 0
                for g in groups}
        none = {str(g["value"]): g["stock_lost_forced"] == 0 for g in groups}
    except (KeyError, TypeError, ValueError):
        return None
    for i, (_, shown) in enumerate(values):
        below, above = values[:i], values[i:]
        if all(lost[s] for _, s in above) and all(none[s] for _, s in below) and below:
            return shown
    return None


# --- 2: the whole vocabulary kept on forced rows --------------------------------------------


def whole_vocabulary(bundles: Sequence[BundleModel]) -> Finding | None:
    """The newest vLLM release that keeps the whole vocabulary on forced rows (the reference
    keeps the forced token alone), on the bundle that shows it on the most rows."""
    best: tuple[tuple[int, ...], int, bool, BundleModel, str] | None = None
    for b in bundles:
        vocab = {w.id: w.vocab for w in b.workload}
        for side in SIDES:
            s = b.sides[side]
            if s.family != "vllm-triton":
                continue
            n = sum(1 for r in b.rows if _whole(r, side, vocab))
            if not n:
                continue
            both = b.sides[STOCK].version == b.sides[PATCHED].version
            key = (_version_key(s.version), n, both)
            if best is None or key > best[:3]:
                best = (*key, b, side)
    if best is None:
        return None
    _, _, both, b, side = best
    version = b.sides[side].version
    vocab = {w.id: w.vocab for w in b.workload}
    sampling = {w.id: w for w in b.workload}
    whole = [(i, r) for i, r in enumerate(b.rows) if _whole(r, side, vocab)]
    over = [(i, r) for i, r in enumerate(b.rows) if r.kind == "forced" and r.oracle == 1
            and (r.kept.get(side) or 0) > 1 and not _whole(r, side, vocab)]
    sizes = sorted({vocab[r.case] for _, r in whole})
    ks = sorted({int(k) for _, r in whole
                 if (k := sampling[r.case].row_sampling(r.row).get("k")) is not None
                 and k.isdigit()})
    all_k = all(sampling[r.case].row_sampling(r.row).get("k") for _, r in whole)
    sentence = (f"vLLM {_e(version)} keeps the whole vocabulary (all "
                f"{_e(' or '.join(str(v) for v in sizes))} tokens) on {len(whole)} forced "
                f"row(s) of <code>{_e(b.name)}</code>"
                + (f" under top-k {_e(' and '.join(str(k) for k in ks))} with top-p"
                   if all_k and ks else "")
                + ", where the reference keeps the forced token alone")
    if over:
        counts = sorted({r.kept.get(side) or 0 for _, r in over})
        sentence += (f"; on {len(over)} more forced row(s) it keeps {counts[0]}"
                     + (f" to {counts[-1]}" if counts[-1] != counts[0] else "")
                     + " tokens where the reference keeps 1")
    sentence += "."
    if both:
        sentence += (f" Its paths stop on {b.rows_stopped} of {b.rows_total} rows of that "
                     "matrix.")
    groups: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    for i, r in [*whole, *over]:
        knobs = ", ".join(f"{k} {v}" for k, v in sorted(
            sampling[r.case].row_sampling(r.row).items()))
        groups[(r.case, knobs, r.kept.get(side) or 0)].append(i)
    ordered = sorted(groups.items(), key=lambda kv: -kv[0][2])[:10]
    bars = [(f"{case}" + (f" ({knobs})" if knobs else "") + f" x{len(ids)}", float(kept),
             1.0, OVER) for (case, knobs, kept), ids in ordered]
    plot = svg.hbars(f"vLLM {version}: kept count on forced rows against the reference's",
                     "tokens kept (log scale; tick: the reference keeps 1)", bars, log=True,
                     marker="the reference's count") or ""
    links = tuple(_row_link(b, ids[0], f"{b.rows[ids[0]].label}: kept {kept}")
                  for (_, _, kept), ids in ordered[:4])
    return Finding("finding-whole-vocabulary", f"vLLM {_e(version)} keeps the whole "
                   "vocabulary on forced rows", sentence, plot, links)


def _whole(r: Row, side: str, vocab: dict[str, int]) -> bool:
    return (r.kind == "forced" and r.oracle == 1 and r.case in vocab
            and r.kept.get(side) == vocab[r.case])


# --- 3 and 4: tie groups ---------------------------------------------------------------------


def _tie_bundles(bundles: Sequence[BundleModel], family: str,
                 test: Callable[[BundleModel, str], bool]
                 ) -> list[tuple[BundleModel, str, TieRow]]:
    out = []
    for b in bundles:
        side = b.side_named(family)
        if side is None or not test(b, side):
            continue
        out += [(b, side, t) for t in b.ties if t.size <= TIE_MEMBERS and side in t.kept]
    return out


def _tie_example(t: TieRow) -> str:
    p = f" and p {t.p:.8g}" if t.p is not None else ""
    return f"{t.size} tokens tied at logit {t.logit:g}{p}"


def _strips(found: Sequence[tuple[BundleModel, str, TieRow]], who: str, colour: str
            ) -> list[tuple[str, Sequence[int], Sequence[tuple[str, Sequence[int], str]]]]:
    return [(f"{t.ref}: {_tie_example(t)}, reference count {t.oracle}", t.members,
             [("reference keeps", t.canonical, REFERENCE), (who, t.kept[side], colour)])
            for _, side, t in found[:3]]


def flashinfer_ties(bundles: Sequence[BundleModel]) -> Finding | None:
    """FlashInfer's sampler drawing tied tokens the canonical order leaves out, on
    constructed boundary rows whose boundary splits a tie group."""
    found = _tie_bundles(bundles, "flashinfer",
                         lambda b, side: "sampling" in b.sides[side].dispatch)
    drew = [(b, s, t) for b, s, t in found if set(t.kept[s]) - set(t.canonical)]
    if not drew:
        return None
    drew.sort(key=lambda x: (len(x[2].kept[x[1]]) != x[2].size, x[2].size))
    b, side, t = drew[0]
    s = b.sides[side]
    whole = len(t.kept[side]) == t.size
    sentence = (f"FlashInfer {_e(s.version)}'s <code>{_e(s.dispatch)}</code> sampler draws "
                f"{'the whole tie group' if whole else 'tied tokens past the nucleus'} at the "
                f"boundary: with {_e(_tie_example(t))}, the reference's nucleus holds "
                f"{t.oracle} token(s), {len(t.canonical)} of the group, and it drew "
                f"{len(t.kept[side])} of the {t.size} tied tokens. On {len(drew)} of "
                f"{len(found)} constructed rows whose boundary splits a tie group it drew "
                "tied tokens the reference leaves out.")
    plot = svg.tie_strips("FlashInfer's draws across a tie group",
                          _strips(drew, "FlashInfer drew", OVER)) or ""
    links = tuple(_row_link(b, t.index, f"{b.name}: {t.ref}") for b, _, t in drew[:4])
    return Finding("finding-flashinfer-ties", "FlashInfer draws whole tie groups", sentence,
                   plot, links)


def pytorch_ties(bundles: Sequence[BundleModel]) -> Finding | None:
    """vLLM's PyTorch path keeping the highest ids of a tie group where the canonical order
    keeps the lowest."""
    found = _tie_bundles(bundles, "vllm-pytorch", lambda b, side: True)
    high = [(b, s, t) for b, s, t in found
            if t.kept[s] and tuple(t.kept[s]) != tuple(t.canonical)
            and tuple(t.kept[s]) == tuple(t.members[-len(t.kept[s]):])]
    if not high:
        return None
    high.sort(key=lambda x: -len(x[2].kept[x[1]]))
    b, side, t = high[0]
    s = b.sides[side]
    sentence = (f"vLLM's PyTorch path (<code>{_e(s.family)}</code> {_e(s.version)}, path "
                f"<code>{_e(s.dispatch)}</code>) keeps the tied tokens with the highest ids "
                "where the reference's canonical order keeps the lowest: with "
                f"{_e(_tie_example(t))}, it keeps ids "
                f"{_e(', '.join(map(str, t.kept[side])))} where the reference keeps "
                f"{_e(', '.join(map(str, t.canonical)))}; the highest ids on {len(high)} of "
                f"{len(found)} constructed rows whose boundary splits a tie group.")
    wide = [x for x in bundles if x.side_named("vllm-pytorch") is not None
            and x.stop_rows.get("noncanonical_tie")]
    if wide:
        w = max(wide, key=lambda x: x.rows_total)
        sentence += (f" On <code>{_e(w.name)}</code> it stops on {w.rows_stopped} of "
                     f"{w.rows_total} rows, {w.stop_rows['noncanonical_tie']} of them for "
                     "<code>noncanonical_tie</code>.")
    plot = svg.tie_strips("the PyTorch path's kept ids against the canonical ones",
                          _strips(high, "PyTorch path keeps", OVER)) or ""
    links = tuple(_row_link(b, t.index, f"{b.name}: {t.ref}") for b, _, t in high[:4])
    return Finding("finding-pytorch-ties", "vLLM's PyTorch path keeps the highest-id ties",
                   sentence, plot, links)


FINDINGS = (forced_lost, whole_vocabulary, flashinfer_ties, pytorch_ties)


def findings(bundles: Sequence[BundleModel]) -> list[Finding]:
    """Every finding the verified bundles support, in README's order."""
    return [f for f in (make(bundles) for make in FINDINGS) if f is not None]
