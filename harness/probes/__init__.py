"""The seed's breakage probes, run for real against the real code; each must FAIL CLOSED.

A probe breaks one thing on purpose (a tampered bundle, a bad input, a limit exceeded, a
drifted source) and drives the real module that must refuse it; it passes only when the
refusal carries exactly the code it declared in advance.

Modules: :mod:`.probe` (the types), :mod:`.fixture` (the synthetic bundle builder, shared
with the tests), :mod:`.tamper` (bundle mutators, shared with
``scripts/make_tamper_fixtures.py``), :mod:`.catalogue` (the probes) and :mod:`.runner`.
"""

from .catalogue import PROBES
from .probe import Outcome, Probe, ProbeContext, ProbeSkipped
from .runner import run_all, run_probe

__all__ = ["PROBES", "Outcome", "Probe", "ProbeContext", "ProbeSkipped", "run_all", "run_probe"]
