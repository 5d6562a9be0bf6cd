"""``topp-gate verify`` shows a reviewer both sides and holds them to what the reviewer requires
(issue 35, items 4 and 5), on real signed bundles:

- the committed H200 ``pr`` evidence (evidence/pr/, key 5, manifest version 3: each side by pin
  file; the harmful change's base reused from the harmless run's bundle);
- the committed interpreter smoke bundle (evidence/bundles/, a version 1 manifest: each side's
  wheel pinned inline; base vLLM 0.30.0, change 0.33.0);
- synthetic bundles signed with the test-only key whose receipts record each side's isolation
  and the signing key's kind (the fields new bundles carry).

Without the reviewer's flags a contributor could pick any base and verify PASS; with them a
bundle of another base, change or patch is refused (exit 4, one line saying what was required
and what the bundle holds) before its rows are rerun.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from harness.capture.bundle_writer import write_bundle
from harness.capture.signing import load_private_key, write_keypair
from harness.cli import main
from harness.core.errors import EXIT_OK, EXIT_STOP, EXIT_USAGE, EXIT_VERIFY
from harness.mutation.mutate import mutation_folder

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "evidence" / "pr" / "pr-cuda-v4-h200-20261203.tar.xz"
PR_KEY = str(ROOT / "evidence" / "keys" / "topp-gate-evidence-5.pub")
SMOKE = ROOT / "evidence" / "bundles" / "smoke-interpreter-20261129"
SMOKE_KEY = str(ROOT / "evidence" / "keys" / "topp-gate-evidence.pub")
PINS = ROOT / "evidence" / "pins"
VSA_SCHEMA = json.loads((ROOT / "tests" / "assets" / "ci-schemas" /
                         "slsa-vsa-v1.schema.json").read_text())
sys.path.insert(0, str(ROOT / "tests" / "assets"))
import synthetic  # noqa: E402

# what the committed pr bundles' frozen pr.json pins (read from it, here only to be named)
BASE_PIN_SHA256 = "017fbef5b25a8b59f22c8fc7ba4722c17b434d0a4bd9bc82f21b62e4ae60d118"
BASE_TREE = "2904e049a0ce2184d5236f64f627ee91d4355b41224c56145cd0fc89cf9ba9a9"
BASE_KERNEL = "6264a524884274824b65c3a3a91d4d34418561cde566c31879cb394acd85f2ef"
HARMFUL_PATCH = "40c638f52624aa404bf32c3df56ad3e5f3c62a2b6eb3a3a7550ee2e4c6653196"
HARMFUL_KERNEL = "086083e564438891090524ddbde52b767cd673d8160a70a05c59d36dacadbcf4"
# the smoke bundle's version 1 manifest: wheels pinned inline, the kernel diff frozen
SMOKE_STOCK_WHEEL = "ef52ee58c410ead0b8afb190838fa4cbcb52075596f67862a03859d984966ac4"
SMOKE_DIFF = "a578020428c5456e9d140cde3b141049d00789b941b004b3940e1af209d70736"


@pytest.fixture(scope="module")
def pr() -> Iterator[Path]:
    """The committed archive's two ``pr`` results folders (pr-harmless, pr-harmful)."""
    with mutation_folder(ARCHIVE) as results:
        yield results


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["verify", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one error line of a refused verification (exit 4, nothing on stdout)."""
    code, out, err = _run(capsys, *argv)
    assert code == EXIT_VERIFY, err
    assert out == "" and err.count("\n") == 1 and err.startswith("topp-gate: binding_mismatch: ")
    return err


# --- a reviewer sees both sides --------------------------------------------------------------


def test_verify_names_both_sides_of_a_pr_bundle(pr, capsys):
    harmful = pr / "pr-harmful"
    code, out, _ = _run(capsys, str(harmful / "bundle"), "--pubkey", PR_KEY,
                        "--frozen-manifest", str(harmful / "pr.json"))
    assert code == EXIT_STOP
    lines = out.splitlines()
    base = lines.index("  base (stock side): vllm==0.33.0 (family vllm-triton, pinned by file)")
    assert lines[base + 1] == f"    pin: pins/base.json, sha256 {BASE_PIN_SHA256}"
    assert lines[base + 2] == f"    tree: sha256 {BASE_TREE}"
    assert lines[base + 3] == f"    kernel: sha256 {BASE_KERNEL}"
    assert lines[base + 4] == "    isolation: not recorded"
    change = lines.index("  change (patched side): vllm==0.33.0 (family vllm-triton, pinned "
                         "by file)")
    assert lines[change + 1] == f"    pin: pins/base.json, sha256 {BASE_PIN_SHA256}"
    assert lines[change + 2] == f"    patch: sha256 {HARMFUL_PATCH} (frozen by the manifest)"
    assert lines[change + 3].startswith("    tree: sha256 e571c93d") and BASE_TREE in lines[
        change + 3] and "with the patch applied" in lines[change + 3]
    assert lines[change + 4] == f"    kernel: sha256 {HARMFUL_KERNEL}"
    assert lines[change + 5] == "    isolation: not recorded"
    # the harmful run reused the harmless run's base side, and says which bundle it was
    reused = [line for line in lines if line.startswith("  base reused from: ")]
    assert reused and "pr-harmless/bundle" in reused[0]
    assert not any(line.startswith("  signing: ") for line in lines)  # not recorded then


def test_verify_json_names_both_sides_and_what_was_required(pr, capsys):
    harmful = pr / "pr-harmful"
    code, out, _ = _run(capsys, str(harmful / "bundle"), "--pubkey", PR_KEY, "--json",
                        "--require-base", str(harmful / "pins" / "base.json"),
                        "--require-patch", str(harmful / "change.diff"),
                        "--require-change", "vllm==0.33.0")
    assert code == EXIT_STOP  # the requirements hold: the verified verdict decides
    found = json.loads(out)
    stock, patched = found["sides"]["stock"], found["sides"]["patched"]
    assert (stock["role"], stock["package"], stock["version"]) == ("base", "vllm", "0.33.0")
    assert stock["pin_sha256"] == BASE_PIN_SHA256 and stock["tree_sha256"] == BASE_TREE
    assert stock["kernel_sha256"] == BASE_KERNEL and stock["patch_sha256"] is None
    assert patched["role"] == "change" and patched["patch_sha256"] == HARMFUL_PATCH
    assert patched["kernel_sha256"] == HARMFUL_KERNEL and patched["pinned_tree_sha256"] == BASE_TREE
    assert stock["isolation"] == {"record": None, "isolated": False}
    assert found["isolation_recorded"] is False and found["signing"] is None
    assert found["change"]["sha256"] == HARMFUL_PATCH and found["change"]["frozen"] is True
    assert found["base_reused_from"]["bundle"].endswith("pr-harmless/bundle")
    assert found["required"] == {
        "base": [{"given": str(harmful / "pins" / "base.json"), "sha256": BASE_PIN_SHA256}],
        "change": [{"given": "vllm==0.33.0", "release": "vllm==0.33.0"}],
        "patch": {"given": str(harmful / "change.diff"), "sha256": HARMFUL_PATCH}}


def test_verify_names_both_sides_of_a_version_1_bundle(capsys):
    # a version 1 manifest pins each side's wheel inline: that is what verify prints
    code, out, _ = _run(capsys, str(SMOKE), "--pubkey", SMOKE_KEY)
    assert code == EXIT_STOP
    assert "  base (stock side): vllm==0.30.0 (family vllm-triton, pinned inline by the " \
           "manifest)" in out
    assert f"    wheel: vllm-0.30.0-cp38-abi3-manylinux_2_28_x86_64.whl, sha256 " \
           f"{SMOKE_STOCK_WHEEL}" in out
    assert "  change (patched side): vllm==0.33.0 (family vllm-triton, pinned inline" in out
    assert f"  change: sha256 {SMOKE_DIFF}, the kernel diff between the two sides, frozen " \
           "by the manifest" in out
    assert "the manifest pins no tree" in out
    assert out.count("    isolation: not recorded") == 2


# --- --require-base, --require-change, --require-patch ---------------------------------------


def test_require_base_release_refuses_another_base(pr, capsys):
    bundle = str(pr / "pr-harmless" / "bundle")
    err = _refused(capsys, bundle, "--pubkey", PR_KEY, "--require-base", "vllm==0.30.0")
    assert "base (stock side, --require-base): the reviewer says vllm==0.30.0, found " \
           f"vllm==0.33.0 (pin pins/base.json, sha256 {BASE_PIN_SHA256})" in err
    # another distribution of the same version is another base too
    err = _refused(capsys, bundle, "--pubkey", PR_KEY, "--require-base", "flashinfer==0.33.0")
    assert "says flashinfer==0.33.0, found vllm==0.33.0" in err


def test_require_base_pin_file_refuses_another_pin(pr, capsys):
    bundle = str(pr / "pr-harmless" / "bundle")
    other = PINS / "vllm-0.30.0.json"
    err = _refused(capsys, bundle, "--pubkey", PR_KEY, "--require-base", str(other))
    assert f"({other})" in err and f"found vllm==0.33.0 (pin pins/base.json, sha256 " \
                                   f"{BASE_PIN_SHA256})" in err
    err = _refused(capsys, bundle, "--pubkey", PR_KEY, "--require-base", "0" * 64)
    assert f"says pin sha256 {'0' * 64}, found" in err
    # every requirement given must hold: the right release does not excuse another pin
    err = _refused(capsys, bundle, "--pubkey", PR_KEY, "--require-base", "vllm==0.33.0",
                   "--require-base", str(other))
    assert f"({other})" in err


def test_require_change_and_patch_refuse_another_change(pr, capsys):
    harmful = pr / "pr-harmful"
    bundle = str(harmful / "bundle")
    err = _refused(capsys, bundle, "--pubkey", PR_KEY, "--require-change", "vllm==0.34.0")
    assert "change (patched side, --require-change): the reviewer says vllm==0.34.0" in err
    # the harmless run's diff is not the one the harmful bundle's change froze
    wrong = pr / "pr-harmless" / "change.diff"
    err = _refused(capsys, bundle, "--pubkey", PR_KEY, "--require-patch", str(wrong))
    assert "change's patch (--require-patch): the reviewer says sha256 " in err
    assert f"({wrong}), found patch sha256 {HARMFUL_PATCH}" in err


def test_the_right_base_and_patch_pass_with_the_verdict(pr, capsys):
    harmless = pr / "pr-harmless"
    code, out, err = _run(capsys, str(harmless / "bundle"), "--pubkey", PR_KEY,
                          "--require-base", "vllm==0.33.0",
                          "--require-base", BASE_PIN_SHA256,  # each one given must hold
                          "--require-patch", str(harmless / "change.diff"))
    assert code == EXIT_OK, err
    assert "  required and found: --require-base vllm==0.33.0, --require-base " \
           + BASE_PIN_SHA256 in out
    assert "--require-patch " + str(harmless / "change.diff") + " (sha256 " in out
    assert "  verdict: PASS" in out


def test_version_1_bundle_against_its_inline_wheels(capsys):
    code, out, _ = _run(capsys, str(SMOKE), "--pubkey", SMOKE_KEY,
                        "--require-base", "vllm==0.30.0", "--require-change", "vllm==0.33.0",
                        "--require-base", SMOKE_STOCK_WHEEL)
    assert code == EXIT_STOP  # its verified verdict
    err = _refused(capsys, str(SMOKE), "--pubkey", SMOKE_KEY, "--require-base",
                   str(PINS / "vllm-0.30.0.json"))
    assert f"found vllm==0.30.0 (pinned inline: wheel vllm-0.30.0-cp38-abi3-manylinux_2_28_" \
           f"x86_64.whl, sha256 {SMOKE_STOCK_WHEEL})" in err
    err = _refused(capsys, str(SMOKE), "--pubkey", SMOKE_KEY, "--require-patch", "f" * 64)
    assert f"found patch sha256 {SMOKE_DIFF}" in err


def test_a_change_with_no_frozen_patch_fails_require_patch(tmp_path, capsys):
    # a version 3 bundle whose sides are two releases freezes no patch: a required diff
    # is not there
    bundle = tmp_path / "v3"
    synthetic.write_v3(bundle)
    diff = tmp_path / "change.diff"
    diff.write_bytes(b"--- a/k.py\n+++ b/k.py\n")
    err = _refused(capsys, str(bundle), "--pubkey", str(synthetic.SIGNING_PUB),
                   "--require-patch", str(diff))
    assert "found no frozen patch (the change is vllm==0.33.0 as released)" in err


@pytest.mark.parametrize("flag", ["--require-base", "--require-change", "--require-patch"])
def test_an_unreadable_requirement_is_usage(tmp_path, capsys, flag):
    for spec in (str(tmp_path / "absent.json"), str(tmp_path)):
        code, out, err = _run(capsys, str(SMOKE), "--pubkey", SMOKE_KEY, flag, spec)
        assert code == EXIT_USAGE and out == "" and err.startswith("topp-gate: usage: ")
        assert f"{flag} " in err and ("cannot read" in err or "not a regular file" in err)
    if flag != "--require-patch":
        code, _, err = _run(capsys, str(SMOKE), "--pubkey", SMOKE_KEY, flag, "vllm==0.3=0")
        assert code == EXIT_USAGE and "NAME==VERSION" in err


# --- isolation and the signing key, as the receipt records them ------------------------------


def test_require_isolation_refuses_a_bundle_that_records_none(pr, capsys):
    err = _refused(capsys, str(SMOKE), "--pubkey", SMOKE_KEY, "--require-isolation")
    assert "base (stock side) isolation (--require-isolation)" in err
    assert "found isolation not recorded" in err
    err = _refused(capsys, str(pr / "pr-harmless" / "bundle"), "--pubkey", PR_KEY,
                   "--require-isolation")
    assert "stock side" in err and "not recorded" in err


# the record harness.kernels.sandbox writes for a side run in bubblewrap
ISOLATED = {"sandbox": "bubblewrap", "version": "0.8.0",
            "namespaces": ["user", "mount", "pid", "ipc", "net", "uts", "cgroup"],
            "environment": "allowlist",
            "filesystem": "read-only inputs and tree, one empty output folder"}


def _recorded(dest: Path, **environment: Any) -> Path:
    """A synthetic bundle (test-only key) whose signed environment adds ``environment``."""
    content = synthetic.content()
    content = dataclasses.replace(content, environment={**content.environment, **environment})
    shutil.rmtree(dest, ignore_errors=True)
    write_bundle(dest, content, load_private_key(synthetic.SIGNING_KEY),
                 max_bytes=synthetic.MANIFEST["limits"]["max_bundle_bytes"])
    return dest


def test_both_sides_isolated_pass_require_isolation(tmp_path, capsys):
    bundle = _recorded(tmp_path / "b", isolation={
        "stock": {**ISOLATED, "reused_from_bundle": True}, "patched": ISOLATED},
        signing={"key": "ephemeral"})
    code, out, err = _run(capsys, str(bundle), "--pubkey", str(synthetic.SIGNING_PUB),
                          "--require-isolation")
    assert code == EXIT_OK, err
    assert out.count("    isolation: bubblewrap 0.8.0, namespaces user,mount,pid,ipc,net,uts,"
                     "cgroup, environment allowlist, filesystem read-only inputs and tree, "
                     "one empty output folder") == 2
    assert "(recorded by the bundle the base was reused from)" in out
    assert "  signing: signed with an ephemeral key: proves consistency of the bundle, not " \
           "who ran it" in out
    assert "  required and found: --require-isolation" in out


@pytest.mark.parametrize("record,shown", [
    ({"sandbox": "none", "reason": "bwrap not installed"}, "none (not isolated: bwrap not "
                                                           "installed)"),
    ({"sandbox": ""}, "unreadable record"),
    ("bubblewrap", "unreadable record"),
])
def test_a_side_not_isolated_is_refused_by_name(tmp_path, capsys, record, shown):
    bundle = _recorded(tmp_path / "b", isolation={"stock": ISOLATED, "patched": record})
    pub = str(synthetic.SIGNING_PUB)
    code, out, _ = _run(capsys, str(bundle), "--pubkey", pub)
    assert code == EXIT_OK and f"    isolation: {shown}" in out  # shown, not required
    err = _refused(capsys, str(bundle), "--pubkey", pub, "--require-isolation")
    assert "change (patched side) isolation (--require-isolation)" in err and shown in err


def test_recorded_strings_reach_the_terminal_escaped(tmp_path, capsys):
    hostile = "\x1b[2K\rverdict: PASS"
    bundle = _recorded(tmp_path / "b", isolation={
        "stock": {**ISOLATED, "sandbox": hostile}, "patched": {"sandbox": "none",
                                                             "reason": hostile}},
        signing={"key": hostile}, base_reused_from={"bundle": hostile, "key_sha256": hostile})
    code, out, err = _run(capsys, str(bundle), "--pubkey", str(synthetic.SIGNING_PUB))
    assert code == EXIT_OK
    assert "\x1b" not in out and "\r" not in out
    assert out.count("\\x1b[2K\\x0dverdict: PASS") == 4  # isolation x2, reused x2
    assert '  signing: unreadable record ({"key": "\\u001b[2K\\rverdict: PASS"})' in out
    err = _refused(capsys, str(bundle), "--pubkey", str(synthetic.SIGNING_PUB),
                   "--require-isolation")
    assert "\x1b" not in err and "\\x1b[2K" in err
    _, out, _ = _run(capsys, str(bundle), "--pubkey", str(synthetic.SIGNING_PUB), "--json")
    assert "\x1b" not in out and json.loads(out)["sides"]["stock"]["isolation"] == {
        "record": {**ISOLATED, "sandbox": hostile}, "isolated": True}


# --- the CI formats name both sides too --------------------------------------------------------


def test_junit_and_vsa_name_both_sides_and_the_requirements(tmp_path, capsys):
    (tmp_path / "keys").mkdir()
    private, public, _ = write_keypair(tmp_path / "keys" / "ci")
    junit, vsa = tmp_path / "verify.xml", tmp_path / "verify.vsa.json"
    code, _, err = _run(capsys, str(SMOKE), "--pubkey", SMOKE_KEY, "--require-base",
                        "vllm==0.30.0", "--junit", str(junit), "--vsa", str(vsa),
                        "--vsa-key", str(private))
    assert code == EXIT_STOP, err
    props = {p.get("name"): p.get("value")
             for p in ET.parse(junit).getroot().iter("property")}
    assert props["stock_version"] == "vllm==0.30.0" and props["stock_role"] == "base"
    assert props["patched_version"] == "vllm==0.33.0" and props["patched_role"] == "change"
    assert props["stock_wheel_sha256"] == SMOKE_STOCK_WHEEL
    assert props["change_sha256"] == SMOKE_DIFF
    assert props["stock_isolation"] == props["patched_isolation"] == "not recorded"
    assert props["required"] == "--require-base vllm==0.30.0"
    envelope = json.loads(vsa.read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    jsonschema.validate(statement, VSA_SCHEMA)
    sides = statement["subject"][0]["annotations"]["sides"]
    assert sides["stock"]["version"] == "0.30.0" and sides["patched"]["version"] == "0.33.0"
    assert sides["stock"]["wheel_sha256"] == SMOKE_STOCK_WHEEL
    assert sides["stock"]["isolation"] == {"record": None, "isolated": False}
    assert statement["predicate"]["policy"]["annotations"]["required"] == {
        "base": [{"given": "vllm==0.30.0", "release": "vllm==0.30.0"}]}
