"""``vllm==X`` pins from the cache without pip when the release's verified wheel is there
(issue 37, item 5: ``pr vllm==X`` called pip every time and failed offline)."""

from __future__ import annotations

import subprocess

import pytest

from harness.core.digest import sha256_hex
from harness.pins import pinning

NAME = "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"


def _keep(cache, data: bytes, name: str = NAME):
    folder = cache / "wheels" / sha256_hex(data)
    folder.mkdir(parents=True)
    (folder / name).write_bytes(data)
    return folder / name


def test_a_cached_verified_wheel_is_used_without_pip(tmp_path, monkeypatch):
    def no_pip(*args, **kwargs):
        raise AssertionError("pip was called")

    monkeypatch.setattr(subprocess, "run", no_pip)
    wheel = _keep(tmp_path, b"a wheel")
    assert pinning.download_release("9.9.9", tmp_path) == wheel


def test_a_cached_wheel_whose_bytes_changed_is_not_used(tmp_path, monkeypatch):
    wheel = _keep(tmp_path, b"a wheel")
    wheel.write_bytes(b"another wheel")
    assert pinning.cached_release("9.9.9", tmp_path) is None
    called = []
    monkeypatch.setattr(subprocess, "run",
                        lambda cmd, **kw: called.append(cmd) or subprocess.CompletedProcess(cmd, 1))
    with pytest.raises(Exception, match="pip could not download"):
        pinning.download_release("9.9.9", tmp_path)
    assert called and "vllm==9.9.9" in called[0]


def test_another_version_or_platform_is_not_taken(tmp_path):
    _keep(tmp_path, b"w1", "vllm-9.9.8-cp38-abi3-manylinux_2_28_x86_64.whl")
    _keep(tmp_path, b"w2", "vllm-9.9.9-cp38-abi3-macosx_11_0_arm64.whl")
    assert pinning.cached_release("9.9.9", tmp_path) is None
