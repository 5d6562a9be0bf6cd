"""docs/ci.md's CI recipes, run end to end with the real ``topp-gate`` (issue 35, item 7).

A git repository stands in for vLLM: its base branch holds vLLM 0.33.0's exported tree and the
``ci/`` files docs/ci.md gives whole, and each pull-request branch changes the kernel file and
also rewrites ``ci/`` (both scripts and ``ci/topp-gate.pub``), as a pull request may. The
GitHub Actions workflow's steps run in order, each job in folders of its own (a workspace, a
runner temp, a home, a TMPDIR) as two runners would: ``${{ ... }}`` expressions replaced by
test values, every checkout a shallow fetch of the commit into the folder the step names (as
``actions/checkout`` does), the artifacts copied from one job's folder to the other's, and
``run:`` steps executed by bash. The Buildkite steps' commands run the same way, as one script
per step in a clone of the pull request's commit, with a stub ``buildkite-agent`` (artifacts
and a secret that only the verifier's queue may read).

pip is the only stand-in: ``python3 -m venv DIR`` makes a folder whose ``pip install`` is
recorded, not run, and whose ``topp-gate`` is this test's own (the real one) behind a watcher:
while ``topp-gate pr`` runs, the watcher looks every half second through every file of the
job's folders, and through the environment, for a private key. In the verifier job it finds
the VSA key while ``verify`` runs (the control that shows it sees keys); in the GPU job,
never.

Three real ``pr`` runs in Triton's interpreter on the small matrix (``pr_small``): GitHub, a
harmless change with the secret (PASS, exit 0); GitHub, a fork's harmful change with no secret
(STOP, exit 1, no VSA); Buildkite, a harmful change with the secret (STOP, exit 1, a FAILED
VSA).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.kernels import sandbox
from harness.pins.pinfile import load_pin_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assets"))
from pr_small import BASE, KEEP, _small_matrix  # noqa: E402

yaml = pytest.importorskip("yaml")
pytestmark = [pytest.mark.sources, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "ci.md").read_text("utf-8")
TOPP_GATE = Path(sys.executable).parent / "topp-gate"
KERNEL = load_pin_file(BASE).data["kernel_path"]
HARMFUL = KEEP.replace("(prob > pivot)", "(prob >= pivot)")
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
VERIFY_QUEUE = "topp_gate_verify"  # the Buildkite queue the test's secret is scoped to
# what each rewritten ci/ script of a pull request does: the job must not end this way
REWRITTEN = {"harmless": "exit 3", "harmful": "exit 0"}


# --- docs/ci.md -----------------------------------------------------------------------------------


def _block(marker: str) -> str:
    found = re.search(rf"<!-- ci:{marker} -->\n```yaml\n(.*?)^```", DOC, re.S | re.M)
    assert found, marker
    return found.group(1)


def _ci_files() -> dict[str, str]:
    files = dict(re.findall(r"<!-- ci:file (\S+) -->\n```sh\n(.*?)^```", DOC, re.S | re.M))
    assert sorted(files) == ["ci/topp-gate-pr.sh", "ci/topp-gate-verify.sh"]
    return files


def _github_workflow() -> dict:
    workflow = yaml.safe_load(_block("github-actions"))
    workflow["on"] = workflow.pop(True)  # YAML 1.1 reads a bare `on` key as true
    return workflow


# --- the repository -------------------------------------------------------------------------------


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(  # noqa: S603
        ["git", "-c", "user.email=ci@test", "-c", "user.name=ci", "-c", "init.defaultBranch=main",
         *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def _exported_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM 0.33.0's tree as ``topp-gate sources export`` writes it: scripts/test's export,
    else one made here from the cache (the wheel the sources marker fetches)."""
    tree = load_pin_file(BASE).data["tree_sha256"]
    made = Path(os.environ.get("TMPDIR") or "/tmp") / "topp-gate-test-export" / tree
    if (made / KERNEL).is_file():
        return made
    out = tmp_path_factory.mktemp("export")
    subprocess.run([str(TOPP_GATE), "sources", "export", str(out), "--pin", str(BASE)],  # noqa: S603
                   check=True, capture_output=True)
    return out / tree


