"""One error tree for topp-gate, split by meaning.

Every error carries a stable ``code`` (a snake_case word scripts can match on) and the CLI
exit code it maps to. Messages are one line, built from typed fields, and never include a
traceback. A gate STOP is *not* an error: it is a result written into the receipt.

Exit codes (stable, documented in README.md):
    0 success, 1 gate STOP, 2 usage or bad input, 3 oracle boundary ambiguous,
    4 verification failed, 5 internal error (a bug: never a verdict).
Only a gate STOP is exit 1 (``run``'s verdict, ``verify``'s verified verdict).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .terminal import printable

EXIT_OK = 0
EXIT_STOP = 1
EXIT_USAGE = 2
EXIT_AMBIGUOUS = 3
EXIT_VERIFY = 4
EXIT_INTERNAL = 5


class HarnessError(Exception):
    """Base of every error topp-gate raises on purpose."""

    code = "harness_error"
    exit_code = EXIT_USAGE

    def __init__(self, detail: str) -> None:
        # always one line, and nothing in it can drive a terminal (escape sequences)
        self.detail = printable(" ".join(str(detail).split()))
        super().__init__(f"{self.code}: {self.detail}")


# --- bad input (exit 2) --------------------------------------------------------------------


class UsageError(HarnessError):
    """The command line or a user-supplied file is wrong."""

    code = "usage"


class InvalidInputError(HarnessError):
    """Input data cannot be judged: the oracle and the gate refuse it (fail closed)."""

    code = "invalid_input"


class EmptyRowError(InvalidInputError):
    code = "empty_row"

    def __init__(self, what: str = "row") -> None:
        super().__init__(f"{what} holds no logits")


class NonFiniteLogitError(InvalidInputError):
    code = "non_finite_logit"

    def __init__(self, row: int, token: int, value: float) -> None:
        self.row, self.token, self.value = row, token, value
        super().__init__(f"row {row} token {token} has non-finite logit {value!r}")


class InvalidPError(InvalidInputError):
    code = "invalid_p"

    def __init__(self, given: object, as_float32: float | None, why: str | None = None) -> None:
        self.given, self.as_float32 = given, as_float32
        shown = "not a number" if as_float32 is None else repr(as_float32)
        super().__init__(why or (
            f"p={given!r} is {shown} after float32 conversion; it must be finite and in (0, 1)"
        ))


class InvalidKError(InvalidInputError):
    code = "invalid_k"

    def __init__(self, given: object) -> None:
        self.given = given
        super().__init__(f"k={given!r} is not valid; top-k needs an integer k >= 1")


class AllMaskedRowError(InvalidInputError):
    code = "all_masked_row"

    def __init__(self, row: int) -> None:
        self.row = row
        super().__init__(f"row {row} has every logit at -inf (masked): nothing can be kept")


class ShapeError(InvalidInputError):
    code = "bad_shape"


class MissingExtraError(UsageError):
    """An optional feature needs an extra that is not installed."""

    code = "missing_extra"

    def __init__(self, extra: str) -> None:
        self.extra = extra
        super().__init__(f"needs the {extra} extra: pip install 'topp-gate[{extra}]'")


class LimitError(InvalidInputError):
    """A manifest or input exceeds a declared resource limit; refused before anything runs."""

    code = "over_limit"


class ManifestError(InvalidInputError):
    """A manifest is unreadable, fails its schema, or is internally inconsistent."""

    code = "bad_manifest"


class ManifestNotFrozenError(ManifestError):
    """A manifest has no usable committed ``.sha256`` sibling, so it is not frozen."""

    code = "manifest_not_frozen"


class SectionInputError(UsageError):
    """A README section generator (``scripts/results_section.py``,
    ``scripts/affected_releases.py``) cannot build its section from the input it was given."""

    code = "section_input"


# --- evidence and sources (exit 2 when running, exit 4 when verifying) ----------------------


class EvidenceDriftError(HarnessError):
    """A pinned hash does not match what is on disk: nothing runs."""

    code = "evidence_drift"

    def __init__(self, what: str, expected: str, actual: str) -> None:
        self.what, self.expected, self.actual = what, expected, actual
        super().__init__(f"{what}: expected sha256 {expected}, found {actual}")


class SourcesError(HarnessError):
    """Pinned sources could not be fetched, extracted or read."""

    code = "sources"


class KernelRunError(HarnessError):
    """A kernel child could not be started or produced unusable results."""

    code = "kernel_run"


class KernelChildError(KernelRunError):
    """Inside the kernel child: the one-line reason it stops (the runner records a crash)."""

    code = "kernel_child"


# --- internal (exit 5) ---------------------------------------------------------------------


class InternalError(HarnessError):
    """An invariant of topp-gate's own code does not hold: a bug, never a verdict."""

    code = "internal_error"
    exit_code = EXIT_INTERNAL


