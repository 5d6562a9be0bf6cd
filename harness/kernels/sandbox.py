"""The sandbox a kernel child runs in: Linux namespaces made by bubblewrap (``bwrap``).

Code under test is untrusted: a change's own kernel file is imported by the child, so
whatever it does at import or call time runs there. This module alone decides what such a
process can see. :func:`command` wraps the child's argv in ``bwrap`` with

* new user, mount, PID, IPC, network, UTS and cgroup namespaces (``--unshare-all``, the
  user namespace required, not tried), every capability dropped, a new session (no
  ``TIOCSTI`` into the parent's terminal), and ``--die-with-parent``;
* a root that is an empty tmpfs holding only: the system's read-only folders (:data:`SYSTEM`:
  ``/usr``, the ``lib`` and ``bin`` folders, ``/opt``, ``/sys``, and a Nix host's
  ``/nix/store``, which every user may read anyway), the few ``/etc`` files the
  dynamic loader and Python need (:data:`ETC_FILES`), the Python installation and its
  package folders (:func:`python_roots`), the ``harness`` package, the side's private
  pinned tree, the captured inputs, all read-only; one empty writable output folder (and, for
  a family that builds at run time, its own build folder); a private ``/proc`` that shows
  only the sandbox's processes, a minimal ``/dev`` and a tmpfs ``/tmp``;
* on the CUDA backend, the GPU's device nodes (``/dev/nvidia*``; device files must be opened
  read-write for their ioctls, so they are bound with ``--dev-bind``) and the driver's
  library folder of a NixOS host (``/run/opengl-driver``), read-only;
* an environment built from nothing (``--clearenv``): :data:`ENV_ALLOWLIST` of the parent's
  variables, then what the runner sets. Never the key, the parent's home, the caches, the
  other side's folder or the bundle being written: they are simply not in the sandbox.

Why bubblewrap and not util-linux ``unshare``: ``unshare`` makes the namespaces but leaves
the whole file system in view; hiding it means scripting bind mounts and ``pivot_root``
by hand inside the new namespace, which is exactly what bubblewrap (Flatpak's sandbox,
Debian's ``bubblewrap`` package, about 2,000 lines of C) does, declaratively and unprivileged,
with ``--die-with-parent`` and ``--clearenv`` besides. It runs as root (the H200 machine) and
as an ordinary user (a laptop, a CI runner) wherever unprivileged user namespaces are on.

When the child exits, its PID namespace's init exits and the kernel kills every process
left in it: a grandchild, even in a session of its own, never outlives the child. The
runner then collects the output folder (:mod:`harness.kernels.runner`).

:func:`probe` says whether a sandbox can be made here (bwrap found and a trial sandbox
ran), once per process; :class:`Isolation` is what the evidence records of each side.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BWRAP = "bwrap"
NAMESPACES = ("user", "mount", "pid", "ipc", "net", "uts", "cgroup")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sys",
          "/nix/store")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
             "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime")
GPU_DRIVER_DIRS = ("/run/opengl-driver",)
GPU_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps")
# what of the parent's environment a child may see (values as the parent has them); the
# runner then sets the backend's and Python's own variables
ENV_ALLOWLIST = ("LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
                 "LD_LIBRARY_PATH", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CC", "CXX")
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_TMP = "/tmp"  # noqa: S108 (the sandbox's own empty tmpfs, no one else's)
SANDBOX_HOME = f"{SANDBOX_TMP}/home"


class SandboxError(Exception):
    """No sandbox can be made here (the runner turns this into a one-line refusal)."""


@dataclass(frozen=True)
class Isolation:
    """How one side's child ran: in a bubblewrap sandbox (``sandbox`` = ``bubblewrap``,
    its version and the namespaces made) or not (``none`` and why)."""

    sandbox: str
    version: str | None = None
    namespaces: tuple[str, ...] = ()
    reason: str = ""

    @property
    def isolated(self) -> bool:
        return self.sandbox != "none"

    def record(self) -> dict[str, Any]:
        if not self.isolated:
            return {"sandbox": "none", "reason": self.reason}
        return {"sandbox": self.sandbox, "version": self.version,
                "namespaces": list(self.namespaces), "environment": "allowlist",
                "filesystem": "read-only inputs and tree, one empty output folder"}


def unsandboxed(reason: str) -> Isolation:
    return Isolation("none", reason=reason)


@functools.cache
def probe() -> Isolation:
    """A bubblewrap sandbox as :func:`command` makes it, tried once in this process; raises
    :class:`SandboxError` with the reason when none can be made."""
    exe = shutil.which(BWRAP)
    if exe is None:
        raise SandboxError("bubblewrap (bwrap) is not installed (Debian: apt-get install "
                           "bubblewrap; Nix: pkgs.bubblewrap)")
    try:
        version = subprocess.run([exe, "--version"], capture_output=True, text=True,
                                 timeout=30, check=False).stdout.split()[-1:]
        trial = subprocess.run(
            command([sys.executable, "-c", "import os; print(os.getpid())"], Mounts(),
                    env={}, backend="interpreter", exe=exe),
            capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        raise SandboxError(f"bubblewrap could not start: {err}") from None
    if trial.returncode != 0 or trial.stdout.strip() != "2":
        last = (trial.stderr.strip().splitlines() or [f"exit status {trial.returncode}"])[-1]
        raise SandboxError(f"bubblewrap cannot make namespaces here: {last}")
    return Isolation("bubblewrap", version[0] if version else "unknown", NAMESPACES)


@dataclass(frozen=True)
class Mounts:
    """What a child sees besides the system: ``ro`` folders and files read-only, ``rw``
    folders writable (its output folder, a family's build folder), each at its own path."""

    ro: tuple[Path, ...] = ()
    rw: tuple[Path, ...] = field(default=())


def python_roots(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The folders this Python runs from and imports from: the installation (base and
    virtual environment), its site-packages folders and the ``PYTHONPATH`` entries the
    caller set (``/tmp/site`` of carried wheels, say). Never the working directory, ``/``,
    the home folder, a repository checkout of ``harness`` or a folder above one of them (the
    ``harness`` package is bound by itself: :func:`harness_root`)."""
    env = os.environ if environ is None else environ
    roots = {Path(sys.base_prefix), Path(sys.prefix), Path(sys.exec_prefix),
             Path(sys.executable).parent}
    entries = [*site.getsitepackages(), site.getusersitepackages(),
               *env.get("PYTHONPATH", "").split(os.pathsep)]
    roots.update(Path(e) for e in entries if e and os.path.isabs(e) and os.path.isdir(e))
    return _outermost(_bindable(roots))


def _bindable(paths: Iterable[Path]) -> set[Path]:
    """``paths`` (and where each resolves to) less ``/``, the home folder, the checkout
    holding ``harness`` and any folder above one of them."""
    never = {Path("/"), Path.home().resolve(), harness_root().parent}
    kept = set()
    for root in paths:
        for path in (root, root.resolve()):
            if not any(n.is_relative_to(path) for n in never):
                kept.add(path)
    return kept


def harness_root() -> Path:
    """The ``harness`` package folder (bound alone, never the checkout around it)."""
    return Path(__file__).resolve().parents[1]


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without any that lies inside another (one bind covers it)."""
    ordered = sorted({Path(p) for p in paths}, key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in ordered:
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def exposed_roots(extra: Sequence[Path] = ()) -> list[Path]:
    """Every folder a child sees outside its own output folder (read-only): the system's,
    Python's, the harness package and ``extra``."""
    system = [Path(p) for p in (*SYSTEM, *ETC_FILES) if os.path.exists(p)]
    return _outermost([*system, *python_roots(), harness_root(), *extra])


def exposes(path: Path, extra: Sequence[Path] = ()) -> Path | None:
    """The bound folder through which a child would see ``path`` (None: it cannot)."""
    target = Path(os.path.abspath(path))
    real = target.resolve()
    for root in exposed_roots(extra):
        if target.is_relative_to(root) or real.is_relative_to(root):
            return root
    return None


def _bind(flag: str, path: Path | str) -> list[str]:
    return [flag, str(path), str(path)]


def command(argv: Sequence[str], mounts: Mounts, *, env: Mapping[str, str], backend: str,
            exe: str | None = None, chdir: str = SANDBOX_TMP) -> list[str]:
    """The ``bwrap`` argv that runs ``argv`` in a sandbox (module docstring). ``bwrap`` is
    named by its absolute path, found on this process's PATH: the child is started with the
    sandbox's environment, whose PATH holds only folders the sandbox shows, so a bwrap
    unpacked elsewhere (a carried ``.deb``) would not be found by name."""
    args = [exe or shutil.which(BWRAP) or BWRAP, "--unshare-all", "--unshare-user",
            "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--clearenv",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", SANDBOX_TMP]
    for name in SYSTEM:
        if os.path.exists(name):
            args += _bind("--ro-bind", name)
    for name in ETC_FILES:
        args += _bind("--ro-bind-try", name)
    for path in [*python_roots(), harness_root(), *mounts.ro]:
        args += _bind("--ro-bind", path)
    libraries = [Path(e) for e in env.get("LD_LIBRARY_PATH", "").split(os.pathsep)
                 if e and os.path.isabs(e) and os.path.isdir(e)]
    for path in _outermost(_bindable(libraries)):
        args += _bind("--ro-bind", path)
    if backend == "cuda":
        for pattern in GPU_DEVICE_GLOBS:
            for node in sorted(glob.glob(pattern)):
                args += _bind("--dev-bind", node)
        for name in GPU_DRIVER_DIRS:
            args += _bind("--ro-bind-try", name)
    for path in mounts.rw:
        args += _bind("--bind", path)
    for name, value in sorted(env.items()):
        args += ["--setenv", name, value]
    args += ["--chdir", chdir, "--", *argv]
    return args


def allowed_env(parent: Mapping[str, str]) -> dict[str, str]:
    """The parent's variables a child may see (:data:`ENV_ALLOWLIST`), ``HOME`` and
    ``TMPDIR`` inside the sandbox, and a ``PATH`` of the parent's entries that the sandbox
    shows (a Nix wrapper's tools in the store, a virtual environment's ``bin``: Triton's
    C compiler, FlashInfer's ninja) followed by the system's."""
    env = {name: parent[name] for name in ENV_ALLOWLIST if name in parent}
    roots = exposed_roots()
    shown = [e for e in parent.get("PATH", "").split(os.pathsep)
             if e and os.path.isabs(e) and any(Path(e).is_relative_to(r) for r in roots)]
    path = list(dict.fromkeys([*shown, *SANDBOX_PATH.split(os.pathsep)]))
    env.update(PATH=os.pathsep.join(path), HOME=SANDBOX_HOME, TMPDIR=SANDBOX_TMP)
    return env
