"""``report.png``: kept count minus oracle count per row, both sides (matplotlib).

The Markdown report is trusted code (``harness.core.report``: ``verify`` regenerates it and
requires the signed bytes); the plot needs matplotlib, so it lives on the capture side and is
signed, not regenerated.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.names import FORCED, ORDINARY, SIDES
from ..core.report import (
    ReportInputs,
    is_interpreter,
    oracle_count,
    side_kept,
)

PNG_METADATA = {"Software": None}
_COLORS = {"stock": "#d95f02", "patched": "#1b9e77"}
_MARKERS = {FORCED: "x", ORDINARY: "o"}


def plot_points(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """(side, kind) -> [(row ordinal, kept - oracle)] for rows where both are known."""
    points: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for i, r in enumerate(rows):
        count = oracle_count(r)
        for side in SIDES:
            kept = side_kept(r, side)
            if count is not None and kept is not None:
                kind = FORCED if r.get("kind") == FORCED else ORDINARY
                points.setdefault((side, kind), []).append((i, kept - count))
    return points


def render_png(inputs: ReportInputs) -> bytes:
    """``report.png``: kept count minus oracle count per row, both sides. Byte-deterministic
    for the same inputs and matplotlib version (no timestamp or software metadata)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    rows = list(inputs.rows)
    points = plot_points(rows)
    plotted = {i for pts in points.values() for i, _ in pts}
    missing = len(rows) - len(plotted)
    import matplotlib.style

    with matplotlib.style.context("default"):
        fig = Figure(figsize=(10, 4.5), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        boundaries = [i for i in range(1, len(rows))
                      if rows[i].get("case") != rows[i - 1].get("case")]
        for b in boundaries:
            ax.axvline(b - 0.5, color="#cccccc", linewidth=0.6, zorder=0)
        ax.axhline(0, color="#555555", linewidth=0.8, zorder=1)
        for side in SIDES:
            for kind in (ORDINARY, FORCED):
                pts = points.get((side, kind), [])
                if not pts:
                    continue
                offset = -0.15 if side == "stock" else 0.15
                ax.scatter([x + offset for x, _ in pts], [y for _, y in pts],
                           marker=_MARKERS[kind], s=22 if kind == FORCED else 12,
                           color=_COLORS[side], linewidths=1.0, zorder=2,
                           label=f"{side}, {kind} rows")
        span = max((abs(y) for pts in points.values() for _, y in pts), default=0)
        if span > 20:  # stock masking a whole row or keeping everything: keep 0..3 readable
            ax.set_yscale("symlog", linthresh=4)
        else:
            ax.set_ylim(-span - 1, span + 1)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(-1, max(len(rows), 1))
        ax.set_xlabel("row (case order; grey lines separate cases)")
        ax.set_ylabel("kept count - oracle count")
        verdict = inputs.verdict.get("verdict", "?")
        kind = "Triton interpreter (CPU)" if is_interpreter(inputs.backend, inputs.evidence) \
            else str(inputs.backend)
        title = f"{inputs.manifest_name}: {verdict} ({kind})"
        if missing:
            title += f"; {missing} row(s) not plotted (no output or ambiguous oracle)"
        ax.set_title(title, fontsize=10)
        if points:
            ax.legend(loc="best", fontsize=8)
        ax.grid(True, axis="y", linewidth=0.3, alpha=0.5)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", metadata=PNG_METADATA)
    return buffer.getvalue()
