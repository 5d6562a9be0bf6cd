"""`sources pin` on a tree with hostile text (issue 17 "Smaller"): a kernel closure file
that Python cannot parse is bad input (exit 2, one line), and a release version string
from vllm/_version.py is escaped wherever it is printed."""

from __future__ import annotations

import pytest

from harness.cli import main

KERNEL = "vllm/v1/sample/ops/topk_topp_triton.py"
FILES = {
    "vllm/__init__.py": "",
    "vllm/platforms/__init__.py": "current_platform = None\n",
    "vllm/platforms/cuda.py": "",
    "vllm/platforms/cpu.py": "",
    KERNEL: "def apply_top_k_top_p_triton(logits, k, p):\n    return logits\n",
}


def _tree(root, extra=None):
    for rel, text in {**FILES, **(extra or {})}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize("bad", [
    "def broken(:\n",
    "x = " + "(" * 300 + ")" * 300 + "\n",        # too many nested parentheses
    "x = " + "-" * 100_000 + "1\n",               # nesting past the parser's recursion
    "if x:\n" + "".join(" " * i + "if x:\n" for i in range(1, 120)) + " " * 120 + "pass\n",
])
def test_an_unparsable_closure_file_is_bad_input(tmp_path, capsys, bad):
    tree = _tree(tmp_path / "tree", {"vllm/platforms/cuda.py": bad})
    code = main(["sources", "--cache", str(tmp_path / "cache"), "pin", str(tree),
                 "--out", str(tmp_path / "pin.json")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "vllm/platforms/cuda.py" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "pin.json").exists()


def test_a_version_string_with_terminal_escapes_is_printed_escaped(tmp_path, capsys):
    version = "9.9.9\x1b]0;pwned\x07\x1b[2J"
    tree = _tree(tmp_path / "tree", {"vllm/_version.py": f"__version__ = '{version}'\n"})
    code = main(["sources", "--cache", str(tmp_path / "cache"), "pin", str(tree),
                 "--out", str(tmp_path / "pin.json")])
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert "\x1b" not in printed and "\x07" not in printed
    if code == 0:
        assert "9.9.9" in printed
