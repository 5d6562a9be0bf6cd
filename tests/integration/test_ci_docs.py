"""docs/ci.md's pipelines (issue 29 item 4): the GitHub Actions workflow validates against
SchemaStore's github-workflow.json, the Buildkite pipeline against Buildkite's
pipeline-schema (both vendored, tests/assets/ci-schemas/README.md), and the shared script
they run exits with `topp-gate pr`'s code (1 on STOP) after writing the JUnit file, the VSA
and the site, run here for real with a stand-in `topp-gate` on PATH."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import jsonschema
import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "ci.md").read_text("utf-8")
SCHEMAS = ROOT / "tests" / "assets" / "ci-schemas"


def _block(marker: str) -> str:
    found = re.search(rf"<!-- ci:{marker} -->\n```yaml\n(.*?)^```", DOC, re.S | re.M)
    assert found, marker
    return found.group(1)


def _script() -> str:
    found = re.search(r"```sh\n(#!/usr/bin/env bash\n.*?)^```", DOC, re.S | re.M)
    assert found
    return found.group(1)


def _github_workflow() -> dict:
    workflow = yaml.safe_load(_block("github-actions"))
    workflow["on"] = workflow.pop(True)  # YAML 1.1 reads a bare `on` key as true
    return workflow


def _validator(name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((SCHEMAS / name).read_text("utf-8")))


def test_github_workflow_validates_against_schemastore():
    workflow = _github_workflow()
    _validator("github-workflow.json").validate(workflow)
    steps = workflow["jobs"]["topp-gate"]["steps"]
    assert any("ci/topp-gate-pr.sh" in s.get("run", "") for s in steps)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    for path in ("topp-gate-out/", "topp-gate-site/", "topp-gate-junit.xml"):
        assert path in upload["with"]["path"]


def test_buildkite_pipeline_validates_against_buildkites_schema():
    pipeline = yaml.safe_load(_block("buildkite"))
    _validator("buildkite-pipeline.json").validate(pipeline)
    gate = pipeline["steps"][0]
    assert "bash ci/topp-gate-pr.sh" in gate["command"]
    assert {"topp-gate-out/**/*", "topp-gate-site/**/*", "topp-gate-junit.xml"} <= set(
        gate["artifact_paths"])


def test_the_schemas_do_refuse_a_wrong_pipeline():
    """The vendored schemas bite: a misspelt key and a step of the wrong type are errors."""
    workflow = _github_workflow()
    workflow["jobs"]["topp-gate"]["timeout-minute"] = 60
    assert list(_validator("github-workflow.json").iter_errors(workflow))
    pipeline = yaml.safe_load(_block("buildkite"))
    pipeline["steps"][0]["timeout_in_minutes"] = "an hour"
    assert list(_validator("buildkite-pipeline.json").iter_errors(pipeline))


# The stand-in `topp-gate`: `pr` makes the bundle and exits with $PR_EXIT; `verify` writes
# the files its --junit and --vsa name; `site` makes its --out folder. Calls are logged.
TOOL = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["CALLS"], "a") as f:
    f.write(json.dumps(args) + "\\n")
def value(flag):
    return args[args.index(flag) + 1]
if args[0] == "pr":
    os.makedirs(value("--out") + "/bundle")
    sys.exit(int(os.environ["PR_EXIT"]))
if args[0] == "verify":
    for flag in ("--junit", "--vsa"):
        open(value(flag), "w").close()
    sys.exit(int(os.environ["PR_EXIT"]))
if args[0] == "site":
    os.makedirs(value("--out"))
    sys.exit(0)
sys.exit(2)
"""


@pytest.mark.parametrize("verdict_exit", [0, 1])
def test_the_shared_script_fails_on_stop_after_writing_every_artifact(tmp_path, verdict_exit):
    repo = tmp_path / "vllm"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)  # noqa: S603
    (repo / "kernel.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "."], check=True)  # noqa: S603
    subprocess.run([*git, "commit", "-qm", "base"], check=True)  # noqa: S603
    (repo / "ci").mkdir()
    (repo / "ci" / "topp-gate-pr.sh").write_text(_script())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "topp-gate").write_text(TOOL)
    (bin_dir / "topp-gate").chmod(stat.S_IRWXU)
    runner_tmp = tmp_path / "runner"
    runner_tmp.mkdir()
    calls = tmp_path / "calls.jsonl"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls),
           "PR_EXIT": str(verdict_exit), "TOPP_GATE_SIGNING_KEY": "not a real key",
           "BASE_REF": "HEAD", "RUNNER_TMP": str(runner_tmp), "VERIFIER_ID": "urn:test"}
    done = subprocess.run(["bash", "ci/topp-gate-pr.sh"], cwd=repo, env=env,  # noqa: S603,S607
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == verdict_exit, done.stderr
    verbs = [json.loads(line)[0] for line in calls.read_text().splitlines()]
    assert verbs == ["pr", "verify", "site"]
    for artifact in ("topp-gate-out/bundle", "topp-gate-junit.xml", "topp-gate.vsa.json",
                     "topp-gate-site"):
        assert (repo / artifact).exists(), artifact
    assert not (runner_tmp / "topp-gate.key").exists()  # the key does not outlive the job