def _keygen(prefix: Path) -> tuple[Path, Path]:
    subprocess.run([str(TOPP_GATE), "keygen", "--out", str(prefix)], check=True,  # noqa: S603
                   capture_output=True)
    return prefix.with_suffix(".key"), prefix.with_suffix(".pub")


@dataclass
class Origin:
    path: Path  # the repository the checkouts fetch from
    base: str  # the base branch's commit
    heads: dict[str, str]  # pull-request branch -> its commit
    vsa_key: Path  # the persistent VSA key (the CI secret), outside every job's folders
    vsa_pub: Path  # its public half, committed on the base as ci/topp-gate.pub
    tool: Path  # a repository standing for topp-gate's own (pip is stubbed)
    tool_commit: str


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> Origin:
    top = tmp_path_factory.mktemp("ci-origin")
    keys = top / "keys"
    keys.mkdir()
    vsa_key, vsa_pub = _keygen(keys / "topp-gate")
    _other_key, other_pub = _keygen(keys / "someone-else")
    repo = top / "vllm"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    shutil.copytree(_exported_tree(tmp_path_factory), repo, dirs_exist_ok=True)
    for path, text in _ci_files().items():
        (repo / path).parent.mkdir(exist_ok=True)
        (repo / path).write_text(text)
        (repo / path).chmod(0o755)
    shutil.copy(vsa_pub, repo / "ci" / "topp-gate.pub")
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "topp-gate.yml").write_text(_block("github-actions"))
    _git("add", "-A", cwd=repo)
    _git("commit", "-qm", "base: vLLM 0.33.0's tree and the ci/ recipe", cwd=repo)
    base = _git("rev-parse", "HEAD", cwd=repo)
    kernel = (repo / KERNEL).read_text()
    assert kernel.count(KEEP) == 1
    changes = {"harmless": kernel + "\n# a comment: the same kernel\n",
               "harmful": kernel.replace(KEEP, HARMFUL)}
    heads = {}
    for branch, new_kernel in changes.items():
        _git("checkout", "-q", "-b", branch, base, cwd=repo)
        (repo / KERNEL).write_text(new_kernel)
        for path in _ci_files():  # the pull request rewrites the scripts...
            (repo / path).write_text(f"#!/usr/bin/env bash\n{REWRITTEN[branch]}\n")
        shutil.copy(other_pub, repo / "ci" / "topp-gate.pub")  # ...and the public key
        _git("commit", "-qam", f"{branch} change; ci/ rewritten", cwd=repo)
        heads[branch] = _git("rev-parse", "HEAD", cwd=repo)
    _git("checkout", "-q", "main", cwd=repo)
    _git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=repo)  # fetch by commit id
    tool = top / "topp-gate"
    tool.mkdir()
    _git("init", "-q", cwd=tool)
    (tool / "README").write_text("stands for topp-gate's repository; pip is stubbed\n")
    _git("add", "-A", cwd=tool)
    _git("commit", "-qm", "topp-gate", cwd=tool)
    _git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=tool)
    return Origin(repo, base, heads, vsa_key, vsa_pub, tool, _git("rev-parse", "HEAD", cwd=tool))


# --- the stand-ins: pip (a venv whose topp-gate is this test's, watched) and buildkite-agent ----

WATCHER = '''#!{python}
"""topp-gate, watched: every call is recorded; while it runs, every file of the job's folders
and the environment are searched for a private key."""
import json, os, subprocess, sys, time
REAL, LOG = {real!r}, {log!r}
MARK = b"PRIVATE " + b"KEY"

def keys_on_disk(root):
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) > 65536:
                    continue
                with open(path, "rb") as handle:
                    if MARK in handle.read():
                        found.append(path)
            except OSError:
                continue
    return found

root = os.environ["CI_SIM_JOB_ROOT"]
args = sys.argv[1:]
env = sorted(k for k, v in os.environ.items() if MARK.decode() in v)
found, scans = set(keys_on_disk(root)), 1
proc = subprocess.Popen([REAL, *args])
while proc.poll() is None:
    time.sleep(0.5)
    found.update(keys_on_disk(root))
    scans += 1
with open(LOG, "a") as handle:
    handle.write(json.dumps({{"args": args, "root": root, "keys": sorted(found), "env": env,
                              "scans": scans, "rc": proc.returncode}}) + "\\n")
sys.exit(proc.returncode)
'''

