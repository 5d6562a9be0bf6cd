"""One home for sha256: bytes, files, the digest pattern, sha256sum lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core.digest import (
    is_sha256,
    parse_sha256sum_line,
    sha256_file,
    sha256_hex,
    sha256sum_line,
)

# FIPS 180-2 appendix B.1 ("abc") and the empty message: known answers, not recomputed.
ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_known_answers() -> None:
    assert sha256_hex(b"abc") == ABC
    assert sha256_hex(b"") == EMPTY


def test_file_digest_is_streamed_and_equal_to_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * 9000  # over one read chunk
    path = tmp_path / "f"
    path.write_bytes(data)
    assert sha256_file(path) == sha256_hex(data)


@pytest.mark.parametrize("value", [ABC, EMPTY])
def test_digests_are_recognised(value: str) -> None:
    assert is_sha256(value)


@pytest.mark.parametrize("value", [ABC.upper(), ABC[:-1], ABC + "0", ABC + "\n", " " + ABC,
                                   "g" * 64, None, 7, ABC.encode()])
def test_anything_else_is_not_a_digest(value: object) -> None:
    assert not is_sha256(value)


@pytest.mark.parametrize(("line", "parsed"), [
    (f"{ABC}  m.json\n", (ABC, "m.json")),
    (f"{ABC}  m.json", (ABC, "m.json")),
    (f"{ABC} *m.json\n", (ABC, "m.json")),
    (f"{ABC}  a name with spaces.json\n", (ABC, "a name with spaces.json")),
    (f"{ABC}\n", (ABC, None)),
    (ABC, (ABC, None)),
])
def test_sha256sum_lines_parse(line: str, parsed: tuple[str, str | None]) -> None:
    assert parse_sha256sum_line(line) == parsed


@pytest.mark.parametrize("line", [
    "", "garbage\n", f"{ABC.upper()}  m.json\n", f"{ABC}  m.json\n{ABC}  m.json\n",
    f"{ABC} m.json\n", f"{ABC}  \n", f"{ABC}  m.json \n", f"{ABC}\tm.json\n", f"{ABC}\n\n",
])
def test_other_text_is_not_a_sha256sum_line(line: str) -> None:
    assert parse_sha256sum_line(line) is None


@given(st.binary(max_size=256),
       st.from_regex(r"[A-Za-z0-9_.-][A-Za-z0-9_. -]*[A-Za-z0-9_.-]", fullmatch=True))
def test_written_lines_read_back(data: bytes, name: str) -> None:
    assert parse_sha256sum_line(sha256sum_line(data, name)) == (sha256_hex(data), name)
