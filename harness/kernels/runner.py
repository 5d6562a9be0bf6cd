"""Kernel runner (parent side): one child process per side, a timeout, crash capture.

:func:`run_side` starts ``python -m harness.kernels.child`` in its own process group with
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

Code under test is untrusted, so every child runs in a sandbox
(:mod:`harness.kernels.sandbox`: its own namespaces, read-only inputs and pinned
tree, an allowlisted environment) unless the caller passes an explicit
:func:`~harness.kernels.sandbox.unsandboxed` isolation. The child writes into an
empty folder of its own (:func:`child_output_dir`); when it has exited (and with it its
whole PID namespace), the parent alone copies what it left into ``out_dir`` (regular files
of the expected names and sizes only, read without following links), hashes the copies
itself and refuses a child that reported other hashes or left anything else behind. The
child never sees ``out_dir``, the other side's folder, the caller's files or keys.

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
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .. import families
from ..core.digest import sha256_file
from ..core.errors import HarnessError, KernelRunError
from ..core.safeio import read_regular_file
from ..core.terminal import printable
from ..pins.sources import Side
from . import sandbox
from .child import FAULT_ENV
from .private_tree import PrivateTree, private_tree
from .sandbox import Isolation

BACKENDS = ("cuda", "interpreter")
DEFAULT_NUM_SM = 132  # the H200's SM count; the interpreter's split count depends on it
Status = Literal["ok", "timeout", "kernel_crash"]
_TAIL = 4000
_MAX_EVIDENCE_BYTES = 64 << 20
EVIDENCE = "evidence.json"
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
    isolation: Isolation = sandbox.unsandboxed("not recorded")

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


def _child_env(backend: str, fault: str | None, pycache: Path, tmp: Path) -> dict[str, str]:
    """The child's whole environment, built from nothing: the allowlisted variables of
    the parent (:func:`sandbox.allowed_env`), no bytecode written and bytecode read only
    from the fresh empty ``pycache`` prefix, the ``harness`` package (and the parent's
    ``PYTHONPATH`` entries) importable, Triton's cache and ``HOME`` under ``tmp`` (the
    sandbox's own ``/tmp``), and the backend's switches."""
    env = sandbox.allowed_env(os.environ)
    env["HOME"] = str(tmp / "home")
    env["TMPDIR"] = str(tmp)
    env["TRITON_CACHE_DIR"] = str(tmp / "triton-cache")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    package_root = str(sandbox.harness_root().parent)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    if backend == "interpreter":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    if fault is not None:
        env[FAULT_ENV] = fault
    return env


def child_output_dir(out_dir: Path) -> Path:
    """The empty folder a child writes into (beside ``out_dir``, which only the parent
    writes): what progress watches while the child runs."""
    return out_dir.parent / f".{out_dir.name}.child"


def _expected_outputs(index: Mapping[str, Any]) -> dict[str, int]:
    """File name -> exact size (evidence: its cap) of what a child may leave."""
    files = {f"{c['id']}.out.f32": 4 * int(c["batch"]) * int(c["vocab"])
             for c in index["cases"]}
    files[EVIDENCE] = _MAX_EVIDENCE_BYTES
    return files


def _input_files(index: Mapping[str, Any], cases_json: Path) -> list[Path]:
    """The captured input files the cases index names (each bound read-only, alone)."""
    names = {str(c[key]) for c in index["cases"] for key in ("logits", "p", "k") if c.get(key)}
    names |= {str((c.get("call") or {})[key]) for c in index["cases"]
              for key in ("padding", "indices_file") if (c.get("call") or {}).get(key)}
    return [(cases_json.parent / name).resolve() for name in sorted(names)]


def collect(drop: Path, out_dir: Path, expected: Mapping[str, int]) -> str:
    """Copy what the exited child left in ``drop`` into ``out_dir`` (regular files of the
    ``expected`` names only, never through a link, each within its size) and remove
    ``drop``. Returns why the child's folder is not acceptable ('' when it is): the folder
    itself replaced (a link: possible only without a sandbox), an entry of another name or
    kind, or a file over its size."""
    problems = []
    try:
        if drop.is_symlink() or not drop.is_dir():
            raise OSError(0, "it was replaced by something that is not a folder")
        entries = sorted(os.scandir(drop), key=lambda e: e.name)
        for entry in entries:
            if entry.name not in expected or not entry.is_file(follow_symlinks=False):
                problems.append(printable(entry.name))
                continue
            try:
                data = read_regular_file(Path(entry.path), "child output",
                                         expected[entry.name], follow_link=False)
            except HarnessError:
                problems.append(printable(entry.name))
                continue
            (out_dir / entry.name).write_bytes(data)
    except OSError as err:
        problems.append(f"(its output folder: {printable(str(err.strerror or err))})")
    finally:
        shutil.rmtree(drop, ignore_errors=True)
    if not problems:
        return ""
    return ("the child left what it may not in its output folder: "
            + ", ".join(problems[:5]) + (" ..." if len(problems) > 5 else "")
            + " (only evidence.json and the case outputs, of their sizes, belong there)")


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
            return (f"case {case['id']}: the output bytes collected differ from the sha256 "
                    "the child reported (outputs changed after they were recorded)")
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
             paths: Mapping[str, str] | None = None,
             isolation: Isolation | None = None) -> SideResult:
    """Run one side's kernel child on a captured cases index; never raises for a kernel fault.

    ``tree`` is the side's private copy (:mod:`harness.kernels.private_tree`), or a
    verified source tree (``harness.pins.sources.resolve_tree``) from which a private
    copy is made now and removed afterwards: the child imports only from a copy. ``repeats``
    adds timed CUDA calls after the observed one. ``fault`` (``abort`` or ``hang``) is for
    the test suite only: it is passed to the child in ``TOPP_GATE_TEST_FAULT`` and recorded
    in the result and in the evidence the child starts with. ``dispatch`` is the path the
    child must prove per case (default: the side's family's, ``split`` for vllm-triton);
    ``paths`` (case id -> path) overrides it for the cases it names (a version 3 manifest's
    per-case ``paths``). Every path must be one the side's family declares.

    ``isolation``: None (the default) runs the child in the sandbox and refuses
    (:class:`KernelRunError`) where none can be made; only an explicit
    :func:`sandbox.unsandboxed` record runs it without one (``--unsandboxed``).
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
    if isolation is None:
        isolation = require_sandbox()
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.iterdir()):
        raise KernelRunError(f"output directory {out_dir} is not empty")
    if isinstance(tree, PrivateTree):
        return _run_child(side, tree, family, backend, num_sm, cases_json, out_dir,
                          timeout_s, repeats, fault, dispatch, case_paths, isolation)
    with private_tree(side.name, side.files, tree, stable=family.family.stable_copy) as copy:
        return _run_child(side, copy, family, backend, num_sm, cases_json, out_dir,
                          timeout_s, repeats, fault, dispatch, case_paths, isolation)


