"""Reading a bundle's signed artifacts (verification steps 1-3 and 5): the statement under
its signature, the tree against the receipt, the subjects' names, codecs and declared sizes,
and digest-checked decoding with the declared size as a hard cap.

Base install only (standard library, jsonschema, cryptography, rfc8785). Every failure is a
:class:`~harness.core.errors.VerificationError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import dsse, receipt
from .bundle import (
    CASES,
    CODEC_MASK,
    CODEC_NONE,
    CODEC_XZ,
    CODEC_ZLIB,
    ENVELOPE,
    INPUT_CODECS,
    MANIFEST,
    MAX_ENVELOPE_BYTES,
    RECEIPT,
    ROWS,
    BundleDir,
    check_path,
    evidence_name,
    mask_decode,
    output_name,
    rows_bytes,
    xz_decompress,
    zlib_decompress,
)
from .digest import sha256_hex
from .errors import BindingMismatchError, HarnessError, MalformedEvidenceError
from .limits import MAX_CASE_VALUES, MAX_PLAIN_BYTES
from .names import SIDES
from .strictjson import loads_strict

REPORT_MD = "report.md"
REPORT_PNG = "report.png"
REPORT_FILES = (REPORT_MD, REPORT_PNG)
# The verifier's own ceilings, whatever a manifest declares, live in harness/core/limits.py
# (one home, shared with manifest new and run): one case's array at most MAX_CASE_VALUES
# float32 values, a plain (uncompressed) file other than the manifest at most
# MAX_PLAIN_BYTES, the whole bundle at most MAX_WORK_VALUES values to judge (refused when
# the manifest is parsed, before any other artifact is read). With one case held at a
# time, these keep peak memory under 1 GiB for any input (tests/unit/test_verify_hostile.py
# measures it).
# A compressed stream is never much larger than what it decodes to.
_STORED_SLACK = 4096


def _stored_cap(decoded: int) -> int:
    return decoded + decoded // 16 + _STORED_SLACK


def _mask_coded_cap(raw_size: int) -> int:
    """Largest f32mask stream for ``raw_size`` output bytes: header, a code per value,
    and every value listed."""
    return 12 + raw_size // 4 + raw_size


class Artifacts:
    """Subjects of a verified statement, read and decoded on demand under their checks."""

    def __init__(self, bundle: BundleDir, subjects: list[dict[str, Any]]) -> None:
        self.bundle = bundle
        self.subjects: dict[str, dict[str, Any]] = {}
        stored: set[str] = set()
        for subject in subjects:
            name = check_path(subject["name"])
            ann = subject["annotations"]
            stored_name = check_path(ann["stored"])
            if name in self.subjects or stored_name in stored:
                raise MalformedEvidenceError(f"receipt names artifact {name!r} twice")
            if stored_name in (RECEIPT, ENVELOPE):
                raise MalformedEvidenceError(f"receipt names {stored_name} as an artifact")
            self.subjects[name] = subject
            stored.add(stored_name)
        self.stored = stored
        self._raw: dict[str, bytes] = {}

    def digest(self, name: str) -> str:
        return str(self.subjects[name]["digest"]["sha256"])

    def size(self, name: str) -> int:
        return int(self.subjects[name]["annotations"]["size"])

    def decode(self, name: str, base: bytes | None = None) -> bytes:
        """Read a subject's stored file (its size and sha256 checked before decoding),
        decode it with its declared size as a hard cap, check the raw sha256. Not cached.

        ``base`` is the raw input a mask-coded output is coded against.
        """
        subject = self.subjects.get(name)
        if subject is None:
            raise MalformedEvidenceError(f"receipt has no subject {name!r}")
        ann = subject["annotations"]
        data = self.bundle.read(ann["stored"], exact_size=ann["stored_size"])
        found = sha256_hex(data)
        if found != ann["stored_sha256"]:
            raise BindingMismatchError(f"sha256 of stored {ann['stored']}",
                                       ann["stored_sha256"], found)
        codec = ann["codec"]
        size = int(ann["size"])
        if codec == CODEC_NONE:
            raw = data
        elif codec == CODEC_XZ:
            raw = xz_decompress(data, size)
        elif codec == CODEC_ZLIB:
            raw = zlib_decompress(data, size)
        elif codec == CODEC_MASK:
            if base is None:
                raise MalformedEvidenceError(f"{name} is mask-coded but has no base input")
            raw = mask_decode(xz_decompress(data, _mask_coded_cap(size)), base)
        else:  # the schema allows no other codec
            raise MalformedEvidenceError(f"{name} uses unknown codec {codec!r}")
        del data
        if len(raw) != size:
            raise BindingMismatchError(f"size of {name}", str(size), str(len(raw)))
        found = sha256_hex(raw)
        if found != subject["digest"]["sha256"]:
            raise BindingMismatchError(f"sha256 of {name}", subject["digest"]["sha256"], found)
        return raw

    def raw(self, name: str) -> bytes:
        """:meth:`decode`, cached, resolving a mask-coded output's base by its annotation
        (for tools that read a few artifacts; :func:`verify_bundle` streams instead)."""
        if name in self._raw:
            return self._raw[name]
        subject = self.subjects.get(name)
        if subject is None:
            raise MalformedEvidenceError(f"receipt has no subject {name!r}")
        base = None
        if subject["annotations"]["codec"] == CODEC_MASK:
            base_name = subject["annotations"].get("base")
            base_subject = self.subjects.get(base_name) if isinstance(base_name, str) else None
            if base_subject is None or base_subject["annotations"]["codec"] == CODEC_MASK:
                raise MalformedEvidenceError(f"{name} is coded against {base_name!r}, which is "
                                             "not a plain input artifact")
            base = self.raw(str(base_name))
        raw = self.decode(name, base)
        self._raw[name] = raw
        return raw


def read_statement(bundle: BundleDir, public_key: Ed25519PublicKey) -> tuple[dict[str, Any], bytes]:
    envelope = bundle.read(ENVELOPE, max_size=MAX_ENVELOPE_BYTES)
    # DSSE tolerates unauthenticated variation (keyid hints, either base64 alphabet, spare
    # base64 bits, extra signatures, whitespace). A bundle must not: every byte of it is
    # bound, so exact=True accepts only what the writer makes for this key.
    payload = dsse.verify(envelope, public_key, dsse.IN_TOTO_PAYLOAD_TYPE, exact=True)
    value = loads_strict(payload, "signed payload")
    if receipt.canonical(value) != payload:
        raise MalformedEvidenceError("signed payload is not RFC 8785 canonical JSON")
    receipt.validate(value)
    readable = bundle.read(RECEIPT, max_size=MAX_ENVELOPE_BYTES)
    if readable != payload:
        raise BindingMismatchError(f"{RECEIPT} bytes", "the signed payload",
                                   "different bytes")
    return value, payload


def check_files(bundle: BundleDir, artifacts: Artifacts) -> None:
    """The tree is exactly the receipt's: its stored files, the two receipt files, and the
    folders that hold them; nothing else, not even an empty folder."""
    tree = bundle.tree()
    expected = artifacts.stored | {RECEIPT, ENVELOPE}
    missing = sorted(expected - tree.files)
    if missing:
        raise MalformedEvidenceError(f"bundle file {missing[0]} is missing "
                                     f"({len(missing)} missing)")
    extra = sorted(tree.files - expected)
    if extra:
        raise MalformedEvidenceError(f"bundle holds a file the receipt does not name: "
                                     f"{extra[0]!r}")
    folders = {name.rsplit("/", i)[0] for name in expected for i in range(1, name.count("/") + 1)}
    extra = sorted(tree.folders - folders)
    if extra:
        raise MalformedEvidenceError(f"bundle holds a folder the receipt does not imply: "
                                     f"{extra[0]!r}")


def check_names(artifacts: Artifacts, layout: list[Any], cases: list[dict[str, Any]]) -> None:
    """The subjects are exactly the layout's artifacts: nothing unexpected, nothing missing."""
    allowed = {MANIFEST, CASES, ROWS, *REPORT_FILES, *(evidence_name(s) for s in SIDES)}
    required = {MANIFEST, CASES, ROWS}
    for case, entry in zip(layout, cases, strict=True):
        required.update(case.input_sizes())
        for side in SIDES:
            if entry[side] == "ok":
                required.add(output_name(side, case.id))
    allowed |= required
    names = set(artifacts.subjects)
    if not required <= names:
        raise MalformedEvidenceError(f"receipt lacks artifact {sorted(required - names)[0]}")
    if not names <= allowed:
        raise MalformedEvidenceError(f"receipt names an unexpected artifact "
                                     f"{sorted(names - allowed)[0]}")
    for name in names:
        codec = artifacts.subjects[name]["annotations"]["codec"]
        want: tuple[str, ...] = (CODEC_NONE,)
        if name.startswith("outputs/") and name.endswith(".out.f32"):
            want = (CODEC_MASK,)
        elif name.startswith("inputs/"):
            want = INPUT_CODECS
        if codec not in want:
            raise MalformedEvidenceError(f"{name} is stored with codec {codec}, not "
                                         f"{' or '.join(want)}")