# --- verification (exit 4) -----------------------------------------------------------------


class VerificationError(HarnessError):
    """Base of everything that makes ``topp-gate verify`` refuse a bundle."""

    code = "verification_failed"
    exit_code = EXIT_VERIFY


class MalformedEvidenceError(VerificationError):
    """An artifact is missing, unreadable, unparsable or not what the schema allows."""

    code = "malformed_evidence"


class SignatureError(VerificationError):
    """The envelope's signature does not verify with the given public key."""

    code = "bad_signature"


class BindingMismatchError(VerificationError):
    """A digest, a recorded hash, or a rerun result differs from what the receipt binds."""

    code = "binding_mismatch"

    def __init__(self, what: str, expected: str, actual: str, *,
                 said_by: str = "receipt") -> None:
        self.what, self.expected, self.actual = what, expected, actual
        super().__init__(f"{what}: {said_by} says {expected}, found {actual}")


class HarnessDriftError(BindingMismatchError):
    """The bundle was made by harness code that differs from this verifier's (--strict)."""

    code = "harness_drift"


class UnknownJudgementError(VerificationError):
    """A receipt names a rule set or report format this verifier does not know: it is never
    judged by other rules than the ones it names (refused, exit 4)."""

    code = "unknown_judgement"

    def __init__(self, what: str, name: str, known: tuple[str, ...]) -> None:
        self.what, self.name = what, name
        super().__init__(f"receipt names unknown {what} {name!r}; this verifier knows "
                         f"{', '.join(known)}")


class VerificationInternalError(VerificationError):
    """An unexpected exception inside verification: refused, never passed (fail closed)."""

    code = "verification_internal"

    def __init__(self, doing: str, err: BaseException) -> None:
        self.doing, self.cause = doing, err
        if isinstance(err, MemoryError):
            super().__init__(f"ran out of memory while {doing}")
        else:
            super().__init__(f"unexpected {type(err).__name__} while {doing}: {err}")


@contextmanager
def wrap_as(error: type[HarnessError], prefix: str = "", *,
            keep: type[HarnessError] = VerificationError,
            failing_closed: str | None = None) -> Iterator[None]:
    """Relabel the errors raised inside the block, each ``raise ... from`` its cause.

    A ``keep`` error passes unchanged; any other :class:`HarnessError` becomes ``error``
    with ``prefix`` before its detail. With ``failing_closed`` (what the block is doing,
    as in "verifying"), the block is a verification boundary: an :class:`InternalError`, a
    ``MemoryError`` or any unexpected exception becomes a :class:`VerificationInternalError`
    (a refusal, never a pass); without it they pass through to the caller's boundary.
    """
    try:
        yield
    except keep:
        raise
    except InternalError as err:
        if failing_closed is None:
            raise
        raise VerificationInternalError(failing_closed, err) from err
    except HarnessError as err:
        raise error(f"{prefix}{err.detail}") from err
    except Exception as err:  # MemoryError included: fail closed at the boundary
        if failing_closed is None:
            raise
        raise VerificationInternalError(failing_closed, err) from err