def require_sandbox() -> Isolation:
    """The sandbox's record, or :class:`KernelRunError` saying why none can be made."""
    try:
        return sandbox.probe()
    except sandbox.SandboxError as err:
        raise KernelRunError(f"no sandbox for the kernel child: {err}; code under test "
                             "runs only in one (--unsandboxed runs it without, on trusted "
                             "code alone)") from None


def _run_child(side: Side, copy: PrivateTree, family: families.Entry, backend: str,
               num_sm: int, cases_json: Path, out_dir: Path, timeout_s: float, repeats: int,
               fault: str | None, dispatch: str, paths: dict[str, str],
               isolation: Isolation) -> SideResult:
    if dict(copy.files) != dict(side.files):
        raise KernelRunError(f"{side.name}: the private copy is not of this side's files")
    cases_json = cases_json.resolve()
    index = json.loads(cases_json.read_text(encoding="utf-8"))  # read once, by the parent
    out_dir = out_dir.resolve()
    drop = child_output_dir(out_dir)
    try:
        drop.mkdir(mode=0o700)
    except OSError as err:
        raise KernelRunError(f"cannot make the child's output folder {drop}: "
                             f"{err.strerror or err}") from None
    prefixes = tuple(getattr(family.family, "env_prefixes_removed", ()))
    _, env_removed = scrubbed_env(os.environ, prefixes)
    family_request = family.request()
    request = {
        "side": side.describe(),
        "family": family_request,
        "tree": str(copy.tree),
        "pycache_prefix": str(copy.pycache),
        "backend": backend,
        "num_sm": int(num_sm),
        "cases": str(cases_json),
        "out_dir": str(drop),
        "placeholders": list(side.placeholders),
        "repeats": int(repeats),
        "dispatch": dispatch,
        "paths": {case_id: path for case_id, path in paths.items() if path != dispatch},
        # what the family's isolation took away (names only) and its run-time build folder
        "env_removed": env_removed,
        "build_dir": None if copy.build is None else str(copy.build),
    }
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.request-",
                                     dir=out_dir.parent) as scratch:
        request_path = Path(scratch) / "request.json"
        request_path.write_text(json.dumps(request, indent=2), encoding="utf-8")
        argv = [sys.executable, "-B", "-m", "harness.kernels.child", str(request_path)]
        if isolation.isolated:
            tmp = Path(sandbox.SANDBOX_TMP)
            ro = [copy.tree, copy.pycache, cases_json, *_input_files(index, cases_json),
                  request_path]
            if family_request.get("path"):
                ro.append(Path(str(family_request["path"])).resolve())
            rw = [drop] + ([copy.build] if copy.build is not None else [])
            env = _child_env(backend, fault, copy.pycache, tmp)
            argv = sandbox.command(argv, sandbox.Mounts(tuple(ro), tuple(rw)), env=env,
                                   backend=backend)
            cwd: str | None = None
        else:
            tmp = Path(scratch) / "tmp"
            tmp.mkdir()
            env = _child_env(backend, fault, copy.pycache, tmp)
            cwd = str(tmp)
        try:
            returncode, tail = _wait_child(argv, env, cwd, Path(scratch) / "stderr.txt",
                                           timeout_s)
        except BaseException:  # SIGTERM, ^C: the child is gone, and so is its folder
            shutil.rmtree(drop, ignore_errors=True)
            raise
    problem = collect(drop, out_dir, _expected_outputs(index))
    evidence = _read_evidence(out_dir / EVIDENCE)

    def result(status: Status, reason: str) -> SideResult:
        return SideResult(side=side.name, backend=backend, status=status, reason=reason,
                          returncode=returncode, evidence=evidence, stderr_tail=tail,
                          out_dir=out_dir, injected_fault=fault, isolation=isolation)

    if returncode is None:
        return result("timeout", f"no result within {timeout_s:g} s; process group killed")
    if returncode != 0:
        how = (f"killed by signal {-returncode}" if returncode < 0
               else f"exit status {returncode}")
        if isolation.isolated and 128 < returncode < 192:  # bwrap says 128 + the signal
            how += f" (signal {returncode - 128} inside the sandbox)"
        last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
        return result("kernel_crash", f"child {how}: {last}".strip())
    problem = problem or _check_outputs(side, cases_json, out_dir, evidence)
    return result("kernel_crash", problem) if problem else result("ok", "")


def _wait_child(argv: list[str], env: dict[str, str], cwd: str | None, stderr_path: Path,
                timeout_s: float) -> tuple[int | None, str]:
    """Start ``argv`` in its own process group, wait at most ``timeout_s``, then kill the
    group whatever happened (a sandbox's processes die with it: ``--die-with-parent``).
    Returns the exit status (None: timed out) and the tail of its output."""
    with stderr_path.open("wb") as stderr:
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stderr,
                stderr=stderr, start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()))
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
    return returncode, _tail(stderr_path)


def _read_evidence(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
