"""scripts/arith_probe.py in Triton's interpreter (numpy float32): its kernels really run, the
result is signed when a key is given, and a result file is never overwritten. The CUDA
measurement is committed evidence (evidence/probes/).

The interpreter runs are made as a user makes them, ``TRITON_INTERPRET=1 python
scripts/arith_probe.py ...`` in a process of their own: Triton reads the variable when
``triton.language`` is first imported, so setting it inside a pytest process that has already
imported Triton (an xdist worker that ran other files) leaves ``tl.sum`` compiled for the GPU
and the interpreter refuses it ("Cannot call @triton.jit'd outside of the scope of a kernel")."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _probe():
    spec = importlib.util.spec_from_file_location("arith_probe", ROOT / "scripts/arith_probe.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["arith_probe"] = module
    spec.loader.exec_module(module)
    return module


def _interpreted(*argv: str) -> subprocess.CompletedProcess[str]:
    """scripts/arith_probe.py ARGV in Triton's interpreter, in a fresh process."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, str(ROOT / "scripts/arith_probe.py"), *argv],
                          env=env, capture_output=True, text=True, timeout=900)


def test_in_the_interpreter_division_is_ieee_so_a_reciprocal_product_differs(tmp_path):
    from harness.capture.signing import write_keypair
    from harness.core import dsse
    from harness.core.keys import load_public_key

    write_keypair(tmp_path / "k")
    probe = _probe()
    out = tmp_path / "probe.json"
    done = _interpreted("--out", str(out), "--stride", "1000003", "--key", str(tmp_path / "k.key"))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_bytes())
    measured = result["measured"]
    assert result["backend"] == "interpreter" and measured["stride"] == 1000003
    # every finite t <= 0 from -0.0 to -FLT_MAX, every 1000003rd: numpy's exp never exceeds 1
    assert measured["exp_nonpositive_tried"] == -(-probe.NEG_COUNT // 1000003)
    assert measured["exp_nonpositive_above_one"] == 0 and measured["exp_zero_is_one"]
    # numpy divides correctly rounded: e/Z and e*(1/Z) (two roundings) differ somewhere, and
    # a correctly rounded division is monotone
    assert 0 < measured["div_vs_mul_recip_differ"] < measured["div_pairs_tried"]
    assert measured["div_above_recip_of_one"] == 0
    envelope = (tmp_path / "probe.json.dsse.json").read_bytes()
    signed = dsse.verify(envelope, load_public_key(tmp_path / "k.pub"), probe.PAYLOAD_TYPE)
    assert signed == out.read_bytes() and done.stdout == out.read_text()
    again = _interpreted("--out", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_without_a_gpu_or_the_interpreter_it_refuses_in_one_line(monkeypatch, tmp_path,
                                                                   capsys):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    probe = _probe()
    if probe.torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert probe.main(["--out", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "p.json").exists()


def test_the_committed_h200_measurement_is_signed_by_evidence_key_4():
    from harness.core import dsse
    from harness.core.keys import load_public_key

    probe = _probe()
    path = ROOT / "evidence/probes/arith-h200-20261203.json"
    signed = dsse.verify(Path(f"{path}.dsse.json").read_bytes(),
                         load_public_key(ROOT / "evidence/keys/topp-gate-evidence-4.pub"),
                         probe.PAYLOAD_TYPE)
    assert signed == path.read_bytes()
    result = json.loads(signed)
    assert result["backend"] == "cuda" and result["measured"]["stride"] == 1
    assert result["measured"]["exp_nonpositive_tried"] == probe.NEG_COUNT


def test_a_bad_key_or_an_unwritable_place_is_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "bad.key").write_text("not a key\n")
    done = _interpreted("--out", str(tmp_path / "p.json"), "--key", str(tmp_path / "bad.key"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "p.json").exists()
    done = _interpreted("--out", str(tmp_path / "missing" / "p.json"), "--stride", "100000007")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("arith_probe: cannot write") and done.stderr.count("\n") == 1
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere.json")
    done = _interpreted("--out", str(tmp_path / "link.json"))
    assert done.returncode == 2 and not (tmp_path / "elsewhere.json").exists()
