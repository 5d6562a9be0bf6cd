"""The static evidence site: HTML pages rendered from the evidence model.

No script anywhere: each page carries a Content-Security-Policy that allows only its one
stylesheet (by hash) and nothing else, so no page loads, runs or sends anything. Every
string from evidence goes through :func:`html.escape` (:func:`_e`) before it reaches a page.
Pages: ``index.html`` (findings, the release x path x implementation grid, every bundle and
mutation run), ``bundles/<name>.html`` and ``mutation/<name>.html``, each name a slug of the
piece's path and a short sha256 of that exact path (:func:`harness.present.model.page_name`).
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path

from ..core.errors import InternalError
from ..core.names import PATCHED, SIDES, STOCK
from ..core.terminal import printable
from . import findings as teach
from . import svg
from .model import (
    GROUPS,
    BundleModel,
    Evidence,
    MutationRun,
    RefusedBundle,
    RefusedRun,
)

CSS = """
body{font-family:sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2d3d;color:#fff;padding:16px 24px}
header a{color:#cfe3ff}
main{padding:16px 24px;max-width:1200px}
table{border-collapse:collapse;margin:8px 0 16px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top;font-size:13px}
th{background:#eee}
td.n{text-align:right}
.v-pass{background:#9fd8a4}
.v-stop{background:#f2a3a3}
.v-mixed{background:#f7d488}
.v-refused{background:#bdbdbd}
.v-none{background:#fafafa}
.wide{overflow-x:auto}
#grid td{min-width:90px;height:36px}
#grid td a{display:block;font-size:12px}
pre{background:#f0f0f0;padding:8px;overflow-x:auto;font-size:12px}
.plot{border:1px solid #ddd;margin:4px 8px 12px 0}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px}
.finding{border-left:4px solid #1f2d3d;padding:4px 12px;margin:12px 0 20px;background:#fff}
.finding p.claim{font-size:15px;max-width:900px}
.answer{font-size:15px;padding:8px 12px}
code{font-size:90%}
""".strip()
_STYLE_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
CSP = f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; img-src 'none'"
REFUSED_COLUMN = "did not verify"
ROWS_LISTED = teach.ROWS_ANCHORED  # the all-rows table lists at most this many rows


def _e(text: object) -> str:
    """Evidence text for HTML, text and attribute values alike."""
    return escape(str(text), quote=True)


def _page(title: str, body: Iterable[str], *, up: str = "") -> str:
    home = f'<a href="{up}index.html">evidence home</a>' if up else ""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
        f'<header><h1 id="title">{_e(title)}</h1>{home}</header>', "<main>", *body,
        "</main>", "</body>", "</html>", ""])


def _verdict_class(verdicts: Sequence[str]) -> str:
    if not verdicts:
        return "v-none"
    if set(verdicts) == {"PASS"}:
        return "v-pass"
    if set(verdicts) == {"STOP"}:
        return "v-stop"
    if set(verdicts) == {"refused"}:
        return "v-refused"
    return "v-mixed"


def _bundle_href(b: BundleModel | RefusedBundle, up: str = "") -> str:
    return f"{up}bundles/{b.slug}.html"


def _mutation_href(m: MutationRun | RefusedRun, up: str = "") -> str:
    return f"{up}mutation/{m.slug}.html"


# --- the front page -----------------------------------------------------------------------


def _findings(ev: Evidence) -> list[str]:
    verified = [b for b in ev.bundles if isinstance(b, BundleModel)]
    refused = [b for b in ev.bundles if isinstance(b, RefusedBundle)]
    out = []
    sweep = [b for b in verified if b.group == "sweep"]
    if sweep:
        stopped = [b.sides[STOCK].version for b in sweep if b.verdict == "STOP"]
        passed = [b.sides[STOCK].version for b in sweep if b.verdict == "PASS"]
        out.append(f"Release sweep: {len(stopped)} of {len(sweep)} vLLM releases stop against "
                   "the fixed release"
                   + (f" ({_e(_span(stopped))})" if stopped else "")
                   + f"; {len(passed)} pass" + (f" ({_e(_span(passed))})." if passed else "."))
    deploy = [b for b in verified if b.group == "deploy"]
    if deploy:
        reasons = sorted({r for b in deploy for r in b.reasons})
        out.append(f"Deployment matrix: {sum(b.verdict == 'STOP' for b in deploy)} of "
                   f"{len(deploy)} releases, 0.33.0 included, stop on at least one CUDA "
                   f"path (reasons: {_e(', '.join(reasons)) or 'none'}).")
    impls = [b for b in verified if b.group == "impls"]
    if impls:
        families = Counter((b.sides[PATCHED].family, b.verdict) for b in impls)
        said = "; ".join(f"{_e(f)}: {n} {v}" for (f, v), n in sorted(families.items()))
        out.append(f"Other implementations (FlashInfer's samplers, vLLM's PyTorch path): "
                   f"{said}.")
    pr = [b for b in verified if b.group == "pr"]
    if pr:
        out.append("Pull-request runs: " + "; ".join(
            f"{_e(b.path.rsplit('/', 2)[-2])} {b.verdict}" for b in pr) + ".")
    runs = [m for m in ev.mutations if isinstance(m, MutationRun)]
    if runs:
        killed = sum(m.gate_kills[0] for m in runs)
        of = sum(m.gate_kills[1] for m in runs)
        out.append(f"Mutation testing: the gate killed {killed} of {of} mutants over "
                   f"{len(runs)} verified runs; each run's page shows what the survivors "
                   "changed.")
    if refused or any(isinstance(m, RefusedRun) for m in ev.mutations):
        n = len(refused) + sum(isinstance(m, RefusedRun) for m in ev.mutations)
        out.append(f"{n} piece(s) of evidence did not verify and are shown as refused, "
                   "with the reason, never with their claims.")
    out.append(f"{len(verified)} bundles verified in this build (signature, digests, "
               "bindings, oracle and gate rerun) before anything below was read from them.")
    return [f"<li>{line}</li>" for line in out]


def _span(versions: Sequence[str]) -> str:
    if not versions:
        return ""
    if len(versions) <= 3:
        return ", ".join(versions)
    return f"{versions[0]} to {versions[-1]}"


def _grid(ev: Evidence) -> list[str]:
    """Rows: implementation and release of the stock side (the release or base a bundle
    examines); columns: the paths that side proved; a cell: its bundles, coloured by their
    verified verdicts (refused bundles are grey and placed nowhere but their own row)."""
    cells: dict[tuple[str, str], dict[str, list[BundleModel | RefusedBundle]]] = defaultdict(
        lambda: defaultdict(list))
    paths: set[str] = set()
    refused = [b for b in ev.bundles if isinstance(b, RefusedBundle)]
    for b in ev.bundles:
        if isinstance(b, RefusedBundle):
            continue
        side = b.sides[STOCK]
        for path in side.proven or ("unproven",):
            cells[(side.family, side.version)][path].append(b)
            paths.add(path)
    if refused:  # in a column and row of their own: a refused bundle's claims place nothing
        cells[("(refused)", "(did not verify)")][REFUSED_COLUMN] = list(refused)
    columns = sorted(paths) + ([REFUSED_COLUMN] if refused else [])
    out = ['<div class="wide">', '<table id="grid">',
           "<tr><th>implementation</th><th>release</th>"
           + "".join(f"<th>{_e(p)}</th>" for p in columns) + "</tr>"]
    for (family, version) in sorted(cells, key=lambda k: (k[0] == "(refused)", k[0],
                                                          _version_key(k[1]))):
        row = cells[(family, version)]
        tds = []
        for p in columns:
            found = row.get(p, [])
            broke = [_broke_on(b, p) if isinstance(b, BundleModel) else None for b in found]
            verdicts = ["refused" if r is None else "STOP" if r else "PASS" for r in broke]
            links = "".join(f'<a href="{_e(_bundle_href(b))}">{_e(_said_broke(r))}: '
                            f"{_e(_short(b))}</a>"
                            for b, r in zip(found, broke, strict=True))
            tds.append(f'<td class="{_verdict_class(verdicts)}">{links}</td>')
        out.append(f"<tr><th>{_e(family)}</th><th>{_e(version)}</th>{''.join(tds)}</tr>")
    out += ["</table>", "</div>"]
    return out


def _short(b: BundleModel | RefusedBundle) -> str:
    """A bundle's name in a grid cell: its folder, or inside an archive its path there
    (``pr-harmful/bundle``, never a bare ``bundle``)."""
    if b.archive and b.path.startswith(b.archive + "/"):
        return b.path[len(b.archive) + 1:]
    return b.path.rsplit("/", 1)[-1]


def _said_broke(reasons: tuple[str, ...] | None) -> str:
    if reasons is None:
        return "refused"
    return ", ".join(reasons) if reasons else "nothing broke"


def _broke_on(b: BundleModel, path: str) -> tuple[str, ...]:
    """The stop reasons of the bundle's rows whose case the stock side ran on ``path`` (all
    its rows' reasons when ``path`` is not one it proved): empty when nothing broke there."""
    on = {c.id for c in b.cases if (c.paths.get(STOCK) or "unproven") == path}
    return tuple(sorted({s for r in b.rows if r.case in on for s in r.stops}))


def _version_key(version: str) -> tuple[int, ...]:
    import re

    return tuple(int(x) for x in re.findall(r"\d+", version))


def _teaching(ev: Evidence) -> list[str]:
    """Each finding the verified bundles support: its sentence, its plot, its rows."""
    verified = [b for b in ev.bundles if isinstance(b, BundleModel)]
    out = []
    for f in teach.findings(verified):
        links = ", ".join(f'<a href="{_e(href)}">{_e(text)}</a>' for href, text in f.links)
        out += [f'<section class="finding" id="{_e(f.key)}">', f"<h3>{f.title}</h3>",
                f'<p class="claim">{f.sentence}</p>', f.plot,
                f"<p>Rows that prove it: {links}</p>" if links else "", "</section>"]
    if not out:
        out.append("<p>No verified bundle here supports one of the findings.</p>")
    return out


def _replays(ev: Evidence) -> list[str]:
    """The "Bugs it would have caught" table: each committed run of a frozen replay of an
    upstream bug, verified and held to its replay (:mod:`.replays`). The thread is shown as
    text, not linked: the site links nothing off itself (it needs no network)."""
    from .replays import rows_named, said

    if not ev.replays and not ev.replays_waiting:
        return []
    out = ["<h2 id=\"replays\">Bugs it would have caught</h2>",
           "<p>Sampler bugs that shipped upstream, replayed with <code>topp-gate replay"
           "</code>: the broken release judged against the binary64 oracle row by row, the "
           "fixed release gated as an upgrade of it, on the call pattern the bug needs. Only "
           "bundles that verified in this build and are runs of their frozen replay file "
           "appear.</p>",
           "<table><tr><th>bug (thread)</th><th>releases</th><th>backend, device</th>"
           "<th>what the gate said</th><th>rows the broken release fails</th>"
           "<th>bundle</th></tr>"]
    for run in ev.replays:
        data = run.replay.data
        bug = f'{_e(data["title"])} (<code>{_e(data["thread"])}</code>)'
        releases = f"{_e(run.replay.broken.release)} &rarr; {_e(run.replay.fixed.release)}"
        where = f"{_e(run.backend or '?')}, {_e(run.device or '?')}"
        if run.outcome is None:
            out.append(f"<tr><td>{bug}</td><td>{releases}</td><td>{where}</td>"
                       f'<td class="v-refused" colspan="2">refused: {_e(run.refused)}</td>'
                       f"<td>{_e(run.shown)}</td></tr>")
            continue
        good = run.outcome.answer == "REPRODUCED AND FIXED"
        out.append(f"<tr><td>{bug}</td><td>{releases}</td><td>{where}</td>"
                   f'<td class="{"v-pass" if good else "v-stop"}"><strong>'
                   f"{_e(run.outcome.answer)}</strong>: "
                   f"{_e(said(run.outcome, run.replay.broken.release, run.replay.fixed.release))}"
                   f"</td><td>{_e(rows_named(run.outcome) or 'none')}</td>"
                   f"<td>{_e(run.shown)}</td></tr>")
    for replay in ev.replays_waiting:
        data = replay.data
        out.append(f'<tr><td>{_e(data["title"])} (<code>{_e(data["thread"])}</code>)</td>'
                   f"<td>{_e(replay.broken.release)} &rarr; {_e(replay.fixed.release)}</td>"
                   f'<td colspan="4">frozen, not run yet</td></tr>')
    out.append("</table>")
    return out


def index_page(ev: Evidence) -> str:
    body = ["<h2>What the evidence shows</h2>",
            "<p>Each finding below is computed in this build from the bundles verified "
            "above everything else on this page; a finding no verified bundle supports is "
            "left out.</p>", *_teaching(ev), *_replays(ev),
            "<h2>The evidence at a glance</h2>", "<ul id=\"findings\">", *_findings(ev),
            "</ul>",
            "<h2>Release x path x implementation</h2>",
            "<p>Each row is the implementation and release a bundle examines (its stock "
            "side: the release under test in the sweep and deployment matrices, the base of "
            "a pull request); each column a dispatch path that side proved; each cell its "
            "bundles, coloured STOP where a row run on that path stopped and named by the "
            "reasons that broke there.</p>",
            '<p class="legend"><span class="v-pass">PASS</span><span class="v-stop">STOP'
            '</span><span class="v-mixed">PASS and STOP</span><span class="v-refused">'
            "refused (did not verify)</span></p>",
            *_grid(ev), "<h2>Bundles</h2>"]
    for group, what in GROUPS.items():
        members = [b for b in ev.bundles if b.group == group]
        if not members:
            continue
        body += [f"<h3>{_e(what)}</h3>",
                 "<table><tr><th>bundle</th><th>what it compares (its manifest)</th>"
                 "<th>verdict</th><th>rows stopped</th><th>rules</th></tr>"]
        for b in members:
            if isinstance(b, RefusedBundle):
                body.append(f'<tr><td><a href="{_e(_bundle_href(b))}">{_e(b.path)}</a></td>'
                            f'<td class="v-refused">refused</td><td class="v-refused" '
                            f'colspan="3">{_e(b.reason)}</td></tr>')
            else:
                body.append(f'<tr><td><a href="{_e(_bundle_href(b))}">{_e(b.path)}</a></td>'
                            f"<td>{_e(_headline(b))}</td>"
                            f'<td class="{_verdict_class([b.verdict])}">{_e(b.verdict)}</td>'
                            f'<td class="n">{b.rows_stopped} of {b.rows_total}</td>'
                            f"<td>{_e(b.rules)}</td></tr>")
        body.append("</table>")
    if ev.mutations:
        body += ["<h2>Mutation runs</h2>", "<table><tr><th>run</th><th>matrix</th>"
                 "<th>gate kills</th><th>survivors</th></tr>"]
        for m in ev.mutations:
            if isinstance(m, RefusedRun):
                body.append(f'<tr><td><a href="{_e(_mutation_href(m))}">{_e(m.path)}</a></td>'
                            f'<td class="v-refused" colspan="3">refused: {_e(m.reason)}'
                            "</td></tr>")
            else:
                body.append(f'<tr><td><a href="{_e(_mutation_href(m))}">{_e(m.path)}</a></td>'
                            f"<td>{_e(m.matrix)}</td><td class=\"n\">{m.gate_kills[0]}/"
                            f"{m.gate_kills[1]}</td><td>{len(m.survivors)}</td></tr>")
        body.append("</table>")
    return _page("topp-gate evidence", body)


# --- one page per bundle --------------------------------------------------------------------


def _headline(b: BundleModel) -> str:
    """A bundle in its manifest's own words: its name and its description's first sentence
    (plain text: the caller escapes it)."""
    first = b.description.split(". ", 1)[0].rstrip(".")
    if first.startswith(f"{b.name}:") or first == b.name:
        return first
    return f"{b.name}: {first}" if first else b.name


def _kv(pairs: Sequence[tuple[str, str]]) -> list[str]:
    return ["<table>", *(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in pairs),
            "</table>"]


def refused_page(b: RefusedBundle) -> str:
    return _page(f"refused: {b.path}", [
        '<p id="verdict" class="v-refused">refused: this bundle did not verify, so nothing '
        "it claims is shown.</p>",
        *_kv([("bundle", f"<code>{_e(b.path)}</code>"), ("error", f"<code>{_e(b.code)}</code>"),
              ("reason", _e(b.reason))])], up="../")


def _side_words(b: BundleModel, side: str) -> str:
    """One side as the verified manifest pins it (the core's side facts), escaped."""
    facts = b.compared.get(side) or {}
    s = b.sides[side]
    said = f"{_e(facts.get('family', s.family))} {_e(facts.get('version', s.version))}"
    if facts.get("pin"):
        said += f", pin <code>{_e(facts['pin'])}</code>"
    if facts.get("tree_sha256"):
        said += (f", tree <code>{_e(str(facts['tree_sha256'])[:16])}</code>"
                 + ("" if facts.get("tree_pinned") else " (the receipt's)"))
    if facts.get("patch_sha256"):
        said += f", patch <code>{_e(str(facts['patch_sha256'])[:16])}</code>"
    return said


def _answer(b: BundleModel) -> list[str]:
    """A pull request's bundle (a regression rule set) opens with its answer: the verdict,
    the rows the change broke with their reasons, path and kept counts (oracle, base,
    change), the base defects it altered, the rows whose kept set changed, and the base and
    change compared."""
    if b.base_defects is None:
        return []
    c = b.changes
    index = {r.label: i for i, r in enumerate(b.rows[:ROWS_LISTED])}
    altered = [r for r in b.base_defect_rows if r.get("altered")]
    broken = c.broken if c is not None else ()
    if c is not None and c.base_failed:
        said = (f'<p class="v-refused"><strong>BASE FAILED</strong>: {_e(c.base_failed)}. '
                "The base did not run, so this is no verdict on the change.</p>")
    else:
        reasons = sorted({r for f in broken for r in f.reasons})
        said = (f'<p class="{_verdict_class([b.verdict])}"><strong>{_e(b.verdict)}</strong>: '
                + (f"the change broke {len(broken)} of {b.rows_total} rows (reasons: "
                   f"{_e(', '.join(reasons))})" if broken
                   else f"the change broke none of the {b.rows_total} rows") + ".</p>")
    out = ['<section class="answer" id="answer">', "<h2>The answer</h2>", said, "<ul>",
           f"<li>base: {_side_words(b, STOCK)}</li>",
           f"<li>change: {_side_words(b, PATCHED)}"
           + (f" (the change: {_e(b.change.get('what', ''))})" if b.change.get("what")
              else "") + "</li>"]
    if c is not None:
        out.append(f'<li id="changed">{c.rows_changed} of {c.rows} rows have outputs that '
                   "differ from the base's"
                   + (f" ({c.rows_changed_base_right} of them rows the base got right)"
                      if c.rows_changed else "") + "</li>")
    out.append(f"<li>base defects (rows the base already fails): "
               f"{_e(b.base_defects.get('rows', 0))}; the change altered {len(altered)} of "
               "them</li>")
    out.append("</ul>")
    if broken:
        out += ["<table id=\"broken\"><tr><th>row</th><th>reasons</th><th>path</th>"
                "<th>oracle</th><th>base kept</th><th>change kept</th></tr>"]
        for f in broken[:ROWS_LISTED]:
            at = index.get(f.row)
            name = (f'<a href="#{teach.row_anchor(at)}">{_e(f.row)}</a>' if at is not None
                    else _e(f.row))
            out.append(f'<tr class="v-stop"><td>{name}</td><td>{_e(", ".join(f.reasons))}'
                       f"</td><td>{_e(f.path or 'unproven')}</td>"
                       f'<td class="n">{_e(f.oracle_kept)}</td>'
                       f'<td class="n">{_e(f.base_kept)}</td>'
                       f'<td class="n">{_e(f.change_kept)}</td></tr>')
        out.append("</table>")
    out.append("</section>")
    return out


def bundle_page(b: BundleModel) -> str:
    def side_cell(side: str) -> str:
        s = b.sides[side]
        ran = "" if s.status == "ok" else f" (did not run: {_e(s.status)}: {_e(s.reason)})"
        return (f"{_e(s.family)} {_e(s.version)}, path required <code>{_e(s.dispatch)}</code>"
                f", proven: {_e(', '.join(s.proven) or 'none')}{ran}")

    source = b.harness.get("source") or {}
    body = [f'<p id="verdict" class="{_verdict_class([b.verdict])}">verified verdict: '
            f"<strong>{_e(b.verdict)}</strong>: {b.rows_stopped} of {b.rows_total} rows "
            f"stopped (reasons: {_e(', '.join(b.reasons) or 'none')})</p>",
            *_answer(b),
            "<h2>What was compared</h2>",
            *_kv([("bundle", f"<code>{_e(b.path)}</code>"),
                  ("manifest", f"{_e(b.name)}: {_e(b.description)}"),
                  ("stock", side_cell(STOCK)), ("patched", side_cell(PATCHED)),
                  ("workload", _e(f"{len(b.cases)} cases, {b.rows_total} rows")),
                  ("rule set", f"<code>{_e(b.rules)}</code>"),
                  ("report format", f"<code>{_e(b.report_format)}</code>"),
                  ("backend", _e(f"{b.backend} on {', '.join(b.devices) or 'no device named'}"))
                  ])]
    body += ["<h2>Stopped rows by reason</h2>"]
    if b.stop_rows:
        body += _kv([(r, f"{n} rows") for r, n in b.stop_rows.items()])
    else:
        body.append("<p>No row stopped.</p>")
    if b.base_defects is not None:
        reasons = b.base_defects.get("reasons", {})
        body += ["<h2>The base's own defects (apart from the change)</h2>",
                 f"<p>{_e(b.base_defects.get('rows', 0))} rows the base already fails "
                 f"(reasons: {_e(', '.join(f'{k} x{v}' for k, v in reasons.items()) or 'none')})"
                 ". They do not stop the change unless it alters them.</p>"]
        if b.base_defect_rows:
            body.append("<table><tr><th>row</th><th>faults</th><th>altered by the change"
                        "</th></tr>")
            body += [f"<tr><td>{_e(r.get('row'))}</td><td>{_e(', '.join(r.get('faults', [])))}"
                     f"</td><td>{'yes' if r.get('altered') else 'no'}</td></tr>"
                     for r in b.base_defect_rows]
            body.append("</table>")
        if b.broken_rows and not (b.changes is not None and b.changes.base_failed):
            body.append("<p>Rows the change broke: " + "; ".join(
                f"{_e(reason)} ({len(ids)}): {_e(', '.join(ids))}"
                for reason, ids in b.broken_rows.items()) + "</p>")
    body += ["<h2>Kept count against the oracle's</h2>"]
    plot = svg.kept_against_oracle(b.rows)
    body.append(plot if plot else "<p>The rows carry no kept count beside an oracle count.</p>")
    body += ["<h2>Mass diagnostics</h2>"]
    masses = [p for p in (svg.mass_diagnostics(b.rows, s) for s in SIDES) if p]
    body += masses or ["<p>The rows carry no mass diagnostics.</p>"]
    body += ["<h2>Cases and proven kernel paths</h2>",
             "<table><tr><th>case</th><th>stock path</th><th>patched path</th><th>rows</th>"
             "<th>stopped</th></tr>"]
    per_case = Counter(r.case for r in b.rows)
    stopped_case = Counter(r.case for r in b.rows if r.stops)
    for c in b.cases:
        body.append(f"<tr><td>{_e(c.id)}</td><td>{_e(c.paths.get(STOCK) or 'unproven')}</td>"
                    f"<td>{_e(c.paths.get(PATCHED) or 'unproven')}</td>"
                    f'<td class="n">{per_case[c.id]}</td><td class="n">{stopped_case[c.id]}'
                    "</td></tr>")
    body.append("</table>")
    body += ["<h2>Rows</h2>",
             f"<p>Every row (at most {ROWS_LISTED} listed): the oracle's count, each side's "
             "kept count and mass diagnostics, and its stop reasons.</p>",
             "<table><tr><th>row</th><th>kind</th><th>oracle</th><th>stock kept</th>"
             "<th>patched kept</th><th>stock mass outside / dropped</th>"
             "<th>patched mass outside / dropped</th><th>stops</th></tr>"]
    for i, r in enumerate(b.rows[:ROWS_LISTED]):
        cls = ' class="v-stop"' if r.stops else ""
        body.append(
            f'<tr id="{teach.row_anchor(i)}"{cls}><td>{_e(r.label)}</td><td>{_e(r.kind)}</td>'
            f'<td class="n">{_num(r.oracle)}</td><td class="n">{_num(r.kept.get(STOCK))}</td>'
            f'<td class="n">{_num(r.kept.get(PATCHED))}</td>'
            f"<td>{_mass(r.mass_outside.get(STOCK))} / {_mass(r.mass_dropped.get(STOCK))}</td>"
            f"<td>{_mass(r.mass_outside.get(PATCHED))} / "
            f"{_mass(r.mass_dropped.get(PATCHED))}</td>"
            f"<td>{_e(', '.join(r.stops))}</td></tr>")
    body.append("</table>")
    if len(b.rows) > ROWS_LISTED:
        body.append(f"<p>{len(b.rows) - ROWS_LISTED} more rows are in the bundle's "
                    "<code>results/rows.json</code>.</p>")
    commit = source.get("commit", "not recorded") if isinstance(source, dict) else "?"
    clean = source.get("clean") if isinstance(source, dict) else None
    body += ["<h2>Provenance and signer</h2>", *_kv([
        ("signer key id", f"<code>{_e(b.signer)}</code>"),
        ("signed statement sha256", f"<code>{_e(b.payload_sha256)}</code>"),
        ("manifest sha256", f"<code>{_e(b.manifest_sha256)}</code>"),
        ("trusted core", f"{_e(b.harness.get('algorithm'))} sha256 "
         f"<code>{_e(b.harness.get('sha256'))}</code> "
         f"({'same as this build' if b.harness.get('matches') else 'differs from this build'})"),
        ("made from", f"commit <code>{_e(commit)}</code>"
         + ("" if clean is None else f" ({'clean' if clean else 'with local changes'})")),
        ("kernel library binding", _e(b.library_binding)),
        ("committed as", _e(b.archive or "a bundle folder"))])]
    return _page(f"{_headline(b)}: {b.verdict}", body, up="../")


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _mass(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


# --- one page per mutation run ---------------------------------------------------------------


def _criterion_said(run: bool, kills: bool) -> str:
    """One mutant's vLLM criterion cell: not run (a run without it), killed or survived."""
    return "not run" if not run else "killed" if kills else "survived"


def mutation_page(m: MutationRun | RefusedRun) -> str:
    if isinstance(m, RefusedRun):
        return _page(f"refused: {m.path}", [
            '<p id="verdict" class="v-refused">refused: this mutation run did not verify, so '
            "nothing it claims is shown.</p>",
            *_kv([("run", f"<code>{_e(m.path)}</code>"), ("error", f"<code>{_e(m.code)}</code>"),
                  ("reason", _e(m.reason))])], up="../")
    g, v = m.gate_kills, m.criterion_kills
    criterion = (f"vLLM's own test criterion (reimplemented) killed {v[0]} of {v[1]}"
                 if m.criterion_run else "vLLM's own test criterion was not run (a "
                 "sampler's draws are not kept counts)")
    body = [f'<p id="verdict">the gate killed <strong>{g[0]} of {g[1]}</strong> mutants; '
            f"{criterion}.</p>",
            *_kv([("run", f"<code>{_e(m.path)}</code>"), ("matrix", _e(m.matrix)),
                  ("rule set", f"<code>{_e(m.rules)}</code>"), ("backend", _e(m.backend)),
                  ("catalogue", _e(m.catalogue)),
                  ("base", f"{_e(m.base_verdict)} ({m.base_defects} base-defect rows)"),
                  ("signer key id", f"<code>{_e(m.signer)}</code>")]),
            "<h2>Mutants</h2>",
            "<table id=\"mutants\"><tr><th>mutant</th><th>target</th><th>verdict</th>"
            "<th>rows stopped</th><th>what a survivor changed</th><th>vLLM criterion</th>"
            "</tr>"]
    for mu in m.mutants:
        cls = "v-pass" if mu.killed else "v-stop"
        stopped = (f"{len(mu.stopped_rows)}: " + "<br>".join(
            _e(r) for r in mu.stopped_rows[:5])
            + (f"<br>and {len(mu.stopped_rows) - 5} more" if len(mu.stopped_rows) > 5
               else "")) if mu.stopped_rows else "0"
        if mu.killed:
            changed = "-"
        elif mu.changed is None:
            changed = "not comparable with the base's outputs"
        elif not mu.changed:
            changed = "nothing: its outputs equal the base's on every row"
        else:
            changed = (f"{len(mu.changed)} rows, none stopped: "
                       f"{_e(', '.join(mu.changed[:8]))}"
                       + (f" and {len(mu.changed) - 8} more" if len(mu.changed) > 8 else ""))
        body.append(f'<tr><td><a href="#{_e(_anchor(mu.id))}">{_e(mu.id)}</a></td>'
                    f"<td>{_e(_target(mu.diff, mu.kind))}</td><td class=\"{cls}\">"
                    f"{'killed' if mu.killed else 'survived'} ({_e(mu.verdict)}"
                    f"{': ' + _e(', '.join(mu.reasons)) if mu.reasons else ''})</td>"
                    f"<td>{stopped}</td><td>{changed}</td>"
                    f"<td>{_criterion_said(m.criterion_run, mu.criterion_kills)}</td></tr>")
    body.append("</table>")
    body.append("<p>Green: the gate stopped the mutant (killed); red: it survived.</p>")
    body.append("<h2>Each mutant's diff</h2>")
    for mu in m.mutants:
        body += [f'<h3 id="{_e(_anchor(mu.id))}">{_e(mu.id)}</h3>',
                 f"<pre>{_e(mu.diff)}</pre>"]
    return _page(f"mutation run {m.matrix}", body, up="../")


def _target(diff: str, kind: str) -> str:
    """What a mutant's diff changes: the file and the function its first hunk names (plain
    text: the caller escapes it), and the mutant's kind."""
    import re

    file = next((line[4:].removeprefix("b/") for line in diff.splitlines()
                 if line.startswith("+++ ")), "")
    hunk = re.search(r"^@@[^@]*@@ ?(.*)$", diff, re.MULTILINE)
    where = hunk.group(1).strip() if hunk else ""
    said = " ".join(x for x in (file.rsplit("/", 1)[-1], where) if x)
    return f"{said} ({kind})" if kind and said else said or kind or "-"


def _anchor(mutant: str) -> str:
    return "m-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in mutant)


# --- the whole site ---------------------------------------------------------------------------


def write_site(ev: Evidence, out: Path) -> list[Path]:
    """Write every page under ``out``; returns the files written."""
    written: list[Path] = []
    names: set[Path] = set()
    (out / "bundles").mkdir(parents=True, exist_ok=True)
    (out / "mutation").mkdir(parents=True, exist_ok=True)

    def put(rel: str, text: str) -> None:
        path = out / rel
        if path in names:  # a page name is one to one (model.page_name): never overwrite
            raise InternalError(f"two pieces of evidence share the page {printable(rel)}")
        names.add(path)
        path.write_text(text, "utf-8")
        written.append(path)

    put("index.html", index_page(ev))
    for b in ev.bundles:
        put(_bundle_href(b), refused_page(b) if isinstance(b, RefusedBundle) else bundle_page(b))
    for m in ev.mutations:
        put(_mutation_href(m), mutation_page(m))
    return written
