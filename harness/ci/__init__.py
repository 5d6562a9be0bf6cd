"""Verdicts in the formats CI systems read, written by ``verify`` from what it verified:
an in-toto SLSA Verification Summary Attestation (:mod:`.vsa`) and JUnit XML
(:mod:`.junit`). Base install only (standard library, cryptography, rfc8785): no torch."""
