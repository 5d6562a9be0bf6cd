"""Both sides of a verified bundle, as a reviewer must see them, and what a reviewer requires
of them (issue 35): a bundle that verifies says only that its verdict follows from its bytes;
which base and which change those bytes compared is what a pull request's reviewer checks.

:func:`side_facts` reads each side's version, pin, tree, kernel and patch from the manifest
the signed receipt binds (its sha256 is checked against the receipt before this runs, and
:func:`.verify_bindings.check_pins` has checked the receipt's per-side hashes against it);
a tree digest the manifest does not pin is the receipt's, and said to be. :func:`recorded`
reads what the signed receipt records of how the run was made (each side's isolation, the
kind of key that signed it, the bundle a reused base came from): signed, but a claim of the
signer that nothing here can check, and labelled so.

:class:`Requirements` is what ``verify --require-base / --require-change / --require-patch /
--require-isolation`` ask; :func:`parse_side_spec` and :func:`patch_requirement` read the
reviewer's files (regular files only, bounded: :mod:`.safeio`) before any bundle is read;
:func:`check_requirements` refuses (exit 4, one line naming what was required and what the
bundle holds) a bundle that does not meet them, before its rows are rerun.

Standard library only (trusted core).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .digest import sha256_hex
from .errors import BindingMismatchError, UsageError
from .names import PATCHED, SIDES, STOCK
from .safeio import read_regular_file
from .terminal import printable

ROLES = {STOCK: "base", PATCHED: "change"}  # what each side is in a pull request's gate
MAX_PIN_BYTES = 16 << 20  # as the manifest's pin-file lookup bounds a pin file
MAX_PATCH_BYTES = 16 << 20  # as ``run`` and ``pr`` bound a patch: a diff of one kernel file
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_VERSION_SPEC = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s=]+)")
NOT_RECORDED = "not recorded"


def package_name(family: str) -> str:
    """The distribution a kernel family's versions are versions of: the family id's first
    word (``vllm-triton`` and ``vllm-pytorch``: ``vllm``; ``flashinfer``: itself), in the
    normal form of PEP 503."""
    return _normal(family.split("-", 1)[0])


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# --- what the verified manifest and receipt say of each side ---------------------------------


def side_facts(manifest: Any, predicate: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per side, JSON-ready: ``role`` (base, change), ``family``, ``package``, ``version``,
    ``pinned_by`` (``pin-file`` or ``inline``), ``pin`` and ``pin_sha256`` (version 2 and
    later), ``wheel`` and ``wheel_sha256`` (version 1: the wheel pinned inline),
    ``tree_sha256`` and ``tree_pinned`` (whether the manifest pins that digest; if not, it is
    the receipt's, as the signer recorded it), ``pinned_tree_sha256`` (the tree the pin fixes,
    before a patch), ``kernel_sha256``, ``patch_sha256`` (a frozen patch of that side)."""
    facts: dict[str, dict[str, Any]] = {}
    sources = predicate["hashes"]["sources"]
    for side in SIDES:
        entry = manifest.data["sources"]["sides"][side]
        model = manifest.sides[side]
        receipt_entry = sources.get(side) if isinstance(sources.get(side), dict) else {}
        patch = model.patch
        pinned_tree = _text(entry.get("tree_sha256"))
        receipt_tree = _text(receipt_entry.get("tree_sha256"))
        tree_pinned = patch is None and pinned_tree is not None
        facts[side] = {
            "role": ROLES[side],
            "family": model.family,
            "package": package_name(model.family),
            "version": str(entry["version"]),
            "pinned_by": "inline" if model.pin is None else "pin-file",
            "pin": model.pin,
            "pin_sha256": _text(entry.get("pin_sha256")),
            "wheel": _text(entry.get("wheel")),
            "wheel_sha256": _text(entry.get("wheel_sha256")),
            "tree_sha256": pinned_tree if tree_pinned else receipt_tree,
            "tree_pinned": tree_pinned,
            "pinned_tree_sha256": pinned_tree,
            "kernel_sha256": model.receipt_pins["kernel_sha256"],
            "patch_sha256": str(patch["sha256"]) if patch is not None else None,
        }
    return facts


