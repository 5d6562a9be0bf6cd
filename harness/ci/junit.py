"""``verify --junit OUT``: the verified rows as JUnit XML, the report format Buildkite's and
GitHub's test views read.

One ``testsuite`` per bundle (named by its manifest), one ``testcase`` per judged row:
``classname`` is the case and the dispatch path the patched side had to prove
(``forced-v64/split``), ``name`` the row (``forced-v64[0]``). A row that stopped is a
``failure`` whose ``type`` is its first stop reason and whose ``message`` lists them all; a
run-level stop (no row, such as ``run_timeout``) is a failing ``testcase`` named ``run``.
A row the base already fails (regression rule sets) passes or fails by the change's stops;
its base faults are written in its ``system-out``. Suite properties name the verdict, rule
set, report format, the statement's sha256 and the manifest's, and both sides as the verified
manifest pins them (``stock_version``, ``stock_pin_sha256``, ``stock_tree_sha256``,
``stock_kernel_sha256``, ``patched_patch_sha256``..., each side's recorded ``_isolation``),
the change's sha256, what the reviewer required (``required``), and where the receipt records
them, the reused base's bundle and the signing key's kind; what the change changed
(``rows_changed``: rows whose outputs differ from the base's, ``rows_changed_base_right``: of
those the rows the base got right, ``rows_broken``, and ``base_failed`` when the base did not
run; :mod:`harness.ci.changes`). A broken row's failure text names the oracle's, base's and
change's kept counts.

The layout is the one of the Jenkins xunit plugin's ``junit-10.xsd`` (vendored under
tests/assets/junit/, which the tests validate against). Every string from the evidence
passes through :func:`harness.core.terminal.printable` (no control character reaches the
XML) and ElementTree's escaping.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

from ..core.names import SIDES
from ..core.terminal import printable
from ..core.verify_sides import (
    describe_isolation,
    describe_required,
    describe_reused,
    describe_signing,
)

if TYPE_CHECKING:
    from .verified_rows import VerifiedBundle


def _text(value: object) -> str:
    return printable(str(value))


def _row_detail(row: dict[str, Any]) -> str:
    oracle = row.get("oracle", {})
    count = oracle.get("count") if oracle.get("status") == "certified" else oracle.get("status")
    sides = "; ".join(f"{side}: {row.get(side, {}).get('status', 'missing')}, kept "
                      f"{row.get(side, {}).get('kept', '-')}" for side in SIDES)
    return f"stops: {', '.join(row.get('stops', []))}; oracle keeps {count}; {sides}"


_SIDE_KEYS = ("pin", "pin_sha256", "wheel", "wheel_sha256", "tree_sha256", "kernel_sha256",
              "patch_sha256")


def side_properties(bundle: VerifiedBundle) -> list[tuple[str, str]]:
    """(name, value) of both sides, the change, and what was recorded and required; only
    those the bundle has (every value escaped where it is written)."""
    result = bundle.result
    environment = result.recorded
    found: list[tuple[str, str]] = []
    for side in SIDES:
        facts = result.sides.get(side)
        if facts is None:
            continue
        found.append((f"{side}_role", str(facts["role"])))
        found.append((f"{side}_version", f"{facts['package']}=={facts['version']}"))
        found += [(f"{side}_{key}", str(facts[key])) for key in _SIDE_KEYS
                  if facts.get(key) is not None]
        found.append((f"{side}_isolation", describe_isolation(
            environment.get("isolation", {}).get(side, {}),
            bool(environment.get("isolation_recorded")))))
    if result.change:
        found.append(("change_sha256", str(result.change["sha256"])))
    reused = describe_reused(environment.get("base_reused_from"))
    if reused is not None:
        found.append(("base_reused_from", reused))
    signing = describe_signing(environment.get("signing"))
    if signing is not None:
        found.append(("signing_key", signing))
    if result.required:
        found.append(("required", describe_required(result.required)))
    return found


def document(bundle: VerifiedBundle) -> bytes:
    """The JUnit XML file's bytes (UTF-8, with its declaration)."""
    result = bundle.result
    verdict = result.verdict
    name = _text(bundle.manifest.data.get("name", result.path))
    rows = bundle.rows
    attributed = {str(s) for row in rows for s in row.get("stops", [])}
    run_level = [str(r) for r in verdict.get("reasons", []) if str(r) not in attributed]
    failures = sum(bool(row.get("stops")) for row in rows) + bool(run_level)
    tests = len(rows) + bool(run_level)
    seconds = f"{sum(result.seconds.values()):.3f}"

    root = ET.Element("testsuites", {"name": "topp-gate verify", "tests": str(tests),
                                     "failures": str(failures), "errors": "0",
                                     "time": seconds})
    suite = ET.SubElement(root, "testsuite", {
        "name": name, "tests": str(tests), "failures": str(failures), "errors": "0",
        "skipped": "0", "time": seconds})
    properties = ET.SubElement(suite, "properties")
    for key, value in (("verdict", verdict["verdict"]), ("rules", result.rules),
                       ("report_format", result.report_format),
                       ("reasons", ", ".join(verdict.get("reasons", [])) or "none"),
                       ("statement_sha256", result.payload_sha256),
                       ("manifest_sha256", result.manifest_sha256),
                       ("signer_keyid", result.keyid), *side_properties(bundle),
                       *(bundle.changes.properties() if bundle.changes else ())):
        ET.SubElement(properties, "property", {"name": key, "value": _text(value)})
    for row in rows:
        case = _text(row.get("case"))
        path = _text(bundle.manifest.dispatch(SIDES[1], str(row.get("case"))))
        case_el = ET.SubElement(suite, "testcase", {
            "classname": f"{case}/{path}", "name": f"{case}[{_text(row.get('row'))}]"})
        stops = [_text(s) for s in row.get("stops", [])]
        if stops:
            failure = ET.SubElement(case_el, "failure", {"type": stops[0],
                                                         "message": ", ".join(stops)})
            failure.text = _text(_row_detail(row))
        base_faults = row.get("diagnostics", {}).get("stock_faults")
        if base_faults:
            out = ET.SubElement(case_el, "system-out")
            out.text = "base defect (the base already fails this row): " + ", ".join(
                _text(f) for f in base_faults)
    if run_level:
        case_el = ET.SubElement(suite, "testcase", {"classname": name, "name": "run"})
        failure = ET.SubElement(case_el, "failure", {"type": run_level[0],
                                                     "message": ", ".join(run_level)})
        failure.text = "run-level condition: " + ", ".join(run_level)
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True)) + b"\n"
