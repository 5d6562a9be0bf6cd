#!/usr/bin/env python3
"""Measure, on one machine's Triton arithmetic, the float32 facts that decide whether three
survivors of the mutation catalogue can change any output of vLLM 0.33.0's split top-p
pipeline (issue 20; docs/mutation.md, "Mutation testing the gate"). Writes one JSON result,
signed as a DSSE envelope when --key is given.

* ``exp_nonpositive_above_one``: finite float32 t <= 0 (every one on CUDA) with
  ``tl.exp(t) > 1``; and ``exp_zero_is_one``. With none, every token's probability
  ``exp(x - M) / Z`` is at most the row maximum's ``exp(0) / Z`` provided the division is
  monotone (next item), so a pivot with positive mass above it is always below the maximum's
  probability: ``drop-keep-max`` (dropping ``| (x == M)``) then changes nothing.
* ``div_above_recip_of_one``: pairs (e, Z), e a normal float32 in (0, 1], with
  ``e / Z > 1.0 / Z`` (a non-monotone division).
* ``div_vs_mul_recip_differ``: pairs with ``e / Z`` and ``e * (1.0 / Z)`` bitwise different:
  where ``prec-mask-recip`` can move a probability. On CUDA every normal e in (0, 1] is tried
  against each Z; the interpreter (numpy) tries every ``--stride``-th one.
* the PTX instructions each kernel's division lowered to (CUDA).

The Z values: 1, 1.5, 2, 3, 1000, 32000.5 and 58 log-uniform float32 values in [1, 262144]
(numpy ``default_rng(20261203)``): a row's normalizer lies in [1, vocab].

    python3 scripts/arith_probe.py --out probe.json [--key KEY] [--stride N]
    TRITON_INTERPRET=1 python3 scripts/arith_probe.py --out probe.json --stride 4099
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

# the kernels write these as literals (a Triton kernel reads no plain global): -0.0 is bit
# pattern 0x80000000, i.e. offs - 2**31 as int32; the smallest normal float32 is 0x00800000
NEG_COUNT = (1 << 31) - (1 << 23)   # -0.0 down to -FLT_MAX: every finite t <= 0
ONE_BITS = 0x3F800000
MIN_NORMAL_BITS = 0x00800000
PAYLOAD_TYPE = "application/vnd.topp-gate.arith-probe+json"


@triton.jit
def _exp_probe(COUNTS, N, STRIDE, BLOCK: tl.constexpr):
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64) * STRIDE
    live = offs < N
    bits = (offs - (1 << 31)).to(tl.int32)
    t = tl.where(live, bits.to(tl.float32, bitcast=True), 0.0)  # past N: NaN patterns
    e = tl.exp(t)
    tl.atomic_add(COUNTS + 0, tl.sum((live & (e > 1.0)).to(tl.int64)))
    tl.atomic_add(COUNTS + 1, tl.sum(live.to(tl.int64)))


@triton.jit
def _div_probe(ZS, COUNTS, N, STRIDE, NZ: tl.constexpr, BLOCK: tl.constexpr):
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64) * STRIDE
    live = offs < N
    bits = (offs + 0x00800000).to(tl.int32)
    e = tl.where(live, bits.to(tl.float32, bitcast=True), 1.0)
    differ = tl.zeros([BLOCK], dtype=tl.int64)
    above = tl.zeros([BLOCK], dtype=tl.int64)
    for i in range(NZ):
        z = tl.load(ZS + i)
        q = e / z
        r = e * (1.0 / z)
        top = 1.0 / z
        differ += (live & (q.to(tl.int32, bitcast=True) != r.to(tl.int32, bitcast=True))
                   ).to(tl.int64)
        above += (live & (q > top)).to(tl.int64)
    tl.atomic_add(COUNTS + 0, tl.sum(differ))
    tl.atomic_add(COUNTS + 1, tl.sum(above))
    tl.atomic_add(COUNTS + 2, tl.sum(live.to(tl.int64)) * NZ)


@triton.jit
def _exp_zero(OUT):
    tl.store(OUT, tl.exp(tl.load(OUT)))  # OUT holds 0.0: read at run time, never folded


def z_values() -> list[float]:
    rng = np.random.default_rng(20261203)
    drawn = np.exp(rng.uniform(0.0, np.log(262144.0), 58)).astype(np.float32)
    fixed = np.array([1.0, 1.5, 2.0, 3.0, 1000.0, 32000.5], dtype=np.float32)
    return [float(z) for z in np.concatenate([fixed, drawn])]


def _ptx_ops(compiled: object) -> list[str]:
    asm = getattr(compiled, "asm", {}) or {}
    ptx = asm.get("ptx", "") if isinstance(asm, dict) else ""
    return sorted(set(re.findall(r"\b((?:div|rcp|ex2)\.[a-z0-9.]+)", ptx)))


def measure(device: str, stride: int) -> dict[str, object]:
    block = 1024
    counts = torch.zeros(2, dtype=torch.int64, device=device)
    n = NEG_COUNT
    grid = (triton.cdiv(triton.cdiv(n, stride), block),)
    started = time.perf_counter()
    exp_kernel = _exp_probe[grid](counts, n, stride, BLOCK=block)
    zero = torch.zeros(1, dtype=torch.float32, device=device)
    _exp_zero[(1,)](zero)
    zs = torch.tensor(z_values(), dtype=torch.float32, device=device)
    dcounts = torch.zeros(3, dtype=torch.int64, device=device)
    nd = ONE_BITS - MIN_NORMAL_BITS + 1
    dgrid = (triton.cdiv(triton.cdiv(nd, stride), block),)
    div_kernel = _div_probe[dgrid](zs, dcounts, nd, stride, NZ=len(zs), BLOCK=block)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    exp_c, div_c = counts.tolist(), dcounts.tolist()
    return {
        "exp_nonpositive_tried": exp_c[1],
        "exp_nonpositive_above_one": exp_c[0],
        "exp_zero_is_one": float(zero.item()) == 1.0,
        "div_pairs_tried": div_c[2],
        "div_vs_mul_recip_differ": div_c[0],
        "div_above_recip_of_one": div_c[1],
        "z_values": len(zs),
        "stride": stride,
        "ptx_instructions": {"exp_probe": _ptx_ops(exp_kernel), "div_probe": _ptx_ops(div_kernel)},
        "seconds": round(seconds, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="result JSON (a new file)")
    parser.add_argument("--key", type=Path, help="Ed25519 key: also write OUT.dsse.json")
    parser.add_argument("--stride", type=int, default=1,
                        help="try every N-th float32 (default 1: all; the interpreter needs more)")
    args = parser.parse_args(argv)
    if os.path.lexists(args.out):
        print(f"arith_probe: {ascii(str(args.out))} already exists", file=sys.stderr)
        return 2
    private = None
    if args.key is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from harness.capture.signing import load_private_key
        from harness.core.errors import HarnessError

        try:  # before measuring: a bad key costs no GPU time
            private = load_private_key(args.key)
        except (HarnessError, OSError) as err:
            print(f"arith_probe: {ascii(str(err))}", file=sys.stderr)
            return 2
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    device = "cpu" if interpreted or not torch.cuda.is_available() else "cuda"
    if device == "cpu" and not interpreted:
        print("arith_probe: no GPU; run with TRITON_INTERPRET=1 for the interpreter",
              file=sys.stderr)
        return 2
    if args.stride < 1:
        print("arith_probe: --stride must be at least 1", file=sys.stderr)
        return 2
    result = {
        "schema": "topp-gate/arith-probe/v1",
        "backend": "interpreter" if interpreted else "cuda",
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.machine(),
        "torch": torch.__version__, "triton": triton.__version__,
        "script_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        "measured": measure(device, args.stride),
    }
    raw = (json.dumps(result, indent=1, sort_keys=True) + "\n").encode()
    files = {args.out: raw}
    if private is not None:
        from harness.capture.signing import sign

        envelope = sign(raw, private, PAYLOAD_TYPE)
        files[Path(f"{args.out}.dsse.json")] = (json.dumps(envelope, indent=1) + "\n").encode()
    for path, data in files.items():
        try:
            with path.open("xb") as handle:  # never over an existing file or a link
                handle.write(data)
        except OSError as err:
            print(f"arith_probe: cannot write {ascii(str(path))}: {err.strerror}",
                  file=sys.stderr)
            return 2
    print(raw.decode(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
