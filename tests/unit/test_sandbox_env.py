"""scripts/sandbox_tests.sh's test environment is nix/envs.nix's, no more (issue 38, item 3).

The script runs the suite as the flake's cpu-tests check does, with the venv's packages; it
hides the ones nix/envs.nix's `tests` environment does not provide. Which those are is
computed here from pyproject.toml's gpu and test extras and nix/envs.nix, and must be the
script's `absent` list: a package added to the extras (xmlschema was, issue 38) must be
added to nix/envs.nix or hidden by the script, so no test passes here that cannot import in
the Nix sandbox.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(requirements: list[str]) -> set[str]:
    names = set()
    for requirement in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        assert match, requirement
        names.add(_normalize(match.group(1)))
    return names


def _nix_list(text: str, binding: str) -> set[str]:
    """The `ps.NAME` entries of `BINDING = ps: [ ... ];` in nix/envs.nix."""
    match = re.search(rf"\n  {binding} = ps: \[(.*?)\n  \];", text, re.S)
    assert match, binding
    return {_normalize(n) for n in re.findall(r"ps\.([A-Za-z0-9_-]+)", match.group(1))}


def _provided() -> set[str]:
    envs = (ROOT / "nix" / "envs.nix").read_text()
    tests_env = re.search(
        r"\n      tests = cpuPkgs\.python3\.withPackages \((.*?)\n      \);", envs, re.S)
    assert tests_env, "nix/envs.nix has no `tests` environment"
    body = tests_env.group(1)
    direct = {_normalize(n) for n in re.findall(r"ps\.([A-Za-z0-9_-]+)", body)}
    names = set(direct)
    for helper in ("kernelDeps", "testTools"):
        if f"{helper} ps" in body:
            names |= _nix_list(envs, helper)
    if "topp-gate" in direct:  # its propagated dependencies ([project].dependencies)
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        names |= _requirement_names(project["dependencies"])
    return names


def _script_absent() -> set[str]:
    text = (ROOT / "scripts" / "sandbox_tests.sh").read_text()
    match = re.search(r"^absent=\((.*)\)$", text, re.M)
    assert match, "scripts/sandbox_tests.sh has no absent=(...) line"
    return {_normalize(pair.split(":")[0]) for pair in match.group(1).split()}


def test_the_sandbox_hides_exactly_what_nix_envs_lacks() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    wanted = _requirement_names(extras["gpu"]) | _requirement_names(extras["test"])
    lacking = wanted - _provided()
    assert _script_absent() == lacking, (
        f"nix/envs.nix's tests environment lacks {sorted(lacking)}; scripts/sandbox_tests.sh "
        f"hides {sorted(_script_absent())}: add the package to nix/envs.nix or to `absent`")
    # the verify --junit tests' schema checker and docs/ci.md's YAML reader run in Nix too
    assert {"xmlschema", "pyyaml", "pytest-xdist"} <= _provided()
