"""Run probes: each in the same fresh temporary folder, each outcome judged strictly."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from ..core.errors import HarnessError
from .probe import Outcome, Probe, ProbeContext, ProbeSkipped, WrongReason


def run_probe(probe: Probe, context: ProbeContext) -> Outcome:
    """Run one probe; any exception other than the declared refusal is a failed probe."""
    try:
        observed = probe.run(context)
    except ProbeSkipped as err:
        return Outcome(probe, "-", "skipped", f"skipped: {err}")
    except WrongReason as err:  # right code, other cause: proves nothing about this defect
        return Outcome(probe, err.code, "FAILED",
                       " ".join(f"refused for another reason: {err}".split())[:200])
    except HarnessError as err:
        observed = err.code
    except Exception as err:  # the probe itself broke: never counted as failing closed
        return Outcome(probe, f"unexpected {type(err).__name__}", "FAILED",
                       " ".join(str(err).split())[:200])
    return Outcome(probe, observed, "ok" if observed == probe.expected else "FAILED")


def run_all(probes: Iterable[Probe], progress: Callable[[Outcome], None] | None = None,
            sources: Path | None = None) -> list[Outcome]:
    """Run ``probes`` in order in a fresh temporary directory, sharing one context.

    ``sources``: exported source trees (``topp-gate sources export``) for the source-drift
    probe, instead of the cache."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="topp-gate-probe-") as tmp:
        context = ProbeContext(Path(tmp), sources)
        for probe in probes:
            outcome = run_probe(probe, context)
            outcomes.append(outcome)
            if progress:
                progress(outcome)
    return outcomes
