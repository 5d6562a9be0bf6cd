#!/usr/bin/env python3
"""Write the two diffs a device 'pr' script gates (scripts/device_pr.sh,
scripts/device_pr_flashinfer.sh): WORK/harmless.diff adds a comment line after the pinned
file's first line, WORK/harmful.diff replaces OLD by NEW, which must occur exactly once.

    python3 scripts/make_pr_diffs.py PINNED_FILE WORK PATH OLD NEW

PATH is the file's path inside the pinned tree (the diff's a/ and b/ name).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str]) -> int:
    from harness.pins.sources import kernel_diff

    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    pinned, work, path = Path(argv[0]), Path(argv[1]), argv[2]
    old, new = argv[3].encode(), argv[4].encode()
    src = pinned.read_bytes()
    if src.count(old) != 1:
        print(f"make_pr_diffs: the harmful line is in {path} {src.count(old)} times, not once",
              file=sys.stderr)
        return 1
    harmless = src.replace(b"\n", b"\n# reviewed: no functional change\n", 1)
    (work / "harmless.diff").write_bytes(kernel_diff(src, harmless, path))
    (work / "harmful.diff").write_bytes(kernel_diff(src, src.replace(old, new), path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
