"""``topp-gate pr``: a pull request against its base in one command (pin, freeze, run both
sides in their sandboxes, verify, answer)."""
