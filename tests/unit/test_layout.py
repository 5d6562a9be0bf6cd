"""The house shows the boundary (issue 35 item 8): the kernel side's rooms import one way,
and no two modules import each other.

Rooms, left to right: ``core``; ``pins`` and ``families``; ``kernels`` (the only place a
kernel child is started, in its sandbox); ``capture`` (a run's parent: inputs, judge,
bundle, signing); ``pr``; ``mutation`` and ``replay``; ``commands``. A module may import
from its own room or a room to its left, never to its right. Imports inside functions count
too.
"""

from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
ROOMS = {"core": 0, "pins": 1, "families": 1, "kernels": 2, "capture": 3, "pr": 4,
         "mutation": 5, "replay": 5, "commands": 6}


def _module(path: Path) -> str:
    parts = list(path.relative_to(HARNESS.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {t for t in found if t.startswith("harness.")}


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in HARNESS.rglob("*.py")}
    return {name: {t for t in _imports(path) if t in modules and t != name}
            for name, path in modules.items()}


def _room(module: str) -> int | None:
    parts = module.split(".")
    return ROOMS.get(parts[1]) if len(parts) > 1 else None


def test_every_room_imports_only_its_own_or_rooms_to_its_left():
    wrong = sorted(f"{m} -> {t}" for m, targets in _graph().items() for t in targets
                   if _room(m) is not None and _room(t) is not None and _room(t) > _room(m))
    assert wrong == []


def test_no_two_modules_import_each_other():
    graph = _graph()
    pairs = sorted({tuple(sorted((m, t))) for m, targets in graph.items() for t in targets
                    if m in graph.get(t, set()) and not t.startswith(m + ".")
                    and not m.startswith(t + ".")})
    assert pairs == []


def test_only_the_kernels_room_starts_a_kernel_child():
    """The child's module name appears as a string (``python -m harness.kernels.child``) in
    one module only: the runner, which starts every child in its sandbox."""
    starters = sorted(
        _module(p) for p in HARNESS.rglob("*.py")
        if any(isinstance(n, ast.Constant) and n.value == "harness.kernels.child"
               for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))))
    assert starters == ["harness.kernels.runner"]
