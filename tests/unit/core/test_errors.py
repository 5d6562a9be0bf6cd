"""The error tree, pinned: every class, its parent, its stable code and its exit code.

Scripts match on codes and exit codes (README, VERIFYING.md): changing one is a breaking
change, so it must change here too, on purpose.
"""

from __future__ import annotations

import inspect

import pytest

from harness.core import errors
from harness.core.errors import (
    EXIT_AMBIGUOUS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_STOP,
    EXIT_USAGE,
    EXIT_VERIFY,
    BindingMismatchError,
    HarnessError,
    InternalError,
    MalformedEvidenceError,
    UsageError,
    VerificationError,
    VerificationInternalError,
    wrap_as,
)

# class name: (parent name, code, exit code)
TREE = {
    "HarnessError": ("Exception", "harness_error", EXIT_USAGE),
    "UsageError": ("HarnessError", "usage", EXIT_USAGE),
    "MissingExtraError": ("UsageError", "missing_extra", EXIT_USAGE),
    "SectionInputError": ("UsageError", "section_input", EXIT_USAGE),
    "InvalidInputError": ("HarnessError", "invalid_input", EXIT_USAGE),
    "EmptyRowError": ("InvalidInputError", "empty_row", EXIT_USAGE),
    "NonFiniteLogitError": ("InvalidInputError", "non_finite_logit", EXIT_USAGE),
    "InvalidPError": ("InvalidInputError", "invalid_p", EXIT_USAGE),
    "InvalidKError": ("InvalidInputError", "invalid_k", EXIT_USAGE),
    "AllMaskedRowError": ("InvalidInputError", "all_masked_row", EXIT_USAGE),
    "ShapeError": ("InvalidInputError", "bad_shape", EXIT_USAGE),
    "LimitError": ("InvalidInputError", "over_limit", EXIT_USAGE),
    "ManifestError": ("InvalidInputError", "bad_manifest", EXIT_USAGE),
    "ManifestNotFrozenError": ("ManifestError", "manifest_not_frozen", EXIT_USAGE),
    "EvidenceDriftError": ("HarnessError", "evidence_drift", EXIT_USAGE),
    "SourcesError": ("HarnessError", "sources", EXIT_USAGE),
    "KernelRunError": ("HarnessError", "kernel_run", EXIT_USAGE),
    "KernelChildError": ("KernelRunError", "kernel_child", EXIT_USAGE),
    "InternalError": ("HarnessError", "internal_error", EXIT_INTERNAL),
    "VerificationError": ("HarnessError", "verification_failed", EXIT_VERIFY),
    "MalformedEvidenceError": ("VerificationError", "malformed_evidence", EXIT_VERIFY),
    "SignatureError": ("VerificationError", "bad_signature", EXIT_VERIFY),
    "BindingMismatchError": ("VerificationError", "binding_mismatch", EXIT_VERIFY),
    "HarnessDriftError": ("BindingMismatchError", "harness_drift", EXIT_VERIFY),
    "UnknownJudgementError": ("VerificationError", "unknown_judgement", EXIT_VERIFY),
    "VerificationInternalError": ("VerificationError", "verification_internal", EXIT_VERIFY),
}


def _classes() -> dict[str, type[HarnessError]]:
    return {name: cls for name, cls in vars(errors).items()
            if inspect.isclass(cls) and issubclass(cls, HarnessError)
            and cls.__module__ == errors.__name__}


def test_the_tree_is_exactly_the_pinned_one() -> None:
    found = {name: (cls.__bases__[0].__name__, cls.code, cls.exit_code)
             for name, cls in _classes().items()}
    assert found == TREE
    assert all(len(cls.__bases__) == 1 for cls in _classes().values())


def test_codes_are_unique_and_snake_case() -> None:
    codes = [cls.code for cls in _classes().values()]
    assert len(codes) == len(set(codes))
    assert all(code.replace("_", "").isalpha() and code.islower() for code in codes)


def test_exit_codes_are_the_documented_ones() -> None:
    assert (EXIT_OK, EXIT_STOP, EXIT_USAGE, EXIT_AMBIGUOUS, EXIT_VERIFY, EXIT_INTERNAL) == (
        0, 1, 2, 3, 4, 5)
    # no error exits 0 or 1: only a gate STOP (a result, never an exception) is exit 1
    assert {cls.exit_code for cls in _classes().values()} == {EXIT_USAGE, EXIT_VERIFY,
                                                             EXIT_INTERNAL}


def test_error_tree_lives_in_one_module() -> None:
    """No other harness module defines a HarnessError subclass."""
    import harness.cli  # noqa: F401 - load what the CLI loads
    import harness.core.verify  # noqa: F401

    def subclasses(cls: type) -> set[type]:
        return set(cls.__subclasses__()).union(*(subclasses(c) for c in cls.__subclasses__()))

    outside = {f"{c.__module__}.{c.__name__}" for c in subclasses(HarnessError)
               if c.__module__.startswith("harness") and c.__module__ != errors.__name__}
    assert outside == set()


def test_messages_are_one_printable_line_with_the_code() -> None:
    err = UsageError("two\nlines \x1b[2K here")
    assert str(err) == "usage: two lines \\x1b[2K here"
    assert err.detail == "two lines \\x1b[2K here"


def test_typed_constructors_build_their_message() -> None:
    err = BindingMismatchError("sha256 of x", "aa", "bb", said_by="the manifest")
    assert (err.what, err.expected, err.actual) == ("sha256 of x", "aa", "bb")
    assert err.detail == "sha256 of x: the manifest says aa, found bb"
    cause = ZeroDivisionError("bug")
    internal = VerificationInternalError("verifying", cause)
    assert internal.detail == "unexpected ZeroDivisionError while verifying: bug"
    assert internal.cause is cause
    assert VerificationInternalError("verifying", MemoryError()).detail == (
        "ran out of memory while verifying")


def test_wrap_as_relabels_with_the_cause_kept() -> None:
    with pytest.raises(MalformedEvidenceError,
                       match="^malformed_evidence: bundle manifest: bad$") as info:
        with wrap_as(MalformedEvidenceError, "bundle manifest: "):
            raise UsageError("bad")
    assert isinstance(info.value.__cause__, UsageError)
    with pytest.raises(BindingMismatchError):  # a verification error passes unchanged
        with wrap_as(MalformedEvidenceError):
            raise BindingMismatchError("x", "a", "b")


def test_wrap_as_fails_closed_only_at_a_boundary() -> None:
    for raised in (ZeroDivisionError("bug"), MemoryError(), InternalError("invariant")):
        with pytest.raises(VerificationInternalError) as info:
            with wrap_as(MalformedEvidenceError, failing_closed="verifying"):
                raise raised
        assert info.value.__cause__ is raised
        assert isinstance(info.value, VerificationError)
        with pytest.raises(type(raised)):  # inside: left for the boundary to judge
            with wrap_as(MalformedEvidenceError):
                raise raised
    with pytest.raises(KeyboardInterrupt):  # never swallowed
        with wrap_as(MalformedEvidenceError, failing_closed="verifying"):
            raise KeyboardInterrupt
