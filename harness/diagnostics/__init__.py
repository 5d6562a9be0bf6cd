"""Diagnostics derived from a verified bundle, never part of a verdict, never in a receipt.

Outside the trusted core (``harness/core/``), so the core digest a receipt records changes
only when something that judges a verdict changes. Torch-free like the core (standard
library, the core, and the optional ``exact`` extra, python-flint);
``tests/unit/test_core_boundary.py`` holds this folder to the core's import rules.
"""
