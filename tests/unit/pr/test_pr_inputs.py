"""``pr`` checks the diff's shape and the --change path before anything is pinned or
downloaded (issue 37, item 5): the base here is a release no index has, so reaching the
pinning step would call pip and fail with another message."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.core.errors import UsageError
from harness.pr.flow import check_patch_shape

K = "vllm/v1/sample/ops/topk_topp_triton.py"
HEAD = f"--- a/{K}\n+++ b/{K}\n"
NOWHERE = "vllm==99.0.0"


@pytest.mark.parametrize("diff,message", [
    (HEAD + "@@ -1,1 +1,1 @@\n-x\n+y\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n",
     "it changes 2 files"),
    ("just some text\n", "no hunks found"),
    (HEAD + "@@ -1,3 +1,3 @@\n-x\n+y\n", "hunk 1 is truncated"),
    (HEAD + "@@ -1,2 +1,2 @@\n-x\n*y\n+y\n z\n", "not context, removed or added"),
    ("@@ -1,1 +1,1 @@\n-x\n+y\n", "a hunk before its"),
])
def test_a_diff_that_cannot_be_the_kernels_is_refused_before_pinning(
        tmp_path, signing_key, capsys, monkeypatch, diff, message):
    import harness.pins.pinning as pinning

    def no_pip(*args, **kwargs):
        raise AssertionError("pip was called")

    monkeypatch.setattr(pinning, "download_release", no_pip)
    (tmp_path / "c.diff").write_text(diff, encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        check_patch_shape(diff.encode())
    assert main(["pr", NOWHERE, "--patch", str(tmp_path / "c.diff"), "--key",
                 str(signing_key), "--backend", "interpreter", "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "o").exists()


def test_a_missing_change_path_is_refused_before_pinning(tmp_path, signing_key, capsys,
                                                         monkeypatch):
    import harness.pins.pinning as pinning

    monkeypatch.setattr(pinning, "download_release", lambda *a, **k: pytest.fail("pip"))
    assert main(["pr", NOWHERE, "--change", str(tmp_path / "no-such-tree"), "--key",
                 str(signing_key), "--backend", "interpreter", "--out",
                 str(tmp_path / "o")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_a_one_file_diff_passes_the_shape_check():
    check_patch_shape((HEAD + "@@ -1,2 +1,2 @@\n-x\n+y\n z\n\\ No newline at end of file\n")
                      .encode())