def plain(artifacts: Artifacts, name: str, max_bytes: int) -> bytes:
    """A plain (codec ``none``) subject, refused unread when it declares more than
    ``max_bytes``."""
    ann = artifacts.subjects[name]["annotations"]
    if ann["codec"] != CODEC_NONE:
        raise MalformedEvidenceError(f"{name} is stored with codec {ann['codec']}, not none")
    if int(ann["size"]) != int(ann["stored_size"]) or int(ann["size"]) > max_bytes:
        raise MalformedEvidenceError(f"{name} declares {ann['size']} bytes ({ann['stored_size']}"
                                     f" stored); at most {max_bytes}, stored as is")
    return artifacts.decode(name)


def check_sizes(artifacts: Artifacts, layout: list[Any], manifest: Any,
                 predicate: dict[str, Any]) -> None:
    """Before anything is inflated: each subject declares exactly the raw size the layout
    implies, and a stored size a stream of that size can have; every case is under the
    verifier's own ceiling, and the stored total under the manifest's cap."""
    implied: dict[str, int] = {ROWS: len(rows_bytes(predicate["rows"]))}
    for case in layout:
        if case.batch * case.vocab > MAX_CASE_VALUES:
            raise MalformedEvidenceError(
                f"case {case.id} holds {case.batch} x {case.vocab} values, over this "
                f"verifier's ceiling of {MAX_CASE_VALUES} per case")
        implied.update(case.input_sizes())
        for side in SIDES:
            implied[output_name(side, case.id)] = case.logits_bytes
    for name, subject in sorted(artifacts.subjects.items()):
        ann = subject["annotations"]
        size, stored = int(ann["size"]), int(ann["stored_size"])
        want = implied.get(name)
        if want is not None and size != want:
            raise MalformedEvidenceError(f"{name} declares {size} raw bytes; the case layout "
                                         f"implies {want}")
        codec = ann["codec"]
        if codec == CODEC_NONE:
            if stored != size or size > MAX_PLAIN_BYTES:
                raise MalformedEvidenceError(f"{name} declares {size} bytes ({stored} stored)"
                                             f"; at most {MAX_PLAIN_BYTES}, stored as is")
        else:
            decoded = _mask_coded_cap(size) if codec == CODEC_MASK else size
            if stored > _stored_cap(decoded):
                raise MalformedEvidenceError(f"{name} declares {stored} stored bytes for "
                                             f"{size} raw: not a stream of that size")
    total = sum(int(s["annotations"]["stored_size"]) for s in artifacts.subjects.values())
    cap = int(manifest.limits["max_bundle_bytes"])
    recorded = predicate["bundle"]["max_bytes"]
    if recorded is not None and recorded != cap:
        raise BindingMismatchError("bundle size cap", str(recorded), str(cap))
    if total > cap:
        raise MalformedEvidenceError(f"bundle artifacts hold {total} bytes, over the "
                                     f"manifest's cap of {cap}")


def signer_hint(path: Path) -> str | None:
    """The key id an envelope names for its signer, UNVERIFIED: only for choosing among
    keys the caller trusts anyway (``keys.project_public_key``). None when unreadable; the
    verification proper then reports why."""
    try:
        data = BundleDir(Path(path)).read(ENVELOPE, max_size=MAX_ENVELOPE_BYTES)
        hints = dsse.keyid_hints(data)
    except HarnessError:
        return None
    return hints[0] if len(hints) == 1 else None
