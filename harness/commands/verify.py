"""``topp-gate verify DIR [--pubkey PUB] [--strict] [--frozen-manifest PATH] [--require-rules
ID] [--require-library-binding] [--require-base SPEC] [--require-change SPEC] [--require-patch
DIFF] [--require-isolation] [--json] [--junit OUT] [--vsa OUT --vsa-key KEY [--vsa-verifier-id
URI]] [--regenerate] [--workers N]``: offline check."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import EXIT_OK, EXIT_STOP
from ..core.terminal import printable
from . import flags
from .row_progress import RowProgress
from .signer import add_pubkey_argument, signer_key

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ..ci.verified_rows import VerifiedBundle
    from ..core.verify import Verified
    from ..core.verify_sides import Requirements


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "verify",
        help="verify a bundle offline: signature, schema, digests, oracle and gate rerun",
        description="Verify bundle DIR on this machine, with no GPU and no network: the "
        "Ed25519 DSSE signature with PUB, the payload type, the receipt schema, every "
        "artifact's sha256, the manifest and case matrix, then rerun the binary64 oracle "
        "and the gate from the captured bytes and require identical per-row results and "
        "verdict. Exit 0 only for a verified PASS, 1 for a verified STOP (so 'verify && "
        "ship' never ships a STOP), 4 when verification fails, 2 on bad usage (including "
        "an unreadable --pubkey or --frozen-manifest).",
    )
    parser.add_argument("bundle", type=Path, metavar="DIR")
    add_pubkey_argument(parser)
    parser.add_argument("--strict", action="store_true",
                        help="also fail when the trusted core that judged the bundle (the "
                        "harness digest its receipt records) differs from this verifier's "
                        "harness/core/ (VERIFYING.md: check out the commit the bundle names)")
    parser.add_argument("--frozen-manifest", type=Path, metavar="PATH",
                        help="the committed manifest (frozen by its .sha256 sibling) or the "
                        ".sha256 file itself; the bundle's manifest must hash to it")
    parser.add_argument("--require-rules", action="append", metavar="ID",
                        dest="require_rules",
                        help="refuse (exit 4) a bundle judged by a rule set other than ID; "
                        "repeat to accept several (an unknown ID is usage, exit 2)")
    parser.add_argument("--require-library-binding", action="store_true",
                        help="refuse (exit 4) a bundle whose run-time built kernel library "
                        "(FlashInfer's JIT) its evidence does not bind to the pinned sources "
                        "(evidence older than the binding verifies as 'unbound (legacy "
                        "evidence)' without this flag)")
    sides = parser.add_argument_group(
        "what the two sides must be (a pull request's reviewer: the base is the stock side, "
        "the change the patched side; each checked against the signed manifest before the "
        "rerun, a mismatch refused with exit 4)")
    sides.add_argument("--require-base", action="append", metavar="SPEC", dest="require_base",
                       help="refuse a bundle whose base is not SPEC: a pin file (its bytes' "
                       "sha256 against the pin sha256 the manifest froze), that sha256 itself "
                       "(64 hex digits; a version 1 manifest's inline wheel sha256), or "
                       "NAME==VERSION such as vllm==0.33.0 (the base side's release); "
                       "repeat to require each (a release and a pin)")
    sides.add_argument("--require-change", action="append", metavar="SPEC",
                       dest="require_change",
                       help="the same for the change (patched) side, when the change is "
                       "another release or pin")
    sides.add_argument("--require-patch", metavar="DIFF", dest="require_patch",
                       help="refuse a bundle whose change is not the diff DIFF: its bytes' "
                       "sha256 against the patch the manifest froze for the patched side "
                       "('pr --patch' freezes change.diff; a version 1 manifest's "
                       "patch_sha256), or that sha256 itself")
    sides.add_argument("--require-isolation", action="store_true",
                       help="refuse a bundle whose receipt does not record both sides as run "
                       "in a sandbox (bundles older than the record say 'not recorded')")
    flags.workers(parser, "the oracle rerun")
    flags.json_output(parser, "print one JSON object on stdout instead of the text lines: the "
                        "verified verdict, rows stopped by reason, the rule set and report "
                        "format, the receipt's provenance, what the change changed "
                        "('changes': rows whose outputs differ from the base's, how many of "
                        "them the base got right, each broken row with the oracle's, base's "
                        "and change's kept counts, the base's failure if it did not run, "
                        "the report); on failure {\"verified\": false, "
                        "\"code\": ..., \"detail\": ...} (exit codes unchanged)")
    ci = parser.add_argument_group(
        "verdicts for CI systems (written only when verification reaches a verdict: a "
        "refused bundle writes none; docs/ci.md)")
    ci.add_argument("--vsa", type=Path, metavar="OUT",
                    help="write a SLSA Verification Summary Attestation (in-toto Statement "
                    "v1, predicate https://slsa.dev/verification_summary/v1) in a DSSE "
                    "envelope signed with --vsa-key: PASSED for a verified PASS, FAILED for "
                    "a verified STOP")
    ci.add_argument("--vsa-key", type=Path, metavar="KEY",
                    help="the Ed25519 private key (PEM, mode 0600, as 'topp-gate keygen' "
                    "writes it) that signs the VSA")
    ci.add_argument("--vsa-verifier-id", default=None, metavar="URI",
                    help="the VSA's verifier.id: who verified, e.g. your CI's URI (default: "
                    "urn:topp-gate:verify)")
    ci.add_argument("--junit", type=Path, metavar="OUT",
                    help="write JUnit XML: one test case per row (classname case/path, name "
                    "the row), stopped rows as failures with their reasons, the verdict and "
                    "rule set as suite properties")
    parser.add_argument("--regenerate", action="store_true",
                        help="also rebuild every captured input from the bundle's manifest "
                        "(CPU torch generator; needs the gpu extra) and require the same bytes")
    parser.set_defaults(handler=run)


def _require_bundle_folder(bundle: Path) -> None:
    """A missing path or a file is the caller's mistake (exit 2), not a tampered bundle (4);
    a link or other non-folder is left to the verifier, which refuses it as evidence."""
    from ..core.errors import UsageError

    if not os.path.lexists(bundle):
        raise UsageError(f"no bundle at {printable(bundle)}: give the bundle's folder")
    if not bundle.is_symlink() and not bundle.is_dir():
        raise UsageError(f"{printable(bundle)} is not a folder: give the bundle's folder "
                         "(the one holding receipt.dsse.json)")


def _verify_with_signer_keys(args: argparse.Namespace, progress: RowProgress
                             ) -> tuple[Verified, Ed25519PublicKey]:
    """``--pubkey``, else each built-in project key in turn (the one the envelope names
    first): a bundle is accepted only under a key trusted anyway, and a failure names
    every key tried. Returns what was verified and the key it verified under."""
    from ..core.errors import SignatureError
    from ..core.keys import keyid, project_public_keys
    from ..core.verify import verify_bundle

    def attempt(public_key: Ed25519PublicKey) -> tuple[Verified, Ed25519PublicKey]:
        return verify_bundle(args.bundle, public_key, strict=args.strict,
                             frozen_manifest=args.frozen_manifest, workers=args.workers,
                             progress=progress.advance,
                             require_rules=getattr(args, "require_rules", None),
                             require_library_binding=getattr(args, "require_library_binding",
                                                             False),
                             require=getattr(args, "requirements", None)), public_key

    if args.pubkey is not None:
        return attempt(signer_key(args.pubkey, args.bundle))
    first = signer_key(None, args.bundle)
    keys = [first, *(k for k in project_public_keys().values() if keyid(k) != keyid(first))]
    for public_key in keys:
        try:
            return attempt(public_key)
        except SignatureError as err:
            if "no signature verifies" not in str(err):
                raise
    tried = ", ".join(keyid(k) for k in keys)
    raise SignatureError(f"no signature verifies with the built-in topp-gate project keys "
                         f"(key ids tried: {tried}); pass the signer's key with --pubkey PUB")


def run(args: argparse.Namespace) -> int:
    from ..core.errors import HarnessError, UsageError

    try:
        return _run(args)
    except HarnessError as err:
        if not isinstance(err, UsageError) and (args.vsa or args.junit):
            written = " and ".join(f"--{flag}" for flag in ("vsa", "junit")
                                   if getattr(args, flag))
            print(f"topp-gate: no {written} file written: the bundle reached no verdict",
                  file=sys.stderr)
        if args.json:
            print(json.dumps({"schema": "topp-gate/verify-result/v1", "verified": False,
                              "code": err.code, "exit_code": err.exit_code,
                              "detail": err.detail}, sort_keys=True))
        raise


def _run(args: argparse.Namespace) -> int:
    from ..core.errors import UsageError

    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.regenerate:
        from . import require_gpu_extra

        require_gpu_extra("verify --regenerate")
    _require_bundle_folder(args.bundle)
    vsa_key = _ci_outputs_ready(args)  # usage mistakes before minutes of rerun
    args.requirements = _requirements(args)
    progress = RowProgress("verifying: oracle and gate rerun")
    result, public_key = _verify_with_signer_keys(args, progress)
    progress.finish()
    verified = None
    if args.vsa or args.junit or args.json:
        from ..ci.verified_rows import read_verified

        verified = read_verified(args.bundle, public_key, result)
    if verified is not None and (args.vsa or args.junit):
        _write_ci_outputs(args, verified, vsa_key)
    regenerated = _regenerate(args.bundle, public_key, result) if args.regenerate else None
    if args.json:
        changes = verified.changes if verified is not None else None
        print(json.dumps({**result.to_json(), **_regression_json(result.verdict),
                          "changes": changes.to_json() if changes is not None else None,
                          "regenerated_inputs": regenerated}, sort_keys=True))
    else:
        _print_text(result, regenerated)
    return EXIT_OK if result.verdict["verdict"] == "PASS" else EXIT_STOP


def _requirements(args: argparse.Namespace) -> Requirements | None:
    """What the reviewer requires of the two sides, the files it names read now (a file
    that cannot be read is usage, exit 2, before the bundle is); None when nothing is."""
    from ..core.verify_sides import Requirements, parse_side_spec, patch_requirement

    def specs(name: str) -> list[str]:
        value = getattr(args, name, None)
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    patch = getattr(args, "require_patch", None)
    required = Requirements(
        base=tuple(parse_side_spec(s, "--require-base") for s in specs("require_base")),
        change=tuple(parse_side_spec(s, "--require-change") for s in specs("require_change")),
        patch=patch_requirement(patch) if isinstance(patch, str) else None,
        isolation=bool(getattr(args, "require_isolation", False)))
    return required if required.any() else None


def _ci_outputs_ready(args: argparse.Namespace) -> Any:
    """Refuse (exit 2) a --vsa without --vsa-key or the reverse, an output folder that does
    not exist; load the VSA key now. Returns the key, or None without --vsa."""
    from ..core.errors import UsageError

    if (args.vsa is None) != (args.vsa_key is None):
        raise UsageError("--vsa OUT and --vsa-key KEY go together")
    if args.vsa_verifier_id is not None and args.vsa is None:
        raise UsageError("--vsa-verifier-id needs --vsa OUT")
    for flag in ("vsa", "junit"):
        out = getattr(args, flag)
        if out is not None and not (out.parent if str(out.parent) else Path(".")).is_dir():
            raise UsageError(f"--{flag} {printable(out)}: its folder does not exist")
        if out is not None and out.is_dir():
            raise UsageError(f"--{flag} {printable(out)} is a folder: give a file name")
    if args.vsa is None:
        return None
    from ..capture.signing import load_private_key

    return load_private_key(args.vsa_key, owner_only=True)


def _write_ci_outputs(args: argparse.Namespace, bundle: VerifiedBundle,
                      vsa_key: Any) -> None:
    """The JUnit XML and the signed VSA of the verdict just verified (harness.ci)."""
    from ..ci import junit, vsa

    if args.junit is not None:
        vsa.write_output(args.junit, junit.document(bundle))
        print(f"topp-gate: JUnit XML written to {printable(args.junit)}", file=sys.stderr)
    if args.vsa is not None:
        statement = vsa.statement(bundle, verifier_id=args.vsa_verifier_id
                                  or vsa.DEFAULT_VERIFIER_ID)
        vsa.write_output(args.vsa, vsa.signed_envelope(statement, vsa_key))
        print(f"topp-gate: VSA ({statement['predicate']['verificationResult']}) written to "
              f"{printable(args.vsa)}", file=sys.stderr)


def _regenerate(path: Path, public_key: Any, result: Any) -> int:
    """Rebuild the inputs from the very statement just verified (same payload digest)."""
    from ..capture.regenerate import regenerate_inputs
    from ..core.errors import BindingMismatchError
    from ..core.verify import open_bundle

    view = open_bundle(path, public_key)
    if view.payload_sha256 != result.payload_sha256:
        raise BindingMismatchError("bundle read again for --regenerate",
                                   result.payload_sha256, view.payload_sha256)
    print("regenerating the captured inputs from the manifest (CPU torch)", file=sys.stderr)
    return regenerate_inputs(view)


def _print_text(result: Any, regenerated: int | None) -> None:
    from ..core.verify import describe_source
    from ..core.verify_sides import describe_required, side_lines

    v = result.verdict
    reasons = ", ".join(v["reasons"]) if v["reasons"] else "none"
    print(f"verified bundle {printable(result.path)}")
    print(f"  signature: Ed25519 DSSE, key id {result.keyid}")
    print(f"  artifacts: {result.artifacts}, every sha256 matches the signed receipt")
    frozen = ("matches the frozen hash given" if result.frozen_manifest else
              "matches the receipt (no --frozen-manifest given)")
    print(f"  manifest: sha256 {result.manifest_sha256}, {frozen}")
    if result.harness_matches:
        print(f"  harness code: {result.harness_algorithm} sha256 {result.harness_local}, "
              "same as this verifier")
    else:
        print(f"  harness code: DIFFERS ({result.harness_algorithm}): bundle "
              f"{result.harness_recorded}, this verifier {result.harness_local} "
              "(--strict makes this fatal)")
    print(f"  made from: {printable(describe_source(result.harness_source))}")
    processes = "1 process" if result.workers == 1 else f"{result.workers} processes"
    print(f"  rerun: {result.rows} rows of {result.cases} cases judged again on CPU "
          f"({processes}), identical to the receipt")
    print(f"  judged by: rule set {result.rules}, report format {result.report_format}")
    if result.library_binding != "not applicable":
        print(f"  kernel library: {result.library_binding}"
              + ("" if result.library_binding == "bound" else
                 " (nothing binds the loaded library to the pinned sources; "
                 "--require-library-binding refuses this)"))
    if result.sampling is not None:
        drawn = result.sampling
        print(f"  draws: {drawn['draws_per_row']} a row for each output reading it, seed "
              f"{drawn['seed']}, offset {drawn['offset']}, as the manifest declares; both "
              "sides' evidence records them on every case that draws")
    for line in side_lines(result.sides, result.change, result.recorded):
        print(line)
    if result.required:
        print(f"  required and found: {describe_required(result.required)}")
    if regenerated is not None:
        print(f"  inputs: {regenerated} files rebuilt from the manifest, byte for byte the "
              "captured ones")
    print(f"  verdict: {v['verdict']} ({v['rows_stopped']} of {v['rows']} rows stopped; "
          f"reasons: {reasons})")
    for line in _regression_lines(v):
        print(line)


# The verdict fields a regression rule set adds (regression/v1: base_defects; regression/v2:
# the base-defect rows, how many the change altered, the rows it broke by reason).
_REGRESSION_KEYS = ("base_defects", "base_defect_rows", "base_defects_altered", "broken_rows")


def _regression_json(verdict: dict[str, Any]) -> dict[str, Any]:
    """The re-judged verdict's regression fields for ``verify --json`` (absent keys stay
    absent: a bundle judged by other rules has none)."""
    return {key: verdict[key] for key in _REGRESSION_KEYS if key in verdict}


_UNTOUCHED_SHOWN = 10  # base-defect rows the change did not alter, listed in the text


def _regression_lines(verdict: dict[str, Any]) -> list[str]:
    """The text lines for a regression rule set's verdict; none for other rule sets."""
    defects = verdict.get("base_defects")
    if not isinstance(defects, dict):
        return []
    reasons = ", ".join(f"{name} x{n}" for name, n in defects["reasons"].items()) or "none"
    lines = [f"  base defects: {defects['rows']} of {verdict['rows']} rows the base already "
             f"fails (reasons: {reasons})"]
    rows = verdict.get("base_defect_rows")
    if isinstance(rows, list):
        if rows:
            lines[0] += f"; the change altered {verdict['base_defects_altered']} of them"
        # every row the change altered; of those it left as they were, the first few only
        altered = [r for r in rows if r["altered"]]
        untouched = [r for r in rows if not r["altered"]]
        shown = altered + untouched[:_UNTOUCHED_SHOWN]
        lines += [f"    {printable(r['row'])}: {', '.join(r['faults'])}"
                  f"{' (altered)' if r['altered'] else ''}"
                  for r in sorted(shown, key=rows.index)]
        if len(untouched) > _UNTOUCHED_SHOWN:
            lines.append(f"    ... and {len(untouched) - _UNTOUCHED_SHOWN} more base-defect rows "
                         "the change left as they were (--json and report.md list every one)")
    broken = verdict.get("broken_rows")
    if isinstance(broken, dict):
        lines.append(f"  rows the change broke: {'by reason' if broken else 'none'}")
        lines += [f"    {reason} ({len(ids)}): {', '.join(printable(i) for i in ids)}"
                  for reason, ids in broken.items()]
    return lines
