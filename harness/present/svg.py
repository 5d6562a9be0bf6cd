"""Inline SVG plots for the site, drawn from model values (no plotting library, no script).

Every label that comes from evidence goes through :func:`html.escape`; colours and sizes
are this module's own. Presentation attributes only (no ``style`` attribute), so the
pages' Content-Security-Policy needs no inline-style allowance for the plots.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from ..core.names import PATCHED, SIDES, STOCK
from .model import Row

WIDTH, HEIGHT, PAD = 640, 360, 48
SIDE_COLOUR = {STOCK: "#4c72b0", PATCHED: "#dd8452"}
STOP_COLOUR = "#c0392b"
MAX_POINTS = 20000  # a plot draws at most this many points per side; the page says so


def _log(value: float) -> float:
    return math.log10(1.0 + max(value, 0.0))


def _frame(title: str, x_label: str, y_label: str, body: list[str], legend: list[str]) -> str:
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD // 2}" y2="{HEIGHT - PAD}" '
        'stroke="#333333"/>',
        f'<line x1="{PAD}" y1="{PAD // 2}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#333333"/>',
        f'<text x="{WIDTH // 2}" y="{HEIGHT - 10}" text-anchor="middle" font-size="12">'
        f"{escape(x_label)}</text>",
        f'<text x="14" y="{HEIGHT // 2}" text-anchor="middle" font-size="12" '
        f'transform="rotate(-90 14 {HEIGHT // 2})">{escape(y_label)}</text>',
        *body, *legend, "</svg>"])


def _legend(entries: Sequence[tuple[str, str]]) -> list[str]:
    out = []
    for i, (colour, text) in enumerate(entries):
        x = PAD + 10 + i * 150
        out.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x + 14}" y="15" font-size="11">{escape(text)}</text>')
    return out


def kept_against_oracle(rows: Sequence[Row]) -> str | None:
    """Each side's kept count against the oracle's count, per row (log scale, both axes);
    the diagonal is "kept exactly the oracle's count"; stopped rows ringed in red. None when
    no row has both counts (a rule set with no kept set)."""
    points = [(r, s) for r in rows for s in SIDES
              if r.oracle is not None and r.kept.get(s) is not None]
    if not points:
        return None
    top = max(max(r.oracle or 0, r.kept.get(s) or 0) for r, s in points)
    span = _log(top) or 1.0
    inner_w, inner_h = WIDTH - PAD - PAD // 2, HEIGHT - PAD - PAD // 2

    def xy(oracle: int, kept: int) -> tuple[float, float]:
        return (PAD + inner_w * _log(oracle) / span,
                HEIGHT - PAD - inner_h * _log(kept) / span)

    body = []
    x0, y0 = xy(0, 0)
    x1, y1 = xy(top, top)
    body.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" '
                'stroke="#999999" stroke-dasharray="4 3"/>')
    decade = 1
    while decade <= top:
        tx, _ = xy(decade, 0)
        _, ty = xy(0, decade)
        body.append(f'<text x="{tx:.1f}" y="{HEIGHT - PAD + 14}" text-anchor="middle" '
                    f'font-size="10">{decade}</text>')
        body.append(f'<text x="{PAD - 4}" y="{ty + 3:.1f}" text-anchor="end" '
                    f'font-size="10">{decade}</text>')
        decade *= 10
    drawn = {s: 0 for s in SIDES}
    for row, side in points:
        if drawn[side] >= MAX_POINTS:
            continue
        drawn[side] += 1
        x, y = xy(row.oracle or 0, row.kept[side] or 0)
        ring = f' stroke="{STOP_COLOUR}" stroke-width="1.5"' if row.stops else ""
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{SIDE_COLOUR[side]}" '
                    f'fill-opacity="0.7"{ring}><title>{escape(row.label)} {side}: kept '
                    f"{row.kept[side]}, oracle {row.oracle}"
                    f"{' (stopped: ' + escape(', '.join(row.stops)) + ')' if row.stops else ''}"
                    "</title></circle>")
    return _frame("kept count against the oracle's count", "oracle's count (log scale)",
                  "kept count (log scale)", body,
                  _legend([(SIDE_COLOUR[STOCK], "stock"), (SIDE_COLOUR[PATCHED], "patched"),
                           (STOP_COLOUR, "stopped row (ring)")]))


def mass_diagnostics(rows: Sequence[Row], side: str) -> str | None:
    """One side's per-row mass of kept tokens outside the oracle's set (up) and of oracle
    tokens it dropped (down), binary64, in row order. None when the rows carry neither."""
    values = [(r, r.mass_outside.get(side), r.mass_dropped.get(side)) for r in rows]
    values = [v for v in values if v[1] is not None or v[2] is not None][:MAX_POINTS]
    if not values:
        return None
    top = max(max(o or 0.0, d or 0.0) for _, o, d in values) or 1.0
    inner_w = WIDTH - PAD - PAD // 2
    mid = (HEIGHT - PAD + PAD // 2) / 2
    half = (HEIGHT - PAD - PAD // 2) / 2
    step = inner_w / len(values)
    body = [f'<line x1="{PAD}" y1="{mid:.1f}" x2="{WIDTH - PAD // 2}" y2="{mid:.1f}" '
            'stroke="#999999"/>',
            f'<text x="{PAD - 4}" y="{mid - half + 4:.1f}" text-anchor="end" font-size="10">'
            f"{top:.3g}</text>",
            f'<text x="{PAD - 4}" y="{mid + half:.1f}" text-anchor="end" font-size="10">'
            f"{top:.3g}</text>"]
    for i, (row, outside, dropped) in enumerate(values):
        x = PAD + i * step
        w = max(step * 0.8, 0.5)
        for value, colour, sign, what in ((outside, "#8172b3", -1, "outside"),
                                          (dropped, "#55a868", 1, "dropped")):
            if not value:
                continue
            h = half * value / top
            y = mid - h if sign < 0 else mid
            body.append(f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" '
                        f'fill="{colour}"><title>{escape(row.label)}: mass {what} '
                        f"{value:.6g}</title></rect>")
    return _frame(f"{side}: mass outside the oracle's set and dropped, per row",
                  "rows, in bundle order", "probability mass (binary64)", body,
                  _legend([("#8172b3", "mass outside (up)"),
                           ("#55a868", "mass dropped (down)")]))


def hbars(title: str, axis: str, bars: Sequence[tuple[str, float, float | None, str]], *,
          log: bool = False, marker: str = "") -> str | None:
    """Horizontal bars, one per ``(label, value, reference, colour)``: the value's bar and,
    where ``reference`` is not None, a black tick at it (``marker`` names the tick in the
    legend). ``log``: a log10(1 + x) axis (counts from 0 to a vocabulary). None: no bar."""
    if not bars:
        return None
    height = PAD + 22 * len(bars) + 30
    label_w = 300
    inner = WIDTH - label_w - 70
    top = max(max(v, r or 0.0) for _, v, r, _ in bars) or 1.0

    def scale(value: float) -> float:
        if log:
            return inner * _log(value) / (_log(top) or 1.0)
        return inner * value / top

    body = []
    for i, (label, value, reference, colour) in enumerate(bars):
        y = PAD + 22 * i
        w = max(scale(value), 1.0 if value else 0.0)
        body.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end" font-size="11">'
                    f"{escape(label)}</text>")
        body.append(f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="16" '
                    f'fill="{colour}"><title>{escape(label)}: {value:g}</title></rect>')
        body.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 14}" font-size="11">'
                    f"{value:g}</text>")
        if reference is not None:
            x = label_w + scale(reference)
            body.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 20}" '
                        'stroke="#000000" stroke-width="2"/>')
    legend = _legend([("#000000", marker)]) if marker else []
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="{label_w}" y="{height - 10}" font-size="12">{escape(axis)}</text>',
        *body, *legend, "</svg>"])


def tie_strips(title: str, strips: Sequence[tuple[str, Sequence[int],
                                                  Sequence[tuple[str, Sequence[int], str]]]]
               ) -> str | None:
    """Tie groups, one block per ``(caption, member ids, lines)``: a square per tied token
    id (ascending), and per line ``(who, ids it keeps, colour)`` the squares it keeps filled,
    the others left empty. None: no strip."""
    if not strips:
        return None
    cell, label_w = 22, 200
    rows_h = [22 + 24 * len(lines) + 24 for _, _, lines in strips]
    height = sum(rows_h) + 16
    body = []
    y = 8
    for (caption, members, lines), h in zip(strips, rows_h, strict=True):
        body.append(f'<text x="8" y="{y + 14}" font-size="12" font-weight="bold">'
                    f"{escape(caption)}</text>")
        for j, (who, ids, colour) in enumerate(lines):
            ly = y + 22 + 24 * j
            chosen = set(ids)
            body.append(f'<text x="{label_w - 6}" y="{ly + 15}" text-anchor="end" '
                        f'font-size="11">{escape(who)}</text>')
            for i, token in enumerate(members):
                fill = colour if token in chosen else "#ffffff"
                body.append(f'<rect x="{label_w + i * cell}" y="{ly}" width="{cell - 3}" '
                            f'height="{cell - 3}" fill="{fill}" stroke="#555555">'
                            f"<title>token {token}: "
                            f"{'kept' if token in chosen else 'not kept'} ({escape(who)})"
                            "</title></rect>")
        iy = y + 22 + 24 * len(lines) + 12
        for i, token in enumerate(members):
            body.append(f'<text x="{label_w + i * cell + 9}" y="{iy}" text-anchor="middle" '
                        f'font-size="9">{token}</text>')
        y += h
    width = max(WIDTH, label_w + cell * max(len(m) for _, m, _ in strips) + 20)
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        *body, "</svg>"])
