"""Kernel runner (parent side): one child process per side, a timeout, crash capture.

:func:`run_side` starts ``python -m harness.capture.kernels.child`` in its own process group with
the environment its backend needs, waits at most ``timeout_s`` seconds, kills the whole
group on a hang, and reads back what the child wrote. The result's status is ``ok`` only
when the child exited 0, its evidence says ``ok``, names this side's kernel hash, covers
every case of the index and every output file has the recorded size and sha256. A hang is
``timeout``; anything else is ``kernel_crash``. Neither is ever a pass.

A child never outlives its run: its process group is killed when :func:`run_side` leaves
by any path (an exception, SIGTERM turned into SystemExit by ``topp-gate run``), at
interpreter exit for any group still registered (``atexit``), and on Linux the child asks
the kernel to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``), which covers a
SIGKILL of the parent. Its scratch (request, stderr) lives beside its output folder.

A family may declare environment prefixes its child must never see
(``env_prefixes_removed``; FlashInfer: ``FLASHINFER_``, which would move its JIT cache,
cubin folder or AOT switch): every such variable is removed from the child's environment,
and the request names them (never their values) for the evidence (``env_removed``). A
stable copy's build folder is passed as ``build_dir``. Other families are unaffected.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...core.digest import sha256_file
from ...core.errors import KernelRunError
from .. import families
from ..private_tree import PrivateTree, private_tree
from ..sources import Side
from .child import FAULT_ENV

BACKENDS = ("cuda", "interpreter")
DEFAULT_NUM_SM = 132  # the H200's SM count; the interpreter's split count depends on it
Status = Literal["ok", "timeout", "kernel_crash"]
_TAIL = 4000
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
_LIVE_GROUPS: set[int] = set()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def _kill_live_groups() -> None:
    """At interpreter exit, no kernel child of this process is left running."""
    for pgid in list(_LIVE_GROUPS):
        _kill_group(pgid)
    _LIVE_GROUPS.clear()


def _die_with_parent(parent: int) -> Callable[[], None]:
    """``preexec_fn`` of a child: SIGKILL it when its parent dies (Linux), and exit at once
    if the parent is already gone."""
    def hook() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)
    return hook


@dataclass(frozen=True)
class SideResult:
    side: str
    backend: str
    status: Status
    reason: str  # one line; empty when ok
    returncode: int | None
    evidence: dict[str, Any] | None
    stderr_tail: str
    out_dir: Path
    injected_fault: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def scrubbed_env(env: Mapping[str, str], prefixes: tuple[str, ...]
                 ) -> tuple[dict[str, str], list[str]]:
    """``env`` without every variable whose name starts with one of ``prefixes`` (a family's
    ``env_prefixes_removed``: FlashInfer's ``FLASHINFER_``), and the names removed, sorted
    (never their values)."""
    removed = sorted(name for name in env if name.startswith(prefixes)) if prefixes else []
    return {k: v for k, v in env.items() if k not in removed}, removed


def _child_env(backend: str, fault: str | None, pycache: Path,
               removed_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """The child's environment: no bytecode written, and bytecode read only from the fresh
    empty ``pycache`` prefix (never from a ``__pycache__`` of the sources or of harness);
    no variable of the family's ``removed_prefixes``."""
    env, _ = scrubbed_env(os.environ, removed_prefixes)
    env.pop(FAULT_ENV, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    if backend == "interpreter":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env.pop("TRITON_INTERPRET", None)
    if fault is not None:
        env[FAULT_ENV] = fault
    return env


def _check_outputs(side: Side, cases_json: Path, out_dir: Path,
                   evidence: dict[str, Any] | None) -> str:
    """Why the child's results are unusable, or '' when they are complete and consistent."""
    if evidence is None:
        return "the child wrote no readable evidence.json"
    if evidence.get("status") != "ok":
        return str(evidence.get("error") or f"child status {evidence.get('status')!r}")
    if evidence.get("kernel_sha256") != side.kernel_sha256:
        return (f"child imported kernel {evidence.get('kernel_sha256')}, "
                f"pinned {side.kernel_sha256}")
    if evidence.get("tree_sha256") != side.digest:
        return (f"child imported tree {evidence.get('tree_sha256')}, pinned {side.digest}")
    if evidence.get("family") != side.family:
        return f"child ran family {evidence.get('family')!r}, pinned {side.family!r}"
    index = json.loads(cases_json.read_text(encoding="utf-8"))
    records = evidence.get("cases", [])
    if [c["id"] for c in index["cases"]] != [r.get("id") for r in records]:
        return "evidence does not cover the cases of the index in order"
    for case, record in zip(index["cases"], records, strict=True):
        path = out_dir / f"{case['id']}.out.f32"
        if not path.is_file() or path.stat().st_size != 4 * case["batch"] * case["vocab"]:
            return f"case {case['id']}: output file missing or of the wrong size"
        if sha256_file(path) != record.get("output_sha256"):
            return f"case {case['id']}: output bytes differ from the recorded sha256"
    return ""


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-_TAIL:].decode("utf-8", "replace")


def run_side(side: Side, tree: Path | PrivateTree, backend: str, num_sm: int,
             cases_json: Path, out_dir: Path, timeout_s: float, *, repeats: int = 0,
             fault: str | None = None, dispatch: str | None = None,
             paths: Mapping[str, str] | None = None) -> SideResult:
    """Run one side's kernel child on a captured cases index; never raises for a kernel fault.

    ``tree`` is the side's private copy (:mod:`harness.capture.private_tree`), or a
    verified source tree (``harness.capture.sources.resolve_tree``) from which a private
    copy is made now and removed afterwards: the child imports only from a copy. ``repeats``
    adds timed CUDA calls after the observed one. ``fault`` (``abort`` or ``hang``) is for
    the test suite only: it is passed to the child in ``TOPP_GATE_TEST_FAULT`` and recorded
    in the result and in the evidence the child starts with. ``dispatch`` is the path the
    child must prove per case (default: the side's family's, ``split`` for vllm-triton);
    ``paths`` (case id -> path) overrides it for the cases it names (a version 3 manifest's
    per-case ``paths``). Every path must be one the side's family declares.
    """
    if backend not in BACKENDS:
        raise KernelRunError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    if fault not in (None, "abort", "hang"):
        raise KernelRunError(f"unknown test fault {fault!r}")
    family = families.entry(side.family)
    if dispatch is None:
        dispatch = family.family.default_dispatch
    case_paths = dict(paths or {})
    unknown = sorted({dispatch, *case_paths.values()} - set(family.family.dispatch_paths))
    if unknown:
        raise KernelRunError(f"family {family.family.id} has no dispatch path "
                             f"{', '.join(unknown)} (its paths: "
                             f"{', '.join(family.family.dispatch_paths)})")
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.iterdir()):
        raise KernelRunError(f"output directory {out_dir} is not empty")
    if isinstance(tree, PrivateTree):
        return _run_child(side, tree, family, backend, num_sm, cases_json, out_dir,
                          timeout_s, repeats, fault, dispatch, case_paths)
    with private_tree(side.name, side.files, tree, stable=family.family.stable_copy) as copy:
        return _run_child(side, copy, family, backend, num_sm, cases_json, out_dir,
                          timeout_s, repeats, fault, dispatch, case_paths)