VENV_PYTHON = '''#!{python}
import json, sys
with open({log!r}, "a") as handle:
    handle.write(json.dumps(sys.argv[1:]) + "\\n")
sys.exit(0 if sys.argv[1:4] == ["-m", "pip", "install"] else 2)
'''

PYTHON3 = '''#!{python}
"""python3 for the jobs: `-m venv DIR` makes the stand-in venv; anything else is python3."""
import os, sys
from pathlib import Path
args = sys.argv[1:]
if args[:2] == ["-m", "venv"] and len(args) == 3:
    bin_dir = Path(args[2]) / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text({venv_python!r})
    (bin_dir / "topp-gate").write_text({watcher!r})
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    sys.exit(0)
os.execv({real_python!r}, [{real_python!r}, *args])
'''

BUILDKITE_AGENT = '''#!{python}
"""buildkite-agent: artifacts kept per step key under STORE; `secret get` answers only on
the verifier's queue."""
import os, shutil, sys
from pathlib import Path
STORE, SECRET, QUEUE = Path({store!r}), Path({secret!r}), {queue!r}
args = sys.argv[1:]
if args[:2] == ["artifact", "upload"]:
    here = Path.cwd()
    for path in here.glob(args[2]):
        if path.is_file():
            dest = STORE / os.environ["BUILDKITE_STEP_KEY"] / path.relative_to(here)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest)
    sys.exit(0)
if args[:2] == ["artifact", "download"]:
    step = STORE / args[args.index("--step") + 1]
    found = [p for p in step.glob(args[2]) if p.is_file()]
    for path in found:
        dest = Path(args[3]) / path.relative_to(step)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest)
    sys.exit(0 if found else 1)
if args[:2] == ["secret", "get"]:
    if os.environ.get("BUILDKITE_AGENT_META_DATA_QUEUE") == QUEUE and SECRET.is_file():
        sys.stdout.write(SECRET.read_text())
        sys.exit(0)
    print(f"secret {{args[2]}} not found", file=sys.stderr)
    sys.exit(1)
sys.exit(2)
'''


@dataclass
class Stubs:
    bin: Path
    watched: Path  # one JSON line per topp-gate call
    pip: Path  # one JSON line per venv python call
    artifacts: Path

    def calls(self) -> list[dict]:
        lines = self.watched.read_text().splitlines() if self.watched.exists() else []
        return [json.loads(line) for line in lines]

    def pip_installs(self) -> list[str]:
        lines = self.pip.read_text().splitlines() if self.pip.exists() else []
        return [json.loads(line)[-1] for line in lines]


def _stubs(tmp_path: Path, secret: Path | None) -> Stubs:
    stub = Stubs(tmp_path / "stub-bin", tmp_path / "topp-gate-calls.jsonl",
                 tmp_path / "pip-calls.jsonl", tmp_path / "artifacts")
    stub.bin.mkdir()
    stub.artifacts.mkdir()
    python = sys.executable
    real_python = shutil.which("python3", path=os.defpath) or python
    watcher = WATCHER.format(python=python, real=str(TOPP_GATE), log=str(stub.watched))
    venv_python = VENV_PYTHON.format(python=python, log=str(stub.pip))
    (stub.bin / "python3").write_text(PYTHON3.format(
        python=python, venv_python=venv_python, watcher=watcher, real_python=real_python))
    (stub.bin / "buildkite-agent").write_text(BUILDKITE_AGENT.format(
        python=python, store=str(stub.artifacts),
        secret=str(secret) if secret else "/nonexistent", queue=VERIFY_QUEUE))
    for tool in stub.bin.iterdir():
        tool.chmod(0o755)
    return stub


