"""Bundles the presentation wing may read: each verified by the trusted core first.

:func:`checked` runs :func:`harness.core.verify.verify_bundle` (signature, schema, digests,
bindings, the oracle and gate rerun), then opens the same bundle again and requires the very
statement just verified (same payload digest) before any artifact is read. A bundle that does
not verify comes back as :class:`Refused` with the core's one-line reason: never its claims.
Each (bundle, key) is verified once per process (:data:`_DONE`).

The keys trusted are the built-in project keys (:func:`harness.core.keys.project_public_keys`,
the packaged copies of ``evidence/keys/``) and the ones the caller adds (``topp-gate site
--pubkey``); nothing read from an evidence folder adds to them. A bundle is verified with
each trusted key in turn, the one the envelope's key id names first, as ``topp-gate verify``
does without ``--pubkey``; or, when ``evidence/verdicts.tsv`` names a key file for it
(``recorded``), with the trusted key whose key id that file holds and no other. A recorded
key that is not trusted is never used: the bundle is refused (:func:`_recorded_key`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import HarnessError, SignatureError
from ..core.terminal import printable

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from ..core.verify import UnsafeBundleView, Verified


@dataclass(frozen=True)
class Checked:
    """A bundle the core verified, and a digest-checked view of that same statement."""

    verified: Verified
    view: UnsafeBundleView


@dataclass(frozen=True)
class Refused:
    """A bundle that did not verify: only its path and the core's reason are kept."""

    path: Path
    code: str
    reason: str


_DONE: dict[tuple[str, str], Checked | Refused] = {}


def _recorded_key(recorded: Path, trusted: Sequence[Ed25519PublicKey]) -> Ed25519PublicKey:
    """The trusted key whose key id the key file ``recorded`` (named by the record, so
    chosen by whoever wrote the evidence folder) holds. The file only names a key; it never
    makes one trusted: a file that is not a trusted key is a SignatureError."""
    from ..core.keys import keyid, load_public_key

    try:
        named = keyid(load_public_key(recorded))
    except HarnessError as err:
        raise SignatureError(f"the key verdicts.tsv names for it cannot be read: "
                             f"{err.detail}") from err
    for key in trusted:
        if keyid(key) == named:
            return key
    raise SignatureError(f"verdicts.tsv names the key {printable(recorded)} (key id {named}), "
                         "which is not a trusted key (trusted: the built-in project keys and "
                         "each --pubkey)")


def _candidate_keys(path: Path, recorded: Path | None,
                    extra: Sequence[Ed25519PublicKey]) -> list[Ed25519PublicKey]:
    from ..core.keys import keyid, project_public_key, project_public_keys
    from ..core.verify import signer_hint

    if recorded is not None:
        return [_recorded_key(recorded, [*project_public_keys().values(), *extra])]
    try:
        hint = signer_hint(path)
    except HarnessError:
        hint = None
    first = project_public_key(hint)
    others = [*project_public_keys().values(), *extra]
    extra_first = [k for k in extra if keyid(k) == hint]
    ordered = [*extra_first, first, *others]
    seen: set[str] = set()
    keys = []
    for key in ordered:
        if keyid(key) not in seen:
            seen.add(keyid(key))
            keys.append(key)
    return keys


def checked(path: Path, *, recorded: Path | None = None,
            key: Ed25519PublicKey | None = None,
            extra_keys: Sequence[Ed25519PublicKey] = (), frozen_manifest: Path | None = None,
            workers: int | None = 1,
            progress: Callable[[int], None] | None = None) -> Checked | Refused:
    """Verify the bundle at ``path`` (once per process) and open what was verified: with
    ``key`` when given (the caller's own choice); else, when the record names the key file
    ``recorded`` for it, with the trusted key of that file's key id (refused when it is not
    a trusted key); else each trusted key in turn. Trusted: the project keys and
    ``extra_keys``."""
    from ..core.keys import keyid

    try:
        keys = [key] if key is not None else _candidate_keys(path, recorded, extra_keys)
    except HarnessError as err:
        return Refused(path, err.code, printable(str(err)))
    memo = (str(path.resolve()), ",".join(keyid(k) for k in keys))
    if memo not in _DONE:
        _DONE[memo] = _check(path, keys, frozen_manifest, workers, progress)
    return _DONE[memo]


def _check(path: Path, keys: Sequence[Ed25519PublicKey], frozen_manifest: Path | None,
           workers: int | None, progress: Callable[[int], None] | None) -> Checked | Refused:
    from ..core.errors import BindingMismatchError
    from ..core.keys import keyid
    from ..core.verify import open_bundle, verify_bundle

    last: HarnessError | None = None
    for key in keys:
        try:
            verified = verify_bundle(path, key, frozen_manifest=frozen_manifest,
                                     workers=workers, progress=progress)
            view = open_bundle(path, key)
            if view.payload_sha256 != verified.payload_sha256:
                raise BindingMismatchError("bundle read again after verification",
                                           verified.payload_sha256, view.payload_sha256)
            return Checked(verified, view)
        except SignatureError as err:
            last = err
            if "no signature verifies" in str(err):
                continue
            break
        except HarnessError as err:
            last = err
            break
    if last is None:  # pragma: no cover - keys is never empty
        return Refused(path, "usage", "no key to verify with")
    if isinstance(last, SignatureError) and "no signature verifies" in str(last) \
            and len(keys) > 1:
        tried = ", ".join(keyid(k) for k in keys)
        return Refused(path, last.code, f"no signature verifies with a trusted key (key ids "
                       f"tried: {tried})")
    return Refused(path, last.code, printable(str(last)))


def verified_checked(path: Path, key: Ed25519PublicKey, *,
                     workers: int | None = None) -> Checked:
    """For the README section scripts: the bundle verified with ``key`` in this process
    (rerun included) and its view; a bundle that does not verify is a SectionInputError
    naming it and the core's reason (the scripts' exit 2), so no section is built from it."""
    from ..core.errors import SectionInputError
    from ..core.limits import default_workers

    result = checked(path, key=key, workers=workers or default_workers())
    if isinstance(result, Refused):
        raise SectionInputError(f"bundle {printable(path.name)} does not verify: "
                                f"{result.reason}")
    return result
