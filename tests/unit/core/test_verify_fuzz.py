"""Hypothesis-driven mutation of a synthetic bundle: only our errors ever come out, and
every mutation that changes a byte, a name or the file set is refused."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.errors import VerificationError
from harness.core.keys import load_public_key
from harness.core.verify import verify_bundle

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

PUB = load_public_key(synthetic.SIGNING_PUB)


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    return synthetic.write(tmp_path_factory.mktemp("fuzz") / "good").path


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _snapshot(root: Path) -> dict[str, bytes]:
    return {name: (root / name).read_bytes() for name in _files(root)}


mutation = st.one_of(
    st.tuples(st.just("xor"), st.integers(0, 10**9), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**9), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**9), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.just(0), st.just(0)),
    st.tuples(st.just("empty"), st.just(0), st.just(0)),
    st.tuples(st.just("rename"), st.just(0), st.just(0)),
)


@given(st.lists(st.tuples(st.integers(0, 10**6), mutation), min_size=1, max_size=3))
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutated_bundles_raise_only_our_errors(good, tmp_path, mutations):
    root = tmp_path / f"m{abs(hash(str(mutations)))}"
    shutil.copytree(good, root)
    before = _snapshot(root)
    for pick, (kind, where, value) in mutations:
        files = _files(root)
        if not files:
            break
        path = root / files[pick % len(files)]
        data = path.read_bytes()
        if kind == "xor" and data:
            i = where % len(data)
            path.write_bytes(data[:i] + bytes([data[i] ^ value]) + data[i + 1:])
        elif kind == "truncate" and data:
            path.write_bytes(data[: where % len(data)])
        elif kind == "insert":
            i = where % (len(data) + 1)
            path.write_bytes(data[:i] + bytes([value]) + data[i:])
        elif kind == "delete":
            path.unlink()
        elif kind == "empty" and data:
            path.write_bytes(b"")
        elif kind == "rename":
            path.rename(path.with_name(path.name + ".moved"))
    changed = _snapshot(root) != before
    try:
        verify_bundle(root, PUB, workers=1)
    except VerificationError as err:
        assert "\n" not in str(err)
    else:
        assert not changed, f"a mutated bundle verified: {mutations}"
    finally:
        shutil.rmtree(root)