def _system_path() -> str:
    """The PATH a runner starts with: the system's, without this test's venv."""
    venv = str(Path(sys.executable).parent)
    return ":".join(p for p in os.environ.get("PATH", os.defpath).split(":") if p and p != venv)


@dataclass
class Job:
    root: Path  # every folder of the job's runner is under this
    steps: list[tuple[str, int | None, str]] = field(default_factory=list)  # name, rc, output

    def rc(self, name_part: str) -> int | None:
        [rc] = [rc for name, rc, _ in self.steps if name_part in name]
        return rc

    def out(self, name_part: str) -> str:
        [out] = [out for name, _, out in self.steps if name_part in name]
        return out


def _folders(root: Path) -> dict[str, Path]:
    folders = {"work": root / "work" / "repo", "temp": root / "temp", "home": root / "home",
               "tmp": root / "tmp"}
    for folder in folders.values():
        folder.mkdir(parents=True)
    return folders


def _runner_env(stubs: Stubs, root: Path, folders: dict[str, Path]) -> dict[str, str]:
    return {"PATH": f"{stubs.bin}:{_system_path()}", "HOME": str(folders["home"]),
            "TMPDIR": str(folders["tmp"]), "LANG": "C.UTF-8", "CI": "true",
            "CI_SIM_JOB_ROOT": str(root)}


# --- GitHub Actions -------------------------------------------------------------------------------


