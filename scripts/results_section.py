#!/usr/bin/env python3
"""Generate docs/results.md's "Results" section from the committed evidence bundles.

    .venv/bin/python scripts/results_section.py                  # print the section
    .venv/bin/python scripts/results_section.py --check docs/results.md  # exit 1 if it differs
    .venv/bin/python scripts/results_section.py --write docs/results.md  # replace it in place

Reads every bundle under ``evidence/bundles/*/`` (``--bundles DIR`` to change) as the
evidence model of each (:func:`harness.present.model.verified_model`): verified in this
process first with the signer's public key (``--pubkey``, default
``evidence/keys/topp-gate-evidence.pub``), the trusted core checking the signature, schema,
digests and bindings and rerunning the oracle and gate; every artifact read afterwards is
checked against both receipt digests. A bundle that does not verify stops the script
(exit 2). The section is rendered by :mod:`harness.present.results`.

Each bundle's section also carries the exact-real counts ``topp-gate exact`` derives from
the same bytes (the model's ``exact``; needs the ``exact`` extra, python-flint): the stopped
rows with the exact-real column and one summary line for all rows. They are derived, not
read from a receipt.

When ``benchmarks/cuda_vs_interpreter.json`` exists (``--comparison FILE`` to change), the
per-row CUDA-versus-interpreter results ``benchmarks/cuda_vs_interpreter.py --json`` wrote
are summarized too (:func:`harness.present.results.load_comparison`).

docs/results.md holds the section between ``<!-- results:begin -->`` and
``<!-- results:end -->``; nothing between the markers is typed by hand.

Exit codes: 0 ok (or the file up to date), 1 the file's section differs (``--check``),
2 bad input (no bundle, missing markers, unreadable or inconsistent bundle).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.core.errors import HarnessError  # noqa: E402
from harness.core.keys import load_public_key  # noqa: E402
from harness.core.terminal import printable  # noqa: E402
from harness.present import sections  # noqa: E402
from harness.present.results import generate  # noqa: E402

BEGIN = sections.RESULTS.begin
END = sections.RESULTS.end
DEFAULT_BUNDLES = Path("evidence/bundles")
DEFAULT_PUBKEY = Path("evidence/keys/topp-gate-evidence.pub")
DEFAULT_COMPARISON = Path("benchmarks/cuda_vs_interpreter.json")
__all__ = ["BEGIN", "END", "generate", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=Path, default=None,
                        help="folder of bundles (default: evidence/bundles in the repository)")
    parser.add_argument("--pubkey", type=Path, default=None,
                        help="the bundles' signer's public key (default: "
                        "evidence/keys/topp-gate-evidence.pub in the repository)")
    parser.add_argument("--comparison", type=Path, default=None,
                        help="CUDA-versus-interpreter comparison file, used when it exists "
                        "(default: benchmarks/cuda_vs_interpreter.json in the repository)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", type=Path, metavar="FILE",
                      help="exit 1 when FILE's results section differs from the generated one")
    mode.add_argument("--write", type=Path, metavar="FILE",
                      help="replace FILE's results section with the generated one")
    args = parser.parse_args(argv)
    bundles = args.bundles if args.bundles is not None else ROOT / DEFAULT_BUNDLES
    display = DEFAULT_BUNDLES if args.bundles is None else args.bundles
    comparison = args.comparison if args.comparison is not None else ROOT / DEFAULT_COMPARISON
    comparison_display = DEFAULT_COMPARISON if args.comparison is None else args.comparison
    try:
        public_key = load_public_key(args.pubkey if args.pubkey is not None
                                     else ROOT / DEFAULT_PUBKEY)
        section = generate(bundles, display, public_key=public_key, comparison=comparison,
                           comparison_display=comparison_display)
        return sections.run_mode(sections.RESULTS, section, check_path=args.check,
                                 write_path=args.write)
    except (HarnessError, OSError) as err:
        print(f"results_section: {printable(str(err))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
