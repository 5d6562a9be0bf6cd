"""``topp-gate pr``: a pull request against its base, gated in one command. Kernel side.

    base SPEC, change (--patch DIFF or --change SPEC)
      -> pin files written into the output folder (``pins/base.json``, ``pins/change.json``)
      -> a frozen manifest: the newest PR matrix of the family and backend
         (``NEWEST_PR_MATRICES``), the base on the stock side, the change on the patched
         side, the matrix's rule set
      -> one signed bundle (``bundle/``): the two kernel children run at once, or only the
         change's when a verified base side of the same matrix and base pin is kept
      -> verified offline (``verify_bundle``) -> the answer (:class:`PrAnswer`).

Reusing the base. The base side's outputs depend only on the captured inputs (the frozen
cases), the base's pinned files, its dispatch paths, the backend (and its device and
runtime) and the kernel child's code. A base side is kept (``<cache>/pr-base/<key>/``) only
from a bundle that verified in this process: its output files and evidence as that bundle
binds them, with an entry naming the key, the bundle and every file's sha256, signed with
the run's key. When reused it is checked again before anything is judged: the entry's
signature with the current key, its key against this run's, every file's digest and size,
then the runner's own checks (kernel, tree and family hashes the evidence records, every
case covered, every output's sha256) and the captured-input hashes the evidence records
against the inputs built now (``collect_outputs``: ``input_mismatch`` otherwise). The new
bundle carries the earlier child's evidence unchanged (its device, versions and timings:
what ran is what it says) and says in ``environment.base_reused_from`` which verified bundle
the base side came from; ``verify`` checks it as any other bundle. Anything that does not
check is a cache miss and the base runs again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import os
import platform
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__, families
from ..capture.bundle_writer import write_bundle
from ..capture.cases import write_cases
from ..capture.reused_inputs import copy_inputs
from ..capture.run import (
    CaseProgress,
    RunOptions,
    _Clock,
    bundle_content,
    child_isolation,
    claim_output,
    collect_outputs,
    prepare_sides,
    private_copies,
    resolve_backend,
    scratch_prefix,
)
from ..core import dsse
from ..core.bundle import evidence_name, output_name
from ..core.cases_index import check_index
from ..core.digest import sha256_hex
from ..core.errors import HarnessError, UsageError
from ..core.judge import judge_cases
from ..core.limits import workers as worker_count
from ..core.manifest import CaseLayout, Manifest, load_manifest
from ..core.names import SIDES
from ..core.oracle import numpy_available
from ..core.rulesets import rule_set
from ..core.safeio import read_regular_file
from ..core.terminal import printable
from ..kernels.private_tree import PrivateTree
from ..kernels.runner import DEFAULT_NUM_SM, SideResult, _check_outputs, _kill_live_groups, run_side
from ..kernels.sandbox import Isolation
from ..pins.sources import MAX_PATCH_BYTES, Side

# The newest PR matrix of each backend: the one constant to change when a new version is
# frozen (harness/data/matrices/). Its rule set is the one the matrix predeclares.
# pr-interpreter-v4 was measured too slow on a 2-core machine before any mutant ran on it
# (the path observers slow every interpreter launch); its shrunk twin is the one to use.
NEWEST_PR_MATRIX = {"cuda": "pr-cuda-v4", "interpreter": "pr-interpreter-v4-small"}
# The newest PR matrix of each family, per backend: vLLM's Triton kernels (the table above)
# and vLLM's PyTorch path (plain torch: on the CPU its matrix runs it for real, under the
# interpreter backend label; on CUDA with CUDA tensors, as a GPU server without Triton calls
# it); FlashInfer's samplers, renorm and mask paths (CUDA only: FlashInfer JIT-builds its
# kernels with nvcc and has no CPU path). A family without an entry needs --matrix FILE.
NEWEST_PR_MATRICES = {families.DEFAULT: NEWEST_PR_MATRIX,
                      "vllm-pytorch": {"interpreter": "pr-pytorch-v2",
                                       "cuda": "pr-pytorch-cuda-v1"},
                      "flashinfer": {"cuda": "pr-flashinfer-v3"}}
PR_FAMILIES = tuple(NEWEST_PR_MATRICES)
BASE_SCHEMA = "topp-gate/pr-base/v2"
BASE_PAYLOAD_TYPE = "application/vnd.topp-gate.pr-base+json"
_ENTRY, _ENVELOPE, _EVIDENCE = "entry.json", "entry.dsse.json", "evidence.json"
_MAX_ENTRY_BYTES = 1 << 20
_MAX_EVIDENCE_BYTES = 16 << 20
_PIN_SPEC = re.compile(r"\.json$")
EPHEMERAL_PUB = "ephemeral.pub"

Say = Callable[[str], None]


@dataclass(frozen=True)
class PrOptions:
    base: str
    out: Path
    key: Path
    patch: Path | None = None
    change: str | None = None
    backend: str = "auto"
    matrix: str | None = None  # None: NEWEST_PR_MATRIX of the backend
    sources: Path | None = None
    cache: Path | None = None
    base_cache: Path | None = None  # None: <cache>/pr-base
    reuse: bool = True
    workers: int = 0
    unsandboxed: bool = False  # run the children without a sandbox (trusted changes only)
    ephemeral_key: bool = False  # sign with a key made for this run alone (a fork's PR)


@dataclass(frozen=True)
class BrokenRow:
    row: str  # case[row]
    reasons: tuple[str, ...]
    path: str | None  # the change's proven dispatch path for the case (None: not proven)
    kept: str = ""  # "kept: oracle N, base M, change K" (harness.ci.changes)


@dataclass(frozen=True)
class TouchedDefect:
    row: str
    base_faults: tuple[str, ...]
    change_faults: tuple[str, ...]


@dataclass(frozen=True)
class PrAnswer:
    verdict: str
    rows: int
    broken: tuple[BrokenRow, ...]
    run_stops: tuple[str, ...]
    base_defects: int
    touched: tuple[TouchedDefect, ...]
    base_reused_from: str | None  # the bundle whose verified base side was reused
    base_kept: bool  # this run's base side was kept for the next run
    matrix: str
    rules: str
    manifest: Path
    bundle: Path
    keyid: str
    rows_changed: int = 0  # rows whose outputs differ from the base's
    rows_changed_base_right: int = 0  # of those, rows the base got right
    base_failed: str | None = None  # the base side's status and first line when it failed
    report: Path | None = None  # the bundle's report.md
    # the verified statement's predicate, for readers of more than the answer (a replay)
    predicate: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)


# --- inputs -----------------------------------------------------------------------------------


def choose_backend(requested: str) -> str:
    if requested == "interpreter":
        return requested
    if requested not in ("cuda", "auto"):
        raise UsageError(f"unknown backend {requested!r}; use cuda, interpreter or auto")
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        raise UsageError("--backend cuda: torch sees no CUDA device on this machine; gate on "
                         "the CPU with --backend interpreter (or leave --backend out: auto "
                         "picks it) where the family has a CPU matrix: vLLM's Triton kernels "
                         "and PyTorch path; FlashInfer runs on CUDA only")
    return "cuda" if torch.cuda.is_available() else "interpreter"


_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def check_patch_shape(data: bytes) -> None:
    """Refuse (exit 2) a diff that cannot be a change to one pinned file, before anything
    is pinned or downloaded: it must be a unified diff of exactly one file whose hunks are
    whole (every hunk's lines as many as its header says, each starting with ' ', '-' or
    '+'). Whether that file is in the base's pinned set and the diff applies to it is checked
    once the base is pinned (``sources.patch_target``, ``sources.apply_patch``)."""
    kernel = families.get().kernel_path
    lines = data.splitlines()
    files: list[str] = []
    hunks = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ "):
            files.append(lines[i + 1][4:].split(b"\t")[0].strip().decode("utf-8", "replace"))
            i += 2
            continue
        match = _HUNK.match(line)
        if match is None:
            i += 1  # text between files (git's "diff --git", "index" lines, a mail)
            continue
        if not files:
            raise UsageError("patch: a hunk before its '--- a/FILE' and '+++ b/FILE' lines; "
                             "give a unified diff (git diff, diff -u)")
        hunks += 1
        old, new = int(match[2] or b"1"), int(match[4] or b"1")
        i += 1
        while old > 0 or new > 0:
            if i >= len(lines):
                raise UsageError(f"patch: hunk {hunks} is truncated (its header counts more "
                                 "lines than the diff has)")
            body = lines[i]
            tag = body[:1]
            if tag == b"\\":
                i += 1
                continue
            if tag not in (b" ", b"-", b"+") and body != b"":
                raise UsageError(f"patch: hunk {hunks} has a line that is not context, "
                                 f"removed or added (line {i + 1}: "
                                 f"{printable(body[:60].decode('utf-8', 'replace'))})")
            if tag in (b" ", b""):
                old, new = old - 1, new - 1
            elif tag == b"-":
                old -= 1
            else:
                new -= 1
            i += 1
    if len(files) > 1:
        named = ", ".join(printable(f) for f in dict.fromkeys(files))
        raise UsageError(f"patch: it changes {len(files)} files ({named}); 'pr --patch' gates "
                         "a diff of exactly one file of the base's pinned set (the pin file's "
                         f"'files': vLLM's kernel {kernel}, or any other pinned file, such as "
                         "one of FlashInfer's CUDA headers): give a diff of that file alone "
                         f"(in the changed vLLM checkout: git diff -- {kernel}), or the whole "
                         "change as --change TREE")
    if not hunks:
        raise UsageError("patch: no hunks found (expected a unified diff of one pinned file, "
                         f"such as vLLM's kernel file {kernel} or one of FlashInfer's CUDA "
                         "headers)")


def check_change_spec(spec: str) -> None:
    """Refuse (exit 2) a --change that is no release, no pin file, no wheel and no tree,
    before the base is pinned (a release is downloaded then)."""
    from ..pins.pinning import _RELEASE

    if _RELEASE.match(spec) or os.path.lexists(spec):
        return
    raise UsageError(f"--change {printable(spec)}: no such file or folder, and not a "
                     "release (NAME==X.Y.Z); give a release, a pin file, a wheel or a "
                     "source tree")


def default_out(now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return Path("runs") / f"pr-{stamp}-{os.getpid()}"


def read_patch(path: Path) -> bytes:
    try:
        return read_regular_file(path, "patch", MAX_PATCH_BYTES)
    except OSError as err:
        raise UsageError(f"cannot read patch {printable(path)}: {err.strerror or err}") from None


def pin_spec(spec: str, dest: Path, cache: Path | None, say: Say) -> Path:
    """``dest``: the pin file of ``spec``, a pin file (copied byte for byte, so its sha256
    is the one given) or what ``sources pin`` accepts (a release, a wheel, a source tree)."""
    from ..pins.pinfile import parse_pin_file
    from ..pins.pinning import pin

    path = Path(spec)
    if _PIN_SPEC.search(spec) and not path.is_dir():
        if not path.is_file():
            raise UsageError(f"pin file {printable(spec)} does not exist")
        raw = read_regular_file(path, "pin file", _MAX_ENTRY_BYTES)
        parse_pin_file(raw, source=spec)  # a pin file, schema-checked, before it is kept
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(raw)
        return dest
    say(f"pinning {printable(spec)}")
    return pin(spec, dest, cache=cache).path


def ensure_tree(pin_path: Path, cache: Path | None, say: Say,
                sources: Path | None = None) -> None:
    """The pinned tree in the cache (a pinned wheel fetched and verified when missing), so
    ``manifest new`` can read the kernel; a tree pin whose tree is absent is refused later
    by name. With ``sources`` (an export, no network) nothing is fetched: the tree is read
    from there, and a missing one is refused by name when it is read."""
    from ..pins.pinfile import WHEEL, load_pin_file
    from ..pins.sources import cache_root, fetch_wheel, resolve_tree, verified_wheel

    side = load_pin_file(pin_path).side("stock")
    if sources is not None:
        return
    root = cache_root(cache)
    if not (root / "trees" / side.digest).exists() and side.origin is not None \
            and side.origin.get("kind") == WHEEL and verified_wheel(side, root) is None:
        say(f"fetching {side.wheel} (pinned sha256 {side.wheel_sha256[:12]}...)")
        fetch_wheel(side, root)
    with contextlib.suppress(HarnessError):
        resolve_tree(side, cache=root)


def check_importable(pin_path: Path, role: str, backend: str, cache: Path | None,
                     sources: Path | None) -> None:
    """Refuse (exit 2) a side whose kernel cannot be imported on ``backend``, before any
    child runs (issue 37: two exported trees, which lack the compiled extensions' names,
    crashed both sides with ModuleNotFoundError on CUDA and the answer blamed the change).
    On CUDA the kernel imports ``vllm.platforms.cuda``, so every pinned file's unconditional
    module-level import of the package must be a pinned file or one of the pin's
    placeholders; Triton's interpreter uses the CPU platform, and a crash there is
    reported as that side's failure. A family whose child loads chosen functions from the
    file and runs none of its module-level imports (``runs_module_code`` False: vLLM's
    PyTorch path) needs none of them: an exported tree serves it on CUDA too."""
    from ..pins.closure import unmet_imports
    from ..pins.pinfile import load_pin_file
    from ..pins.sources import cache_root, resolve_tree

    if backend != "cuda":
        return
    pin = load_pin_file(pin_path)
    if not families.get(pin.family).runs_module_code:
        return
    side = pin.side("stock")
    try:
        tree = resolve_tree(side, cache=cache_root(cache), sources=sources)
    except HarnessError:
        return  # a missing tree is refused by name where it is read
    files = sorted(side.files)
    package = families.get(pin.family).package
    unmet = unmet_imports(files, files, lambda rel: (tree / rel).read_bytes(), package,
                          compiled=side.placeholders)
    if not unmet:
        return
    module, path, line = unmet[0]
    more = f" (and {len(unmet) - 1} more)" if len(unmet) > 1 else ""
    shipped = sorted({f.split("/")[0][len(package) + 1: -len(".dist-info")] for f in files
                      if f.startswith(f"{package}-") and ".dist-info/" in f})
    release = side.version if side.version != "unknown" else (
        shipped[0] if len(shipped) == 1 else "X.Y.Z")
    dist = families.get(pin.family).distribution
    raise UsageError(
        f"the {role} ({printable(str(pin_path.name))}: {printable(dist)} "
        f"{printable(release if release != 'X.Y.Z' else side.version)}) cannot be imported "
        f"on CUDA: {printable(path)} line "
        f"{line} imports {printable(module)}{more}, which the pinned tree neither holds nor "
        "names as a compiled extension (an exported tree has no .so file and no setup.py); "
        f"give the release instead ({printable(dist)}=={printable(release)}) or its wheel, "
        "or run on the CPU with --backend interpreter")


def check_family(base_pin: Path, change_pin: Path | None, matrix: str | None) -> str:
    """The family of the change; refused when the sides differ, or when no PR matrix holds
    rows for it and no --matrix was given."""
    from ..pins.pinfile import load_pin_file

    family = load_pin_file(base_pin).family
    if change_pin is not None:
        other = load_pin_file(change_pin).family
        if other != family:
            raise UsageError(f"the base pins family {family} and the change {other}; a pull "
                             "request changes one implementation (pin both with the same "
                             "--family)")
    if matrix is None and family not in PR_FAMILIES:
        newest = "; ".join(f"{name}: " + ", ".join(f"{b} {m}" for b, m in by_backend.items())
                           for name, by_backend in NEWEST_PR_MATRICES.items())
        raise UsageError(f"no PR matrix holds rows for family {family}: the PR matrices "
                         f"({newest}) gate {', '.join(PR_FAMILIES)} only; give --matrix FILE "
                         f"(a matrix of {family}'s paths and a rule set that judges them)")
    return family


def newest_pr_matrix(family: str, backend: str, requested: str) -> tuple[str, str]:
    """(backend, matrix): the family's newest PR matrix on ``backend``. A family whose PR
    matrices hold the CPU (interpreter label) only takes it when the backend was left to
    ``auto``; a family whose PR matrices hold CUDA only (FlashInfer) is refused on the CPU,
    in one line naming its CUDA matrix; else a backend without one is refused, naming those
    there are."""
    by_backend = NEWEST_PR_MATRICES[family]
    if backend not in by_backend and requested == "auto" and list(by_backend) == ["interpreter"]:
        backend = "interpreter"
    if backend == "interpreter" and list(by_backend) == ["cuda"]:
        why = ("--backend interpreter was given" if requested == "interpreter"
               else "torch sees no CUDA device on this machine")
        raise UsageError(f"family {family} runs on CUDA only (its kernels are built with nvcc "
                         f"at run time; there is no CPU path) and {why}: its PR matrix "
                         f"{by_backend['cuda']} needs a machine where torch sees a CUDA "
                         "device, with --backend cuda or auto")
    if backend not in by_backend:
        there = ", ".join(f"--backend {b} ({m})" for b, m in by_backend.items())
        raise UsageError(f"no {backend} PR matrix holds rows for family {family}; use "
                         f"{there}, or give --matrix FILE")
    return backend, by_backend[backend]


def matrix_rules(matrix: str, backend: str, family: str = families.DEFAULT) -> str | None:
    """The rule set to freeze: None when the matrix predeclares one (``manifest new`` takes
    it), else the newest PR matrix's (the family's, on that backend, or vLLM Triton's)."""
    from ..capture.manifest_new import load_matrix

    if load_matrix(matrix).get("rules"):
        return None
    newest = NEWEST_PR_MATRICES.get(family, {}).get(backend, NEWEST_PR_MATRIX[backend])
    return str(load_matrix(newest)["rules"])