def change_facts(manifest: Any, predicate: Mapping[str, Any]) -> dict[str, Any]:
    """The change under test as the receipt's ``hashes.patch`` names it: ``sha256``, and
    ``what`` it is the sha256 of; ``frozen`` whether the manifest pins it (it is then the
    manifest's pin: :func:`.verify_bindings.check_pins`)."""
    sha = str(predicate["hashes"]["patch"])
    if manifest.patch_sha256 is not None:
        return {"sha256": sha, "frozen": True,
                "what": "the kernel diff between the two sides, frozen by the manifest"}
    for side in SIDES:
        patch = manifest.side_patch(side)
        if patch is not None and patch["sha256"] == sha:
            return {"sha256": sha, "frozen": True, "patch_of": side,
                    "what": f"the {side} side's patch, frozen by the manifest"}
    return {"sha256": sha, "frozen": False,
            "what": "the kernel diff between the two sides, as the signer computed it"}


def frozen_change_patch(manifest: Any) -> str | None:
    """The sha256 of the change's frozen diff: the patched side's frozen patch (version 2
    and later; ``pr --patch`` freezes ``change.diff`` there), or version 1's ``patch_sha256``
    (the kernel diff between the two wheels); None when the manifest freezes none."""
    if manifest.patch_sha256 is not None:
        return str(manifest.patch_sha256)
    patch = manifest.side_patch(PATCHED)
    return str(patch["sha256"]) if patch is not None else None


def _isolated(record: Any) -> bool:
    sandbox = record.get("sandbox") if isinstance(record, dict) else None
    return isinstance(sandbox, str) and sandbox != "" and sandbox != "none"


def recorded(predicate: Mapping[str, Any]) -> dict[str, Any]:
    """What the signed receipt's ``environment`` records and nothing checks: per side the
    isolation record (``isolation``: ``{"record": REC or None, "isolated": bool}``; a side
    is isolated only if its record names a sandbox other than ``none``), the signing key's
    kind (``signing``) and the bundle a reused base side came from (``base_reused_from``);
    None where the receipt records nothing."""
    environment = predicate.get("environment")
    environment = environment if isinstance(environment, dict) else {}
    isolation = environment.get("isolation")
    records = isolation if isinstance(isolation, dict) else {}
    return {
        "isolation_recorded": isinstance(isolation, dict),
        "isolation": {side: {"record": records.get(side),
                             "isolated": _isolated(records.get(side))} for side in SIDES},
        "signing": environment.get("signing"),
        "base_reused_from": environment.get("base_reused_from"),
    }


# --- the text a reviewer reads (every string from evidence through printable) ----------------