def _expand(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        assert match.group(1) in values, f"an expression the test has no value for: {match[0]}"
        return values[match.group(1)]

    return EXPRESSION.sub(one, text)


def _checkout(dest: Path, repository: Path, ref: str) -> tuple[int, str]:
    """What actions/checkout does by default: a shallow fetch of the commit, detached."""
    dest.mkdir(parents=True)
    _git("init", "-q", cwd=dest)
    _git("remote", "add", "origin", f"file://{repository}", cwd=dest)
    _git("fetch", "-q", "--depth", "1", "origin", ref, cwd=dest)
    _git("checkout", "-q", "--detach", "FETCH_HEAD", cwd=dest)
    return 0, f"checked out {ref} into {dest}"


def _github_job(name: str, stubs: Stubs, top: Path, origin: Origin, values: dict[str, str]
                ) -> Job:
    spec = _github_workflow()["jobs"][name]
    assert spec.get("if", "always()") in ("always()", "${{ !cancelled() }}")
    job = Job(top / f"github-{name}")
    folders = _folders(job.root)
    work, temp = folders["work"], folders["temp"]
    github_path = temp / "github_path"
    github_path.touch()
    values = {**values, "runner.temp": str(temp), "github.workspace": str(work)}
    env = {**_runner_env(stubs, job.root, folders), "GITHUB_ACTIONS": "true",
           "GITHUB_WORKSPACE": str(work), "RUNNER_TEMP": str(temp),
           "GITHUB_PATH": str(github_path)}
    repositories = {"": origin.path, values["vars.TOPP_GATE_REPOSITORY"]: origin.tool}
    failed = False
    for number, step in enumerate(spec["steps"]):
        if not (step.get("if") == "always()" or not failed):
            job.steps.append((step["name"], None, "skipped"))
            continue
        given = {k: _expand(str(v), values) for k, v in step.get("with", {}).items()}
        uses = step.get("uses", "")
        if uses.startswith("actions/checkout@"):
            rc, out = _checkout(work / given["path"], repositories[given.get("repository", "")],
                                given["ref"])
        elif uses.startswith("actions/upload-artifact@"):
            source = Path(given["path"])
            rc, out = 0, "no files found"
            if source.is_dir():
                shutil.copytree(source, stubs.artifacts / given["name"])
                out = f"uploaded {source}"
        elif uses.startswith("actions/download-artifact@"):
            stored = stubs.artifacts / given["name"]
            rc, out = 1, f"artifact {given['name']} not found"
            if stored.is_dir():
                shutil.copytree(stored, given["path"])
                rc, out = 0, f"downloaded {given['path']}"
        elif uses.startswith("mikepenz/action-junit-report@"):
            rc = 0 if Path(given["report_paths"]).is_file() else 1
            out = given["report_paths"]
        else:
            assert "run" in step and not uses, f"a step the test cannot run: {step}"
            added = [line for line in github_path.read_text().splitlines() if line]
            step_env = {**env, "PATH": ":".join([*reversed(added), env["PATH"]])}
            step_env.update({k: _expand(str(v), values) for k, v in step.get("env", {}).items()})
            script = temp / f"step-{number}.sh"
            script.write_text(_expand(step["run"], values))
            done = subprocess.run(  # noqa: S603
                ["bash", "--noprofile", "--norc", "-e", str(script)], cwd=work, env=step_env,  # noqa: S607
                capture_output=True, text=True, timeout=900, check=False)
            rc, out = done.returncode, done.stdout + done.stderr
        job.steps.append((step["name"], rc, out))
        failed = failed or (rc != 0 and not step.get("continue-on-error"))
    return job


def _github_run(tmp_path: Path, origin: Origin, branch: str, secret: str) -> tuple[Job, Job, Stubs]:
    stubs = _stubs(tmp_path, None)
    values = {
        "github.event.pull_request.base.sha": origin.base,
        "github.event.pull_request.head.sha": origin.heads[branch],
        "github.event.pull_request.number": "35",
        "github.server_url": "https://github.example",
        "github.repository": "example/vllm",
        "github.run_id": "7",
        "vars.TOPP_GATE_REPOSITORY": "example/topp-gate",
        "vars.TOPP_GATE_COMMIT": origin.tool_commit,
        "vars.TOPP_GATE_BACKEND": "interpreter",
        "vars.TOPP_GATE_MATRIX": str(_small_matrix(tmp_path)),
        "secrets.TOPP_GATE_VSA_KEY": secret,  # GitHub gives a fork's pull request ""
    }
    gpu = _github_job("gpu", stubs, tmp_path, origin, values)
    verify = _github_job("verify", stubs, tmp_path, origin, values)
    return gpu, verify, stubs


# --- Buildkite ------------------------------------------------------------------------------------


def _buildkite_run(tmp_path: Path, origin: Origin, branch: str) -> tuple[list[Job], Stubs]:
    stubs = _stubs(tmp_path, origin.vsa_key)
    jobs = []
    for step in yaml.safe_load(_block("buildkite"))["steps"]:
        if "command" not in step:  # the annotation plugin's step: Buildkite's own code
            assert "junit-annotate#v2.6.0" in json.dumps(step["plugins"])
            continue
        assert all("$" not in line.replace("$$", "") for line in step["command"]), (
            "a $ Buildkite would interpolate when the pipeline is uploaded")
        job = Job(tmp_path / f"buildkite-{step['key']}")
        folders = _folders(job.root)
        build = folders["work"]
        _git("clone", "-q", f"file://{origin.path}", ".", cwd=build)  # the agent's checkout
        _git("checkout", "-q", "--detach", origin.heads[branch], cwd=build)
        env = {**_runner_env(stubs, job.root, folders), "BUILDKITE": "true",
               "BUILDKITE_PULL_REQUEST": "35", "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main",
               "BUILDKITE_COMMIT": origin.heads[branch], "BUILDKITE_STEP_KEY": step["key"],
               "BUILDKITE_BUILD_CHECKOUT_PATH": str(build),
               "BUILDKITE_BUILD_URL": "https://buildkite.example/vllm/builds/7",
               "BUILDKITE_AGENT_META_DATA_QUEUE": step["agents"]["queue"],
               # the pipeline's environment: the optional variables the scripts read
               "TOPP_GATE_BACKEND": "interpreter",
               "TOPP_GATE_MATRIX": str(_small_matrix(tmp_path)), **step["env"]}
        script = "\n".join(step["command"]).replace("$$", "$")
        done = subprocess.run(  # noqa: S603
            ["bash", "-e", "-c", script], cwd=build, env=env,  # noqa: S607
            capture_output=True, text=True, timeout=900, check=False)
        job.steps.append((step["label"], done.returncode, done.stdout + done.stderr))
        jobs.append(job)
    return jobs, stubs


# --- what every run must show ---------------------------------------------------------------------


def _sandbox_or_skip() -> None:
    try:
        sandbox.probe()
    except sandbox.SandboxError as err:
        pytest.skip(f"no sandbox here: {err}")


def _openssl_or_skip() -> None:
    if not shutil.which("openssl"):
        pytest.skip("no openssl: the verifier checks the VSA key against ci/topp-gate.pub with it")


def _pae(payload_type: str, payload: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _vsa(path: Path, public: Path) -> dict:
    """The VSA's statement, its DSSE signature checked with ``public``."""
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    envelope = json.loads(path.read_text())
    payload = base64.b64decode(envelope["payload"])
    [signature] = envelope["signatures"]
    load_pem_public_key(public.read_bytes()).verify(
        base64.b64decode(signature["sig"]), _pae(envelope["payloadType"], payload))
    return json.loads(payload)


def _names_both_sides(out: str, origin: Origin, branch: str) -> None:
    """The verifier's text names the base and the change by the two commits."""
    base = re.search(r"^  base \(stock side\): vllm==([0-9a-f]{7,})", out, re.M)
    change = re.search(r"^  change \(patched side\): vllm==([0-9a-f]{7,})", out, re.M)
    assert base and change, out
    assert origin.base.startswith(base.group(1))
    assert origin.heads[branch].startswith(change.group(1))
    assert "required and found: --require-base" in out
    assert "--require-change" in out and "--require-isolation (both sides in a sandbox)" in out
    assert "signed with an ephemeral key" in out


def _pins_are_the_commits(out_dir: Path, origin: Origin, branch: str) -> None:
    """``pr`` gated the two commits' committed bytes (clean worktrees)."""
    for side, commit in (("base", origin.base), ("change", origin.heads[branch])):
        pin = json.loads((out_dir / "pins" / f"{side}.json").read_text())
        assert pin["origin"] == {"kind": "source-tree", "commit": commit, "clean": True}


def _site_shows(verified: Path, origin: Origin, branch: str, verdict: str, out: str) -> None:
    name = f"pr-{origin.heads[branch][:12]}"
    assert (verified / "topp-gate-evidence" / "pr" / name / "receipt.dsse.json").is_file()
    assert f"site: [1/1] topp-gate-evidence/pr/{name}: verified, {verdict}" in out
    assert "(0 refused)" in out and "site: --check: every piece verified" in out
    index = (verified / "topp-gate-site" / "index.html").read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(r"<style.*?</style>", "", index,
                                                                flags=re.S)))
    assert "1 bundles verified in this build" in text, text[:2000]
    # the bundles table: the bundle, what it compares (its manifest's words), its verdict
    row = re.search(rf"topp-gate-evidence/pr/{re.escape(name)} pr: stock .*? (PASS|STOP) ",
                    text)
    assert row is not None and row.group(1) == verdict, text[:2000]
    assert "refused" not in text.split("Bundles", 1)[-1]


