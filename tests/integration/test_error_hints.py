"""Every hint an error prints is a command that works as printed (issue 37, item 5).

Each test makes the error happen in a fresh ``topp-gate`` process, takes the command the
message gives, and pastes it into a fresh shell (``bash -c``, the venv's ``bin`` first on
PATH, as an activated venv has it). A hint that installs something runs with pip's
``--dry-run`` and no index (the command must resolve; the test changes no environment).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PUB = ROOT / "tests/assets/keys/test-only-signing.pub"
BASE = ROOT / "evidence/pins/vllm-0.33.0.json"
KERNEL = "vllm/v1/sample/ops/topk_topp_triton.py"
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
       "PIP_NO_INDEX": "1"}
ONE_FILE = (f"--- a/{KERNEL}\n+++ b/{KERNEL}\n@@ -1,1 +1,1 @@\n-x\n+y\n").encode()

pytestmark = pytest.mark.skipif(shutil.which("topp-gate", path=str(BIN)) is None,
                                reason="topp-gate is not installed beside this interpreter")


def _topp_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "topp-gate"), *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=300, check=False)


def _shell(cwd: Path, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` pasted into a fresh shell."""
    return subprocess.run(["bash", "--norc", "--noprofile", "-c", command], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=300, check=False)


def _hint(err: str, pattern: str) -> str:
    match = re.search(pattern, err)
    assert match, err
    return match[1]


