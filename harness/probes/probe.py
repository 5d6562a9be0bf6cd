"""What a probe is, what one run of the probes shares, and what a probe's outcome is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


class ProbeSkipped(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The probe cannot run here; the message says what it needs."""


class WrongReason(Exception):  # noqa: N818 - a probe outcome, not an error
    """The declared code was observed, but the refusal names something other than the
    defect the probe made: the probe did not prove what it claims."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


@dataclass(frozen=True)
class SignedBundle:
    """The untampered probe bundle and the throwaway key that signed it (never stored)."""

    path: Path
    key: Ed25519PrivateKey

    def stored(self, name: str) -> str:
        """The stored file the signed receipt names for artifact ``name`` (its codec suffix
        is the writer's choice: never guessed here)."""
        from ..core.verify import open_bundle

        return open_bundle(self.path, self.key.public_key()).stored_path(name)


@dataclass
class ProbeContext:
    """What the probes of one run share: a fresh work folder, the exported source trees
    (``--sources``) if any, and the good bundle, written by the first probe that needs it
    (``catalogue.good_bundle``) and reused by the others."""

    work: Path
    sources: Path | None = None
    good: SignedBundle | None = None


@dataclass(frozen=True)
class Probe:
    name: str
    group: str
    expected: str  # the error code or gate stop reason that refusal must carry
    what: str  # one line: what is broken
    run: Callable[[ProbeContext], str]  # returns the observed code; errors caught by run_probe


@dataclass(frozen=True)
class Outcome:
    probe: Probe
    observed: str
    status: str  # "ok", "FAILED" or "skipped"
    detail: str = ""

    @property
    def failed_closed(self) -> bool:
        return self.status == "ok"