def _no_key_while_pr_ran(stubs: Stubs, gpu_root: Path) -> None:
    [pr] = [c for c in stubs.calls() if c["args"][0] == "pr"]
    assert pr["root"] == str(gpu_root)
    assert "--ephemeral-key" in pr["args"] and "--unsandboxed" not in pr["args"]
    assert pr["scans"] >= 2 and pr["keys"] == [] and pr["env"] == [], pr
    assert not [c for c in stubs.calls() if c["root"] == str(gpu_root) and c["keys"]]


def _nothing_left(job: Job, *checkouts: Path) -> None:
    """No worktree and no mktemp -d folder outlives the job (nor a key file)."""
    for checkout in checkouts:
        listed = _git("worktree", "list", "--porcelain", cwd=checkout)
        assert listed.count("worktree ") == 1, listed
    assert not list((job.root / "temp").glob("topp-gate.*"))
    assert not list((job.root / "tmp").iterdir())
    mark = b"PRIVATE " + b"KEY"
    assert not [p for p in job.root.rglob("*")
                if p.is_file() and not p.is_symlink() and mark in p.read_bytes()]


# --- the tests ------------------------------------------------------------------------------------


def test_github_a_harmless_change_passes_and_the_base_key_signs_a_passed_vsa(tmp_path, origin):
    """Exit 0 in both jobs even though the pull request rewrote both scripts to `exit 3` and
    replaced ci/topp-gate.pub: the base's scripts ran, and the VSA is signed with the key the
    base's ci/topp-gate.pub names (the verifier refuses any other)."""
    _sandbox_or_skip()
    _openssl_or_skip()
    gpu, verify, stubs = _github_run(tmp_path, origin, "harmless", origin.vsa_key.read_text())
    assert [rc for _, rc, _ in gpu.steps] == [0] * len(gpu.steps), gpu.steps
    assert [rc for _, rc, _ in verify.steps] == [0] * len(verify.steps), verify.steps
    out_dir = verify.root / "temp" / "topp-gate-out"
    _pins_are_the_commits(out_dir, origin, "harmless")
    said = verify.out("Verify the run")
    _names_both_sides(said, origin, "harmless")
    assert "verdict: PASS" in said
    verified = verify.root / "temp" / "topp-gate-verified"
    statement = _vsa(verified / "topp-gate.vsa.json", origin.vsa_pub)
    assert statement["predicate"]["verificationResult"] == "PASSED"
    assert statement["predicate"]["verifier"]["id"] == (
        "https://github.example/example/vllm/actions/runs/7")
    assert (verified / "topp-gate-junit.xml").is_file()
    _site_shows(verified, origin, "harmless", "PASS", said)
    assert (stubs.artifacts / "topp-gate-verified" / "topp-gate.vsa.json").is_file()
    # each job installed topp-gate's reviewed checkout into a venv of its own
    assert stubs.pip_installs() == [f"{gpu.root}/work/repo/topp-gate-src[gpu]",
                                    f"{verify.root}/work/repo/topp-gate-src"]
    _no_key_while_pr_ran(stubs, gpu.root)
    # the control: the same watcher does see the VSA key, in the verifier, while verify runs
    [seen] = [c for c in stubs.calls() if c["args"][0] == "verify"]
    assert [Path(k).name for k in seen["keys"]] == ["vsa.key"], seen
    work = gpu.root / "work" / "repo"
    _nothing_left(gpu, work / "base", work / "change")
    work = verify.root / "work" / "repo"
    _nothing_left(verify, work / "base", work / "change")