def _run_child(side: Side, copy: PrivateTree, family: families.Entry, backend: str,
               num_sm: int, cases_json: Path, out_dir: Path, timeout_s: float, repeats: int,
               fault: str | None, dispatch: str, paths: dict[str, str]) -> SideResult:
    if dict(copy.files) != dict(side.files):
        raise KernelRunError(f"{side.name}: the private copy is not of this side's files")
    cases_json = cases_json.resolve()
    prefixes = tuple(getattr(family.family, "env_prefixes_removed", ()))
    _, env_removed = scrubbed_env(os.environ, prefixes)
    request = {
        "side": side.describe(),
        "family": family.request(),
        "tree": str(copy.tree),
        "pycache_prefix": str(copy.pycache),
        "backend": backend,
        "num_sm": int(num_sm),
        "cases": str(cases_json),
        "out_dir": str(out_dir.resolve()),
        "placeholders": list(side.placeholders),
        "repeats": int(repeats),
        "dispatch": dispatch,
        "paths": {case_id: path for case_id, path in paths.items() if path != dispatch},
        # what the family's isolation took away (names only) and its run-time build folder
        "env_removed": env_removed,
        "build_dir": None if copy.build is None else str(copy.build),
    }
    # absolute: the child runs with the scratch folder as its working directory
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.child-",
                                     dir=out_dir.resolve().parent) as scratch:
        request_path = Path(scratch) / "request.json"
        request_path.write_text(json.dumps(request, indent=2), encoding="utf-8")
        stderr_path = Path(scratch) / "stderr.txt"
        with stderr_path.open("wb") as stderr:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-B", "-m", "harness.capture.kernels.child",
                     str(request_path)],
                    cwd=scratch, env=_child_env(backend, fault, copy.pycache, prefixes),
                    stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                    start_new_session=True, preexec_fn=_die_with_parent(os.getpid()),
                )
            except OSError as err:
                raise KernelRunError(f"cannot start the kernel child: {err}") from None
            _LIVE_GROUPS.add(proc.pid)
            try:
                returncode: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                returncode = None
            finally:  # any exit path: the child's whole group goes (hang, SIGTERM, error)
                _kill_group(proc.pid)
                proc.wait()
                _LIVE_GROUPS.discard(proc.pid)
        tail = _tail(stderr_path)
    evidence = _read_evidence(out_dir / "evidence.json")

    def result(status: Status, reason: str) -> SideResult:
        return SideResult(side=side.name, backend=backend, status=status, reason=reason,
                          returncode=returncode, evidence=evidence, stderr_tail=tail,
                          out_dir=out_dir, injected_fault=fault)

    if returncode is None:
        return result("timeout", f"no result within {timeout_s:g} s; process group killed")
    if returncode != 0:
        how = (f"killed by signal {-returncode}" if returncode < 0
               else f"exit status {returncode}")
        last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
        return result("kernel_crash", f"child {how}: {last}".strip())
    problem = _check_outputs(side, cases_json, out_dir, evidence)
    return result("kernel_crash", problem) if problem else result("ok", "")


def _read_evidence(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
