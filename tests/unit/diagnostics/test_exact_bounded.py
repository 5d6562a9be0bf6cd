"""``topp-gate exact`` holds one case at a time, like ``verify`` (issue 17: it used to keep
every case's rows in memory, 5.3 GB on a 5.7 MB bundle of 40 cases)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.core.keys import load_public_key
from harness.core.verify import UnsafeBundleView, open_bundle

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

TAMPER = ROOT / "tests" / "assets" / "tamper"
PUB = load_public_key(synthetic.SIGNING_PUB)
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}


def test_a_case_is_read_only_after_every_row_of_the_one_before_is_counted():
    pytest.importorskip("flint")
    from harness.diagnostics.exact_bundle import bundle_exact

    events: list[str] = []
    view = open_bundle(TAMPER / "good", PUB)

    class Recording(UnsafeBundleView):
        def raw(self, name: str) -> bytes:
            events.append(name)
            return super().raw(name)

    recording = Recording(view.statement, view._artifacts, view.payload_sha256)
    rows = bundle_exact(recording, workers=1, progress=lambda n: events.append("row"))
    assert len(rows) == 7
    first, second = ("inputs/forced-v64.logits.f32", "inputs/ordinary-s1-b3-v100.logits.f32")
    # forced-v64 has 4 rows: all counted before the next case's bytes are read
    assert events.index(second) > events.index(first)
    assert events[events.index(first):events.index(second)].count("row") == 4
    assert events[events.index(second):].count("row") == 3


@pytest.mark.slow
def test_exact_on_full_size_cases_stays_under_1_gib(tmp_path):
    """Two cases at the per-case ceiling (64 x 262144): peak RSS of every process of
    ``topp-gate exact`` at 2 workers (it verifies first, then counts case by case, holding
    one case: the second is read after the first is dropped). Two cases show that; a third
    only added 64 full-size rows of exact search (about 160 s of CPU in CI)."""
    pytest.importorskip("flint")
    manifest = json.loads(json.dumps(synthetic.MANIFEST))
    manifest["limits"].update(max_vocab=262144, max_bundle_bytes=1 << 30)
    manifest["cases"] = [{"id": f"ordinary-big-{i}", "kind": "ordinary", "seed": i,
                          "batch": 64, "vocab": 262144} for i in range(2)]
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / "tests" / "assets")!r})
        import synthetic
        synthetic.MANIFEST = json.loads({json.dumps(json.dumps(manifest))})
        synthetic.write(__import__("pathlib").Path({str(tmp_path / "big")!r}))
    """)
    subprocess.run([sys.executable, "-c", script], env=ENV, check=True, timeout=900)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(f"""
            import resource, subprocess, sys
            done = subprocess.run([sys.executable, "-m", "harness", "exact",
                                   {str(tmp_path / "big")!r}, "--pubkey",
                                   {str(synthetic.SIGNING_PUB)!r}, "--json",
                                   "--workers", "2"], capture_output=True, text=True)
            print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            print(done.stderr[-2000:])
        """)], env=ENV, capture_output=True, text=True, timeout=1800)
    code, peak_kib = done.stdout.split()[:2]
    assert code == "0", done.stdout
    assert int(peak_kib) < 1 << 20, f"peak RSS {int(peak_kib) >> 10} MiB"
