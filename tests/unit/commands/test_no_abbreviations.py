"""No verb takes an abbreviated long option (issue 38, item 5): argparse would read
``--man X`` as ``--manifest X``, so a wrapper that looks for ``--manifest`` itself (the Nix
gate, scripts/gate's ``--out``/``--key``) would be bypassed."""

from __future__ import annotations

import pytest

from harness.cli import main


@pytest.mark.parametrize("argv", [
    ["run", "--man", "m.json", "--out", "b"],
    ["run", "--manifest", "m.json", "--ou", "b"],
    ["pr", "vllm==0.33.0", "--pat", "x.diff"],
    ["verify", "bundle", "--pub", "k.pub"],
    ["site", "evidence", "--ou", "site"],
])
def test_an_abbreviated_option_is_refused_in_one_line(argv, capsys):
    """Refused before anything runs: the abbreviation is an unknown argument, or the option
    it would have abbreviated is reported missing."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "unrecognized arguments" in err[0] or "required" in err[0], err[0]
