#!/usr/bin/env python3
"""Kept-value integrity over committed bundles (issue 27 item 2): per bundle, per side, the
largest count on one row of kept positions whose output bits differ from the input's.

    scripts/kept_values_scan.py                 every committed bundle (evidence/)
    scripts/kept_values_scan.py DIR --pubkey K  one bundle, or a mutation folder / .tar.xz

Each bundle is opened with the key that signed it (``open_bundle``: signature and digests
checked, its verdict not rerun), then each case's captured inputs and every side whose
status is "ok" are decoded and compared row by row with the numpy path of
:func:`harness.core.integrity.changed_values` (a NaN output counts as changed). Prints one
tab-separated line per bundle: path, rule set, stock max, patched max, rows with a change;
exit 1 when any bundle has a changed kept value, else 0. The evidence for making kept-value
integrity a binding of every bundle (``verify`` refuses a changed value whatever rule set).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _bundles() -> Iterator[tuple[Path, Path]]:
    """Every committed bundle with the key that signed it: evidence/verdicts.tsv's table, then
    every mutation run (folders and archives) with its own signer.pub."""
    for line in (REPO / "evidence/verdicts.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            path, pub, _ = line.split("\t")
            yield REPO / path, REPO / pub


def scan_bundle(path: Path, key: object) -> tuple[str, dict[str, int], list[str]]:
    import numpy as np

    from harness.core.bundle import output_name
    from harness.core.integrity import NEG_INF_BITS
    from harness.core.verify import open_bundle

    view = open_bundle(path, key)  # type: ignore[arg-type]
    predicate = view.statement["predicate"]
    rules = predicate.get("judgement", {}).get("rules", "seed/v1 (legacy)")
    layout = json.loads(view.raw("cases.json"))["cases"]
    worst = {"stock": 0, "patched": 0}
    changed_rows: list[str] = []
    for case, entry in zip(layout, predicate["cases"], strict=True):
        inputs = np.frombuffer(view.raw(case["logits"]), dtype="<u4").reshape(case["batch"], -1)
        for side in worst:
            if entry[side] != "ok":
                continue
            out = np.frombuffer(view.raw(output_name(side, case["id"])),
                                dtype="<u4").reshape(inputs.shape)
            counts = np.count_nonzero((out != inputs) & (out != NEG_INF_BITS), axis=1)
            worst[side] = max(worst[side], int(counts.max(initial=0)))
            changed_rows += [f"{side} {case['id']}[{i}]={int(c)}"
                             for i, c in enumerate(counts) if c]
        view._artifacts._raw.clear()  # one case at a time
    return rules, worst, changed_rows


def _report(name: str, path: Path, key_path: Path) -> bool:
    from harness.core.keys import load_public_key

    rules, worst, rows = scan_bundle(path, load_public_key(key_path))
    print(f"{name}\t{rules}\tstock={worst['stock']}\tpatched={worst['patched']}\t"
          f"{len(rows)} rows changed" + (f" ({', '.join(rows[:6])})" if rows else ""),
          flush=True)
    return bool(rows)


def _mutation(folder: Path) -> bool:
    from harness.mutation.mutate import mutation_folder

    bad = False
    with mutation_folder(folder) as opened:
        key = opened / "signer.pub"
        for bundle in sorted((opened / "bundles").iterdir()):
            bad |= _report(f"{folder.relative_to(REPO)}:{bundle.name}", bundle, key)
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path)
    parser.add_argument("--pubkey", type=Path)
    args = parser.parse_args(argv)
    bad = False
    if args.path is not None:
        path = args.path.resolve()
        if (path / "mutation.json").is_file() or path.name.endswith(".tar.xz"):
            return int(_mutation(path))
        if args.pubkey is None:
            parser.error("a bundle needs --pubkey")
        return int(_report(str(args.path), path, args.pubkey))
    for path, key in _bundles():
        bad |= _report(str(path.relative_to(REPO)), path, key)
    for folder in sorted((REPO / "evidence/mutation").iterdir()):
        if folder.is_dir() or folder.name.endswith(".tar.xz"):
            bad |= _mutation(folder)
    return int(bad)


if __name__ == "__main__":
    sys.exit(main())