# --- the base side's cache ----------------------------------------------------------------------


def _runtime(backend: str) -> dict[str, str]:
    """What else decides a side's output bits: the runtime and, on CUDA, the device."""
    found = {"python": platform.python_version()}
    for name in ("torch", "triton", "numpy"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "absent"
    if backend == "cuda":
        import torch

        found["device"] = str(torch.cuda.get_device_name(0))
    return found


def _kernel_side_digest() -> str:
    """The code that makes a side's outputs and evidence: the kernel child, runner, sandbox
    and private copy (``harness/kernels/``), the families and the case builder, as files and
    sha256 (other modules, such as this one, change no output)."""
    root = Path(__file__).resolve().parents[1]
    files = [*root.glob("kernels/*.py"), *root.glob("families/*.py"),
             root / "capture" / "cases.py"]
    listing = sorted((p.relative_to(root).as_posix(), sha256_hex(p.read_bytes()))
                     for p in files)
    return sha256_hex(json.dumps(listing).encode())


def base_key(manifest: Manifest, backend: str, keyid: str) -> dict[str, Any]:
    """Everything the base side's outputs depend on: the frozen cases (the change's paths
    taken out), the backend block, the declared draws of a sampler (when the manifest
    declares them), the base's manifest entry (its pin sha256, digests, family, dispatch
    path and any patch), the backend, the runtime and the child's code;
    and what a reuse must match besides: the rule set that judges it, the whole harness's
    digest and the id of the key that keeps it."""
    from ..core.provenance import HARNESS_TREE, installed_digest

    cases = json.loads(json.dumps(manifest.data["cases"]))
    for case in cases:
        paths = case.pop("paths", None) or {}
        if SIDES[0] in paths:
            case["paths"] = {SIDES[0]: paths[SIDES[0]]}
    stock = {k: v for k, v in manifest.sources["sides"][SIDES[0]].items() if k != "pin"}
    return {
        "schema": BASE_SCHEMA,
        "cases_sha256": sha256_hex(json.dumps(cases, sort_keys=True).encode()),
        "backend_block": dict(manifest.backend),
        **({"sampling": manifest.sampling} if manifest.sampling is not None else {}),
        "base": stock,
        "backend": backend,
        "runtime": _runtime(backend),
        "harness": {"version": __version__, "capture_sha256": _kernel_side_digest(),
                    "tree_sha256": installed_digest(HARNESS_TREE)["sha256"]},
        "rules": manifest.rules,
        "keyid": keyid,
    }


def _key_folder(store: Path, key: Mapping[str, Any]) -> Path:
    return store / sha256_hex(json.dumps(key, sort_keys=True).encode())


def _expected_files(layout: Sequence[CaseLayout]) -> dict[str, int | None]:
    files: dict[str, int | None] = {f"{c.id}.out.f32": 4 * c.batch * c.vocab for c in layout}
    files[_EVIDENCE] = None
    return files


def load_base(store: Path, key: Mapping[str, Any], public_key: Any, side: Side,
              layout: Sequence[CaseLayout], cases_json: Path, out_dir: Path,
              say: Say) -> tuple[SideResult, str] | None:
    """The kept base side for ``key`` copied into ``out_dir``, after every check (module
    docstring), and the bundle it came from; None (``out_dir`` left empty) when there is
    none or it does not check."""
    folder = _key_folder(store, key)
    if not folder.is_dir():
        return None
    try:
        envelope = read_regular_file(folder / _ENVELOPE, "kept base entry", _MAX_ENTRY_BYTES)
        payload = dsse.verify(envelope, public_key, BASE_PAYLOAD_TYPE)
        entry = json.loads(payload)
        expected = _expected_files(layout)
        if entry.get("key") != key or set(entry.get("files", {})) != set(expected):
            raise UsageError("its key or file list is not this run's")
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, size in expected.items():
            data = read_regular_file(folder / name, "kept base file",
                                     size if size is not None else _MAX_EVIDENCE_BYTES)
            if sha256_hex(data) != entry["files"][name] or (size is not None
                                                            and len(data) != size):
                raise UsageError(f"{name} differs from its signed sha256")
            (out_dir / name).write_bytes(data)
        evidence = json.loads((out_dir / _EVIDENCE).read_bytes())
        if not isinstance(evidence, dict):
            raise UsageError("its evidence is not a JSON object")
        problem = _check_outputs(side, cases_json, out_dir, evidence)
        if problem:
            raise UsageError(problem)
    except (HarnessError, OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        say(f"base: the kept base side does not check ({printable(str(err))}); running it")
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        return None
    isolation = entry.get("isolation") or {}
    if not isinstance(isolation, dict) or isolation.get("sandbox") in (None, "none"):
        say("base: the kept base side records no sandbox; running it")
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        return None
    result = SideResult(side=side.name, backend=str(key["backend"]), status="ok", reason="",
                        returncode=0, evidence=evidence, stderr_tail="", out_dir=out_dir,
                        isolation=Isolation(str(isolation["sandbox"]),
                                            str(isolation.get("version") or "unknown"),
                                            tuple(isolation.get("namespaces") or ())))
    return result, str(entry["bundle"])


def keep_base(store: Path, key: Mapping[str, Any], view: Any, private_key: Any,
              layout: Sequence[CaseLayout], isolation: Mapping[str, Any]) -> bool:
    """Keep the base side of a bundle verified in this process (``view``: opened after
    ``verify_bundle``), ``isolation`` being how it ran (the caller keeps only a base that
    ran where no code under test could reach it). Returns whether it was kept (an entry
    already there is left)."""
    from ..capture.signing import sign

    folder = _key_folder(store, key)
    if folder.exists():
        return False
    store.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=store))
    try:
        files: dict[str, str] = {}
        for name in _expected_files(layout):
            raw = (view.raw(evidence_name(SIDES[0])) if name == _EVIDENCE
                   else view.raw(output_name(SIDES[0], name[: -len(".out.f32")])))
            (tmp / name).write_bytes(raw)
            files[name] = sha256_hex(raw)
        entry = {"key": dict(key), "bundle": str(Path(view.bundle_path).resolve()),
                 "bundle_payload_sha256": view.payload_sha256, "files": files,
                 "isolation": dict(isolation)}
        payload = (json.dumps(entry, indent=1, sort_keys=True) + "\n").encode()
        (tmp / _ENTRY).write_bytes(payload)
        (tmp / _ENVELOPE).write_text(json.dumps(sign(payload, private_key, BASE_PAYLOAD_TYPE),
                                                indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, folder)
    except OSError:
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


# --- the run ----------------------------------------------------------------------------------


def run_children(manifest: Manifest, sides: Mapping[str, tuple[Side, Path]],
                 private: Mapping[str, PrivateTree], backend: str, work: Path,
                 layout: Sequence[CaseLayout], clock: _Clock, reused: SideResult | None,
                 say: Say, isolation: Isolation | None = None
                 ) -> tuple[dict[str, SideResult], list[str]]:
    """The sides that must run, at once (one child each, the run's time left as timeout);
    a reused base side is taken as given."""
    num_sm = int(manifest.backend.get("interpreter_sm_count", DEFAULT_NUM_SM))
    running = [name for name in SIDES if not (name == SIDES[0] and reused is not None)]
    run_stops: list[str] = []
    timeout = min(float(manifest.limits["child_timeout_s"]), clock.deadline - time.monotonic())
    if timeout <= 0:
        run_stops.append("run_timeout")
        timeout = 0.001
    say(f"{' and '.join(running)} on {backend} at once ({len(layout)} cases, timeout "
        f"{timeout:.0f} s)" + ("; the base side is reused" if reused is not None else ""))

    def one(name: str) -> SideResult:
        t0 = time.monotonic()
        result = run_side(sides[name][0], private[name], backend, num_sm, work / "cases.json",
                          work / "out" / name, timeout, dispatch=manifest.dispatch(name),
                          paths=manifest.case_dispatch(name), isolation=isolation)
        clock.timings[f"{name}_s"] = round(time.monotonic() - t0, 3)
        return result

    for name in running:
        (work / "out" / name).mkdir(parents=True, exist_ok=True)
    note = " (base reused)" if reused is not None else ""
    with CaseProgress(layout, [work / "out" / n for n in running], say, note), \
            ThreadPoolExecutor(max_workers=len(running)) as pool:
        futures = {name: pool.submit(one, name) for name in running}
        try:
            results = {name: future.result() for name, future in futures.items()}
        except BaseException:  # SIGTERM or ^C: the children go now, so the pool's threads
            _kill_live_groups()  # return instead of waiting out their timeout
            raise
    if reused is not None:
        results[SIDES[0]] = reused
    for name, result in results.items():
        if not result.ok:
            say(f"{name}: {result.status}: {printable(result.reason)}")
    return {name: results[name] for name in SIDES}, run_stops


@dataclass(frozen=True)
class Signer:
    """Where the bundle's key comes from: the key file ``path``, or (``path`` None) a key
    made in memory for this run alone (``--ephemeral-key``). Either is opened only after
    every kernel child has exited (:meth:`open`); before that only the public half kept
    beside a key file is read (:meth:`public_before`), to check a kept base side."""

    path: Path | None
    public: Path | None = None  # the public half's file, when not PREFIX.pub beside

    @property
    def kind(self) -> str:
        return "ephemeral" if self.path is None else "persistent"

    def public_before(self) -> Any:
        from ..capture.signing import public_key_beside, public_key_file

        if self.path is None:
            return None
        return public_key_file(self.public) if self.public else public_key_beside(self.path)

    def open(self) -> Any:
        from ..capture.signing import ephemeral_key, load_private_key

        return ephemeral_key() if self.path is None else load_private_key(self.path,
                                                                          owner_only=True)


@dataclass(frozen=True)
class _Written:
    bundle: Path
    key: dict[str, Any]
    layout: tuple[CaseLayout, ...]
    reused_from: str | None
    base_clean: bool  # the base ran ok here, where no code under test could reach it
    base_isolation: dict[str, Any]
    private_key: Any  # opened after every child had exited


def run_bundle(manifest_path: Path, bundle: Path, signer: Signer, options: PrOptions,
               patch: Path | None, store: Path, isolation: Isolation | None,
               say: Say, inputs_from: Path | None = None) -> _Written:
    """``run``'s phases (harness/capture/run.py) with the base reused when kept and the
    children run at once; the bundle is written and signed exactly as ``run`` writes one,
    with the key opened after the children exited. ``inputs_from``: a bundle of the same
    cases signed with this run's key whose captured inputs are taken instead of built
    (:mod:`harness.capture.reused_inputs`; a mutation run's base)."""
    from ..core.keys import keyid

    started = time.monotonic()
    manifest = load_manifest(manifest_path)
    run_options = RunOptions(manifest=manifest_path, out=bundle, key=options.key,
                             backend=options.backend, sources=options.sources,
                             cache=options.cache, patch=patch, workers=options.workers)
    reuse_key = signer.public_before() if options.reuse else None
    if options.reuse and reuse_key is None:
        say("base: no reuse (" + ("an ephemeral key keeps nothing" if signer.path is None
                                  else f"no public key beside {printable(signer.path)}")
            + ")")
    with claim_output(bundle):
        backend = resolve_backend(options.backend, manifest)
        checked = prepare_sides(manifest, run_options, say)
        clock = _Clock(started, started + float(manifest.limits["run_timeout_s"]))
        key = base_key(manifest, backend, keyid(reuse_key) if reuse_key is not None else "")
        with tempfile.TemporaryDirectory(prefix=scratch_prefix(bundle),
                                         dir=bundle.parent) as scratch, \
                contextlib.ExitStack() as copies:
            work = Path(scratch)
            private = private_copies(checked, copies)
            sides = {name: (side, private[name].tree) for name, (side, _) in checked.items()}
            if inputs_from is not None and reuse_key is not None:
                count = copy_inputs(inputs_from, reuse_key, manifest, work)
                say(f"captured inputs for {len(manifest.cases)} cases taken from "
                    f"{printable(str(inputs_from))} ({count} files, signature and digests "
                    "checked)")
            else:
                say(f"building captured inputs for {len(manifest.cases)} cases")
                write_cases(manifest, work)
            cases_raw = (work / "cases.json").read_bytes()
            layout = check_index(cases_raw, manifest)
            clock.timings["build_cases_s"] = clock.since_start()
            kept = None
            if reuse_key is not None:
                kept = load_base(store, key, reuse_key, checked[SIDES[0]][0],
                                 layout, work / "cases.json", work / "out" / SIDES[0], say)
            results, run_stops = run_children(manifest, sides, private, backend, work,
                                              layout, clock, kept[0] if kept else None, say,
                                              isolation)
            private_key = signer.open()  # every child has exited, its namespace with it
            if reuse_key is not None and keyid(private_key.public_key()) != keyid(reuse_key):
                raise UsageError(f"the public key beside {printable(signer.path)} is not "
                                 "its private key's half; the kept base side was checked "
                                 "with it, so nothing is signed")
            collected = collect_outputs(manifest, layout, work, results)
            if collected.path_failed:
                run_stops.append("split_path_not_taken")
            total = sum(c.batch for c in collected.case_bytes)
            say(f"judging {total} rows against the binary64 oracle")
            t0 = time.monotonic()
            rows = judge_cases(collected.case_bytes, workers=worker_count(options.workers),
                               fast=numpy_available(), rules=manifest.rules)
            clock.timings["judge_s"] = round(time.monotonic() - t0, 3)
            if time.monotonic() > clock.deadline:
                run_stops.append("run_timeout")
            result = rule_set(manifest.rules).verdict(rows, run_stops)
            content = bundle_content(manifest, backend, sides, cases_raw, layout, collected,
                                     results, rows, run_stops, result, clock,
                                     signing=signer.kind)
            if kept is not None:
                isolation_record = content.environment["isolation"]
                isolation_record[SIDES[0]] = {**isolation_record[SIDES[0]],
                                              "reused_from_bundle": True}
                content = dataclasses.replace(content, environment={
                    **content.environment,
                    "base_reused_from": {"bundle": kept[1], "key_sha256": _key_folder(
                        store, key).name}})
            say(f"writing and signing the bundle {printable(bundle)}")
            write_bundle(bundle, content, private_key,
                         max_bytes=int(manifest.limits["max_bundle_bytes"]))
    clean = (kept is None and results[SIDES[0]].ok
             and all(r.isolation.isolated for r in results.values()))
    return _Written(bundle, key, tuple(layout), kept[1] if kept else None, clean,
                    results[SIDES[0]].isolation.record(), private_key)


# --- the answer -------------------------------------------------------------------------------


def _row_bytes(view: Any, side: str, case: Mapping[str, Any], row: int) -> bytes | None:
    width = 4 * int(case["vocab"])
    try:
        data = view.raw(output_name(side, str(case["id"])))
    except HarnessError:
        return None
    return bytes(data[row * width:(row + 1) * width])


def answer_of(view: Any, verified: Any, manifest: Manifest, matrix: str, manifest_path: Path,
              reused_from: str | None, kept: bool) -> PrAnswer:
    """The answer, read only from the bundle verified in this process (``view``: opened
    with the key that verified it; its statement is the one verified)."""
    from ..ci.changes import changes_of_view

    predicate = view.statement["predicate"]
    case_paths = {c["id"]: (c.get("paths") or {}) for c in predicate["cases"]}
    index = {c["id"]: c for c in json.loads(view.raw("cases.json"))["cases"]}
    figures = changes_of_view(view, predicate["rows"],
                              lambda case: case_paths.get(case, {}).get(SIDES[1]))
    broken = [BrokenRow(f.row, f.reasons, f.path, f.kept_text()) for f in figures.broken]
    touched = []
    outputs: dict[str, tuple[bytes | None, ...]] = {}
    for row in predicate["rows"]:
        name = f"{row['case']}[{row['row']}]"
        diagnostics = row.get("diagnostics") or {}
        base_faults = tuple(diagnostics.get("stock_faults") or ())
        if not base_faults:
            continue
        case = index[row["case"]]
        key = f"{case['id']}/{row['row']}"
        if key not in outputs:
            outputs[key] = tuple(_row_bytes(view, s, case, int(row["row"])) for s in SIDES)
        before, after = outputs[key]
        if before is not None and after is not None and before != after:
            touched.append(TouchedDefect(name, base_faults,
                                         tuple(diagnostics.get("patched_faults") or ())))
    verdict = verified.verdict
    defects = verdict.get("base_defects", {}).get("rows", 0)
    return PrAnswer(verdict=str(verdict["verdict"]), rows=int(verified.rows),
                    broken=tuple(broken), run_stops=tuple(predicate.get("run_stops", ())),
                    base_defects=int(defects), touched=tuple(touched),
                    base_reused_from=reused_from, base_kept=kept, matrix=matrix,
                    rules=manifest.rules, manifest=manifest_path, bundle=view.bundle_path,
                    keyid=str(verified.keyid), rows_changed=figures.rows_changed,
                    rows_changed_base_right=figures.rows_changed_base_right,
                    base_failed=figures.base_failed,
                    report=(Path(view.bundle_path) / figures.report
                            if figures.report is not None else None),
                    predicate=predicate)


@dataclass(frozen=True)
class _View:
    """An opened bundle (``open_bundle``) with its path."""

    inner: Any
    bundle_path: Path

    @property
    def statement(self) -> Any:
        return self.inner.statement

    @property
    def payload_sha256(self) -> str:
        return str(self.inner.payload_sha256)

    def raw(self, name: str) -> bytes:
        return bytes(self.inner.raw(name))


# --- the whole command ----------------------------------------------------------------------


def gate_pr(options: PrOptions, say: Say) -> PrAnswer:
    """Pin, freeze, run, verify, answer. Refusals before the bundle leave no output folder."""
    from ..capture.manifest_new import SideSpec, new_manifest
    from ..core.verify import open_bundle, verify_bundle
    from ..pins.sources import cache_root

    if (options.patch is None) == (options.change is None):
        raise UsageError("give the change as --patch DIFF (on the base) or --change SPEC "
                         "(another release, pin file, wheel or source tree), one of them")
    patch_bytes = read_patch(options.patch) if options.patch is not None else None
    if patch_bytes is not None:
        check_patch_shape(patch_bytes)  # before anything is pinned or downloaded
    if options.change is not None:
        check_change_spec(options.change)
    signer = Signer(None if options.ephemeral_key else options.key)
    isolation = child_isolation(options.unsandboxed, signer.path)  # refused now, not later
    backend = choose_backend(options.backend)
    matrix = options.matrix or NEWEST_PR_MATRIX[backend]  # the family's, once it is pinned
    store = options.base_cache or cache_root(options.cache) / "pr-base"
    out = options.out
    made_parent = not out.parent.exists()  # the default runs/ folder, removed if left empty
    try:
        out.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise UsageError(f"{printable(out)} already exists; 'pr' never writes into an "
                         "existing folder") from None
    except OSError as err:
        raise UsageError(f"cannot create {printable(out)}: {err.strerror or err}") from None
    bundle = out / "bundle"
    try:
        base_pin = pin_spec(options.base, out / "pins" / "base.json", options.cache, say)
        change_pin = (pin_spec(options.change, out / "pins" / "change.json", options.cache, say)
                      if options.change is not None else None)
        family = check_family(base_pin, change_pin, options.matrix)
        if options.matrix is None:
            backend, matrix = newest_pr_matrix(family, backend, options.backend)
        for pinned in (base_pin, change_pin):
            if pinned is not None:
                ensure_tree(pinned, options.cache, say, options.sources)
        for role, pinned in (("base", base_pin), ("change", change_pin)):
            if pinned is not None:
                check_importable(pinned, role, backend, options.cache, options.sources)
        patch = None
        if patch_bytes is not None:
            patch = out / "change.diff"
            patch.write_bytes(patch_bytes)
        manifest_path = new_manifest(
            {SIDES[0]: SideSpec(base_pin),
             SIDES[1]: SideSpec(change_pin or base_pin, patch=patch)},
            matrix, out / "pr.json", cache=options.cache,
            rules=matrix_rules(matrix, backend, family),
            sources=options.sources)
        say(f"frozen {printable(manifest_path)} from matrix {printable(matrix)}")
        written = run_bundle(manifest_path, bundle, signer, options, patch, store, isolation,
                             say)
    except BaseException:
        if not bundle.exists():
            shutil.rmtree(out, ignore_errors=True)
            if made_parent:
                with contextlib.suppress(OSError):
                    out.parent.rmdir()  # only when empty
        raise
    private_key = written.private_key
    public_key = private_key.public_key()
    if signer.path is None:
        from ..capture.signing import public_pem

        (out / EPHEMERAL_PUB).write_bytes(public_pem(public_key))
        say(f"signed with an ephemeral key; its public half is {printable(out / EPHEMERAL_PUB)}")
    say("verifying the bundle offline (signature, digests, oracle and gate rerun)")
    verified = verify_bundle(bundle, public_key, frozen_manifest=manifest_path,
                             workers=options.workers or None)
    view = _View(open_bundle(bundle, public_key), bundle)
    if view.payload_sha256 != verified.payload_sha256:  # the answer reads what verified
        from ..core.errors import BindingMismatchError

        raise BindingMismatchError("bundle read again for the answer",
                                   str(verified.payload_sha256), view.payload_sha256)
    kept = False
    if options.reuse and signer.path is not None and written.base_clean:
        kept = keep_base(store, written.key, view, private_key, written.layout,
                         written.base_isolation)
    return answer_of(view, verified, load_manifest(manifest_path), matrix, manifest_path,
                     written.reused_from, kept)