def _list(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(printable(item) for item in value)
    return printable(value)


def describe_isolation(entry: Mapping[str, Any], isolation_recorded: bool) -> str:
    """One side's isolation in words, from :func:`recorded`'s entry."""
    record = entry.get("record")
    if not isolation_recorded or record is None:
        return NOT_RECORDED
    if not isinstance(record, dict):
        return f"unreadable record ({printable(short_json(record))}): not isolated"
    sandbox = record.get("sandbox")
    if not entry.get("isolated"):
        if sandbox == "none":
            reason = record.get("reason")
            return "none (not isolated" + (f": {printable(reason)})" if reason else ")")
        return f"unreadable record ({printable(short_json(record))}): not isolated"
    parts = [printable(sandbox)]
    if record.get("version") is not None:
        parts[0] += f" {printable(record['version'])}"
    if record.get("namespaces") is not None:
        parts.append(f"namespaces {_list(record['namespaces'])}")
    if record.get("environment") is not None:
        parts.append(f"environment {printable(record['environment'])}")
    if record.get("filesystem") is not None:
        parts.append(f"filesystem {printable(record['filesystem'])}")
    text = ", ".join(parts)
    if record.get("reused_from_bundle") is True:
        text += " (recorded by the bundle the base was reused from)"
    return text


def short_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def describe_signing(signing: Any) -> str | None:
    """The signing key's kind in words, or None when the receipt records none."""
    if signing is None:
        return None
    key = signing.get("key") if isinstance(signing, dict) else None
    if key == "ephemeral":
        return ("signed with an ephemeral key: proves consistency of the bundle, not who "
                "ran it")
    if key == "persistent":
        return "signed with a persistent key: whoever holds it signed the bundle"
    return f"unreadable record ({printable(short_json(signing))})"


def describe_reused(reused: Any) -> str | None:
    """The bundle a reused base came from, in words, or None when the base ran here."""
    if reused is None:
        return None
    if isinstance(reused, dict) and isinstance(reused.get("bundle"), str):
        text = printable(reused["bundle"])
        if reused.get("key_sha256") is not None:
            text += f" (reuse key sha256 {printable(reused['key_sha256'])})"
        return text
    return f"unreadable record ({printable(short_json(reused))})"


def side_lines(facts: Mapping[str, Mapping[str, Any]], change: Mapping[str, Any],
               environment: Mapping[str, Any]) -> list[str]:
    """The text lines ``verify`` prints of both sides (two-space indent, as its others)."""
    lines: list[str] = []
    for side in SIDES:
        f = facts[side]
        pinned = ("pinned by file" if f["pinned_by"] == "pin-file"
                  else "pinned inline by the manifest")
        lines.append(f"  {f['role']} ({side} side): {printable(f['package'])}=="
                     f"{printable(f['version'])} (family {printable(f['family'])}, {pinned})")
        if f["pin"] is not None:
            lines.append(f"    pin: {printable(f['pin'])}, sha256 "
                         f"{printable(f['pin_sha256'])}")
        if f["wheel"] is not None:
            lines.append(f"    wheel: {printable(f['wheel'])}, sha256 "
                         f"{printable(f['wheel_sha256'])}")
        if f["patch_sha256"] is not None:
            lines.append(f"    patch: sha256 {printable(f['patch_sha256'])} (frozen by the "
                         "manifest)")
        tree = f["tree_sha256"]
        if tree is None:
            lines.append("    tree: not recorded")
        elif f["tree_pinned"]:
            lines.append(f"    tree: sha256 {printable(tree)}")
        elif f["patch_sha256"] is not None and f["pinned_tree_sha256"] is not None:
            lines.append(f"    tree: sha256 {printable(tree)} (as the receipt records it: "
                         f"the pinned tree {printable(f['pinned_tree_sha256'])} with the "
                         "patch applied)")
        else:
            lines.append(f"    tree: sha256 {printable(tree)} (as the receipt records it; "
                         "the manifest pins no tree)")
        lines.append(f"    kernel: sha256 {printable(f['kernel_sha256'])}")
        lines.append("    isolation: " + describe_isolation(
            environment["isolation"][side], environment["isolation_recorded"]))
    if "patch_of" not in change:  # a side's frozen patch is on that side's lines
        lines.append(f"  change: sha256 {printable(change['sha256'])}, {change['what']}")
    reused = describe_reused(environment.get("base_reused_from"))
    if reused is not None:
        lines.append(f"  base reused from: {reused}")
    signing = describe_signing(environment.get("signing"))
    if signing is not None:
        lines.append(f"  signing: {signing}")
    return lines


# --- what a reviewer requires ------------------------------------------------------------------


@dataclass(frozen=True)
class SideRequirement:
    """One side as the reviewer requires it: a pin (``pin_sha256``: a pin file's sha256) or
    a release (``package``, ``version``). ``given``: the reviewer's words, for messages."""

    given: str
    pin_sha256: str | None = None
    package: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class Requirements:
    """What ``verify`` must find of both sides, or refuse the bundle (exit 4): every
    requirement given of the base (stock) and of the change (patched) side, the change's
    diff, and both sides isolated."""

    base: tuple[SideRequirement, ...] = ()
    change: tuple[SideRequirement, ...] = ()
    patch: SideRequirement | None = None  # ``pin_sha256`` holds the diff's sha256
    isolation: bool = False

    def any(self) -> bool:
        return bool(self.base or self.change or self.patch or self.isolation)

    def to_json(self) -> dict[str, Any]:
        """Each requirement given: ``base`` and ``change`` lists of ``{"given": SPEC,
        "release": NAME==VERSION}`` or ``{"given": SPEC, "sha256": HEX}``; ``patch`` one
        such ``sha256`` object; ``isolation``: true. Only those given."""
        out: dict[str, Any] = {}
        for name in ("base", "change"):
            if getattr(self, name):
                out[name] = [_requirement_json(req) for req in getattr(self, name)]
        if self.patch is not None:
            out["patch"] = _requirement_json(self.patch)
        if self.isolation:
            out["isolation"] = True
        return out


def _requirement_json(req: SideRequirement) -> dict[str, Any]:
    if req.version is not None:
        return {"given": req.given, "release": f"{req.package}=={req.version}"}
    return {"given": req.given, "sha256": req.pin_sha256}


def describe_required(required: Mapping[str, Any]) -> str:
    """``Requirements.to_json`` in words, for the text output."""
    parts = []
    for name, value in required.items():
        if name == "isolation":
            parts.append("--require-isolation (both sides in a sandbox)")
            continue
        for req in value if isinstance(value, list) else [value]:
            if not isinstance(req, dict):
                continue
            release, sha = req.get("release"), req.get("sha256")
            shown = f"--require-{name} {printable(req.get('given'))}"
            if req.get("given") != (release or sha):  # a file: its sha256 beside its name
                shown += f" ({printable(release)})" if release else f" (sha256 {printable(sha)})"
            parts.append(shown)
    return ", ".join(parts)


def parse_side_spec(spec: str, flag: str) -> SideRequirement:
    """``NAME==VERSION`` (a release), a bare 64-hex sha256 (a pin file's), or the path of a
    pin file (its bytes' sha256). A file that cannot be read is usage (exit 2)."""
    version = _VERSION_SPEC.fullmatch(spec)
    if version is not None:
        return SideRequirement(given=spec, package=_normal(version.group(1)),
                               version=version.group(2))
    if "==" in spec:
        raise UsageError(f"{flag} {printable(spec)}: give NAME==VERSION (such as "
                         "vllm==0.33.0), a pin file or its sha256")
    if _HEX64.fullmatch(spec):
        return SideRequirement(given=spec, pin_sha256=spec.lower())
    data = read_regular_file(Path(spec), f"{flag} pin file", MAX_PIN_BYTES)
    return SideRequirement(given=spec, pin_sha256=sha256_hex(data))


def patch_requirement(spec: str, flag: str = "--require-patch") -> SideRequirement:
    """A diff file (its bytes' sha256) or a bare 64-hex sha256."""
    if _HEX64.fullmatch(spec):
        return SideRequirement(given=spec, pin_sha256=spec.lower())
    data = read_regular_file(Path(spec), f"{flag} diff", MAX_PATCH_BYTES)
    return SideRequirement(given=spec, pin_sha256=sha256_hex(data))


def _holds(f: Mapping[str, Any]) -> str:
    """A side as the bundle holds it, for a refusal's message."""
    text = f"{f['package']}=={f['version']}"
    if f["pin_sha256"] is not None:
        return f"{text} (pin {f['pin']}, sha256 {f['pin_sha256']})"
    return f"{text} (pinned inline: wheel {f['wheel']}, sha256 {f['wheel_sha256']})"


def _check_side(side: str, flag: str, required: SideRequirement,
                f: Mapping[str, Any]) -> None:
    what = f"{ROLES[side]} ({side} side, {flag})"
    if required.version is not None:
        if required.package != f["package"] or required.version != f["version"]:
            raise BindingMismatchError(what, f"{required.package}=={required.version}",
                                       _holds(f), said_by="the reviewer")
        return
    # a pin file's sha256; a version 1 manifest pins a wheel inline: its sha256 then
    pinned = f["pin_sha256"] if f["pin_sha256"] is not None else f["wheel_sha256"]
    if required.pin_sha256 != pinned:
        wanted = f"pin sha256 {required.pin_sha256}"
        if required.given != required.pin_sha256:
            wanted += f" ({required.given})"
        raise BindingMismatchError(what, wanted, _holds(f), said_by="the reviewer")


def check_requirements(required: Requirements, manifest: Any,
                       facts: Mapping[str, Mapping[str, Any]],
                       environment: Mapping[str, Any]) -> None:
    """Refuse (:class:`BindingMismatchError`, exit 4) a bundle whose sides are not the
    required ones, whose change is not the required diff, or (``isolation``) a side the
    receipt does not record as run in a sandbox."""
    for base in required.base:
        _check_side(STOCK, "--require-base", base, facts[STOCK])
    for change in required.change:
        _check_side(PATCHED, "--require-change", change, facts[PATCHED])
    if required.patch is not None:
        frozen = frozen_change_patch(manifest)
        if required.patch.pin_sha256 != frozen:
            wanted = f"sha256 {required.patch.pin_sha256}"
            if required.patch.given != required.patch.pin_sha256:
                wanted += f" ({required.patch.given})"
            holds = (f"patch sha256 {frozen}" if frozen is not None else
                     "no frozen patch (the change is "
                     f"{facts[PATCHED]['package']}=={facts[PATCHED]['version']} as released)")
            raise BindingMismatchError("change's patch (--require-patch)", wanted, holds,
                                       said_by="the reviewer")
    if required.isolation:
        for side in SIDES:
            entry = environment["isolation"][side]
            if not entry["isolated"]:
                found = describe_isolation(entry, environment["isolation_recorded"])
                raise BindingMismatchError(
                    f"{ROLES[side]} ({side} side) isolation (--require-isolation)",
                    "run in a sandbox", f"isolation {found}", said_by="the reviewer")