def test_github_a_forks_harmful_change_stops_with_no_secret_anywhere(tmp_path, origin):
    """A fork's pull request gets no secrets: the same two jobs run, the harmful change
    exits 1 in both even though its pull request rewrote both scripts to `exit 0`, and the
    verifier says it wrote no VSA; the JUnit file and the site are there."""
    _sandbox_or_skip()
    gpu, verify, stubs = _github_run(tmp_path, origin, "harmful", "")
    assert gpu.rc("Gate the change") == 1, gpu.out("Gate the change")
    assert gpu.out("Gate the change").startswith("STOP")
    assert gpu.rc("Upload the run") == 0
    assert verify.rc("Verify the run") == 1, verify.out("Verify the run")
    said = verify.out("Verify the run")
    assert "topp-gate-verify: no VSA: TOPP_GATE_VSA_KEY is not set" in said
    _names_both_sides(said, origin, "harmful")
    assert "verdict: STOP" in said
    verified = verify.root / "temp" / "topp-gate-verified"
    assert not (verified / "topp-gate.vsa.json").exists()
    junit = (verified / "topp-gate-junit.xml").read_text()
    assert "<failure" in junit
    _site_shows(verified, origin, "harmful", "STOP", said)
    assert verify.rc("Upload the JUnit file") == 0 and verify.rc("Show the rows") == 0
    _pins_are_the_commits(verify.root / "temp" / "topp-gate-out", origin, "harmful")
    _no_key_while_pr_ran(stubs, gpu.root)
    assert all(c["keys"] == [] and c["env"] == [] for c in stubs.calls())  # no key, anywhere
    work = gpu.root / "work" / "repo"
    _nothing_left(gpu, work / "base", work / "change")
    work = verify.root / "work" / "repo"
    _nothing_left(verify, work / "base", work / "change")


