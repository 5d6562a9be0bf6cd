"""safeio: a link the user names is followed; a link found by walking a tree is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.core.safeio import read_regular_file


def test_link_followed_unless_refused(tmp_path: Path) -> None:
    target = tmp_path / "target.py"
    target.write_bytes(b"x = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    assert read_regular_file(link, "file", 64) == b"x = 1\n"
    with pytest.raises(UsageError, match="cannot read source file"):
        read_regular_file(link, "source file", 64, follow_link=False)
    assert read_regular_file(target, "source file", 64, follow_link=False) == b"x = 1\n"
