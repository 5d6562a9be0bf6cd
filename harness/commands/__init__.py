"""One module per CLI verb. Each defines ``register(subparsers)`` and ``run(args) -> int``.

Modules are imported lazily by :mod:`harness.cli`, so ``topp-gate verify`` never imports
the kernel side (torch, triton, vLLM).
"""

from __future__ import annotations

import importlib.util

from ..core.errors import UsageError

GPU_EXTRA = ("torch", "triton", "numpy", "rich")


def gpu_extra_hint() -> str:
    """The command that installs the gpu extra, as it works when pasted
    (:func:`harness.install_hint.install_command`)."""
    from ..install_hint import install_command

    return install_command("gpu")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def gpu_extra_missing(err: ModuleNotFoundError) -> UsageError | None:
    """The usage error for an import of a gpu-extra module that failed, else None."""
    if (err.name or "").split(".")[0] in GPU_EXTRA:
        return UsageError(f"this command needs the gpu extra: {gpu_extra_hint()} "
                          f"(no module named {err.name!r})")
    return None


def require_gpu_extra(verb: str) -> None:
    """Refuse (exit 2, one line) a kernel-side verb on an install without the gpu extra,
    before anything is imported or started."""
    missing = [name for name in GPU_EXTRA if not _installed(name)]
    if missing:
        raise UsageError(f"'topp-gate {verb}' needs the gpu extra: {gpu_extra_hint()} "
                         f"({', '.join(missing)} not installed)")