def test_buildkite_a_harmful_change_stops_in_both_steps_with_a_failed_vsa(tmp_path, origin):
    """The Buildkite steps: the GPU step on the pull request's checkout fetches the base and
    runs the base's script (the pull request's says `exit 0`), exits 1; the verifier's step
    reads the secret that only its queue may, exits 1 and signs a FAILED VSA."""
    _sandbox_or_skip()
    _openssl_or_skip()
    (gpu, verify), stubs = _buildkite_run(tmp_path, origin, "harmful")
    [(_, gpu_rc, gpu_out)] = gpu.steps
    [(_, verify_rc, said)] = verify.steps
    assert gpu_rc == 1, gpu_out
    assert "STOP: the change broke" in gpu_out
    assert verify_rc == 1, said
    _names_both_sides(said, origin, "harmful")
    stored = stubs.artifacts / "topp-gate-verify" / "topp-gate-verified"
    statement = _vsa(stored / "topp-gate.vsa.json", origin.vsa_pub)
    assert statement["predicate"]["verificationResult"] == "FAILED"
    assert statement["predicate"]["verifier"]["id"] == "https://buildkite.example/vllm/builds/7"
    assert (stored / "topp-gate-junit.xml").is_file()
    assert (stored / "topp-gate-site" / "index.html").is_file()
    assert (stubs.artifacts / "topp-gate-run" / "topp-gate-out" / "ephemeral.pub").is_file()
    assert stubs.pip_installs() == ["/opt/topp-gate[gpu]", "/opt/topp-gate"]
    _no_key_while_pr_ran(stubs, gpu.root)
    [seen] = [c for c in stubs.calls() if c["args"][0] == "verify"]
    assert [Path(k).name for k in seen["keys"]] == ["vsa.key"], seen
    for job in (gpu, verify):
        _nothing_left(job, job.root / "work" / "repo")


def test_the_verifier_refuses_a_vsa_key_other_than_the_bases_public_key(tmp_path, origin):
    """The verify script alone (no ``pr`` run: a stand-in run folder): a secret that is not
    the key of the base's ci/topp-gate.pub exits 2 before anything is verified, and its
    mktemp -d folder (with the key file) is gone."""
    _openssl_or_skip()
    script = textwrap.dedent("""\
        set -euo pipefail
        git clone -q "file://$ORIGIN" base
        mkdir -p out/bundle && touch out/bundle/receipt.dsse.json out/ephemeral.pub
        bash base/ci/topp-gate-verify.sh base base out verified
    """)
    wrong_key, _ = _keygen(tmp_path / "wrong")
    folders = _folders(tmp_path / "job")
    stubs = _stubs(tmp_path, None)
    env = {**_runner_env(stubs, tmp_path / "job", folders), "ORIGIN": str(origin.path),
           "RUNNER_TEMP": str(folders["temp"]), "TOPP_GATE_VSA_KEY": wrong_key.read_text(),
           "PATH": f"{TOPP_GATE.parent}:{_system_path()}"}
    done = subprocess.run(["bash", "-e", "-c", script], cwd=folders["work"], env=env,  # noqa: S603,S607
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is not the key of the base's ci/topp-gate.pub" in done.stderr
    assert not list(folders["temp"].iterdir())