def test_the_gpu_extra_hint_installs_from_this_checkout(tmp_path):
    script = textwrap.dedent("""
        import sys
        class NoGpuExtra:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "triton", "rich"):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, NoGpuExtra())
        from harness.cli import main
        sys.exit(main(["pr", "vllm==0.33.0", "--patch", "x.diff"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    command = _hint(done.stderr, r"needs the gpu extra: (.+?) \(")
    assert "topp-gate[gpu]" not in command  # the index has no topp-gate
    # as printed, with pip's --dry-run and no index: it resolves, installs nothing
    dry = command.replace(" install ", " install --dry-run --no-deps --no-build-isolation ", 1)
    pasted = _shell(tmp_path, dry)
    assert pasted.returncode == 0, pasted.stderr
    assert "Would install topp-gate" in pasted.stdout


def test_a_public_key_as_key_names_a_keygen_that_works(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    shutil.copyfile(PUB, keys / "signing.pub")
    (tmp_path / "c.diff").write_bytes(ONE_FILE)
    done = _topp_gate(tmp_path, "pr", str(BASE), "--patch", "c.diff", "--key",
                      "keys/signing.pub", "--backend", "interpreter", "--out", "o")
    assert done.returncode == 2 and "holds a public key" in done.stderr, done.stderr
    command = _hint(done.stderr, r"make a key pair with '([^']+)'")
    key = _hint(done.stderr, r"and give --key (\S+)")
    pasted = _shell(tmp_path, command)
    assert pasted.returncode == 0, pasted.stderr
    assert (tmp_path / key).is_file()
    # the key it names is taken: the run goes on to the next check (a missing --change)
    again = _topp_gate(tmp_path, "pr", str(BASE), "--change", "no-such-tree", "--key", key,
                       "--backend", "interpreter", "--out", "o")
    assert again.returncode == 2 and "--change no-such-tree" in again.stderr, again.stderr


def test_a_missing_key_and_a_loose_mode_name_commands_that_work(tmp_path):
    (tmp_path / "c.diff").write_bytes(ONE_FILE)
    done = _topp_gate(tmp_path, "pr", str(BASE), "--patch", "c.diff", "--key",
                      "new/signing.key", "--backend", "interpreter", "--out", "o")
    assert done.returncode == 2, done.stderr
    pasted = _shell(tmp_path, _hint(done.stderr, r"make one with '([^']+)'"))
    assert pasted.returncode == 0, pasted.stderr
    assert (tmp_path / "new/signing.key").is_file()
    (tmp_path / "new/signing.key").chmod(0o644)
    loose = _topp_gate(tmp_path, "pr", str(BASE), "--patch", "c.diff", "--key",
                       "new/signing.key", "--backend", "interpreter", "--out", "o")
    assert loose.returncode == 2, loose.stderr
    pasted = _shell(tmp_path, _hint(loose.stderr, r"run: (chmod 600 \S+)"))
    assert pasted.returncode == 0, pasted.stderr
    assert (tmp_path / "new/signing.key").stat().st_mode & 0o077 == 0


def test_a_two_file_diff_names_a_git_diff_that_makes_a_one_file_diff(tmp_path):
    from harness.pr.flow import check_patch_shape

    tree = tmp_path / "vllm-checkout"
    (tree / KERNEL).parent.mkdir(parents=True)
    (tree / KERNEL).write_text("x\n", encoding="utf-8")
    (tree / "README.md").write_text("a\n", encoding="utf-8")
    for args in (["init", "-q"], ["add", "."],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True)
    (tree / KERNEL).write_text("y\n", encoding="utf-8")
    (tree / "README.md").write_text("b\n", encoding="utf-8")
    both = subprocess.run(["git", "diff"], cwd=tree, check=True, capture_output=True).stdout
    (tmp_path / "both.diff").write_bytes(both)
    done = _topp_gate(tmp_path, "pr", str(BASE), "--patch", "both.diff", "--key",
                      str(PUB), "--backend", "interpreter", "--out", "o")
    assert done.returncode == 2 and "it changes 2 files" in done.stderr, done.stderr
    assert "hunk" not in done.stderr and not (tmp_path / "o").exists()
    command = _hint(done.stderr, r"in the changed vLLM checkout: (git diff -- \S+?)\)")
    pasted = _shell(tree, command)
    assert pasted.returncode == 0, pasted.stderr
    check_patch_shape(pasted.stdout.encode())  # one file: accepted


def test_an_exported_tree_on_cuda_names_the_release_and_it_pins_offline(
        tmp_path, signing_key, capsys, monkeypatch):
    from harness.cli import main
    from harness.pins.sources import cache_root
    from harness.pr import flow

    export = Path("/tmp/topp-gate-test-export")
    trees = sorted(p for p in export.glob("*") if (p / "vllm").is_dir()) \
        if export.is_dir() else []
    if not trees:
        pytest.skip("no exported trees (topp-gate sources export)")
    monkeypatch.setattr(flow, "choose_backend", lambda requested: "cuda")  # as on a GPU
    assert main(["pr", str(trees[0]), "--change", str(trees[0]), "--key", str(signing_key),
                 "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err
    release = _hint(err, r"give the release instead \((vllm==[0-9][^)\s]*)\)")
    assert "--backend interpreter" in err
    version = release.split("==")[1]
    if not list((cache_root() / "wheels").glob(f"*/vllm-{version}-*.whl")):
        pytest.skip(f"the {release} wheel is not in the cache (this test runs offline)")
    pasted = _shell(tmp_path, f"topp-gate sources pin {release} --out r.json")  # no index
    assert pasted.returncode == 0, pasted.stderr
    assert (tmp_path / "r.json").is_file()


def test_backend_cuda_without_a_device_names_the_interpreter(tmp_path, signing_key):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    (tmp_path / "c.diff").write_bytes(ONE_FILE)
    args = ["pr", str(BASE), "--patch", "c.diff", "--key", str(signing_key), "--out", "o"]
    done = _topp_gate(tmp_path, *args, "--backend", "cuda")
    assert done.returncode == 2 and "torch sees no CUDA device" in done.stderr, done.stderr
    flag = _hint(done.stderr, r"with (--backend interpreter)")
    # the same command with the flag it names gets past the backend: the next refusal is
    # the diff's (its removed line is not the kernel's), not the backend's
    again = _topp_gate(tmp_path, *args, *flag.split())
    assert again.returncode == 2 and "CUDA" not in again.stderr, again.stderr
    assert "patch: hunk 1 does not apply" in again.stderr, again.stderr
    assert "smoke manifest" not in done.stderr
