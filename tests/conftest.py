import os
from pathlib import Path

import pytest

# scripts/test runs the suite in two parts, so each test runs once (issue 28):
#   1. scripts/sandbox_tests.sh: the flake's cpu-tests selection (-m "not gpu and not sources")
#      the way the Nix sandbox runs it; the ids of the tests it skipped (no python-flint, nix,
#      shellcheck, chromium or git there) are written to $TOPP_GATE_SKIPPED_LOG;
#   2. pytest --sandbox-skipped LOG: only what part 1 did not run: the tests marked sources or
#      gpu, and the ones part 1 skipped, here where those tools and the caches are.
SKIPPED_LOG = "TOPP_GATE_SKIPPED_LOG"


def pytest_addoption(parser):
    parser.addoption(
        "--sandbox-skipped", metavar="LOG", type=Path, default=None,
        help="run only the tests a sandbox-style run (scripts/sandbox_tests.sh) left out: "
             "those marked sources or gpu, and those it skipped, as recorded in LOG "
             f"(written when ${SKIPPED_LOG} names it)")


def pytest_collection_modifyitems(config, items):
    """Files holding a slow test first; GPU tests skipped cleanly without CUDA; with
    ``--sandbox-skipped``, only what the sandbox-style run left out."""
    _only_what_the_sandbox_left_out(config, items)
    _slow_files_first(items)
    _skip_gpu_without_cuda(items)


def _only_what_the_sandbox_left_out(config, items):
    log = config.getoption("--sandbox-skipped")
    if log is None:
        return
    try:
        skipped = set(log.read_text("utf-8").splitlines())
    except OSError as err:
        raise pytest.UsageError(f"--sandbox-skipped: cannot read {log}: {err.strerror}") from err
    keep, drop = [], []
    for item in items:
        left_out = "sources" in item.keywords or "gpu" in item.keywords
        # a test id, or its file's when part 1 skipped the whole file as it collected it
        skipped_there = item.nodeid in skipped or item.nodeid.split("::")[0] in skipped
        (keep if left_out or skipped_there else drop).append(item)
    known = {item.nodeid for item in items} | {item.nodeid.split("::")[0] for item in items}
    unknown = skipped - known
    if unknown:  # a test the sandbox skipped must run here, never vanish
        raise pytest.UsageError(f"--sandbox-skipped: {len(unknown)} recorded test ids are not "
                                f"collected here, e.g. {sorted(unknown)[0]}")
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


def _record_skipped(nodeid):
    log = os.environ.get(SKIPPED_LOG)
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(nodeid + "\n")


def pytest_runtest_logreport(report):
    """With $TOPP_GATE_SKIPPED_LOG set, append the id of every test skipped (at setup or in
    its body) to that file: scripts/test runs those again outside the sandbox. (Under xdist
    the workers and the controller both see the report: an id may be written twice.)"""
    if report.skipped and report.when in ("setup", "call"):
        _record_skipped(report.nodeid)


def pytest_collectreport(report):
    """A whole file skipped as it is collected (a module-level ``pytest.importorskip``):
    its path is recorded, and part 2 runs every test of that file."""
    if report.skipped and report.nodeid:
        _record_skipped(report.nodeid)


def _slow_files_first(items):
    """A stable sort, so each file's tests keep their order: the files with a ``slow`` test
    (minutes each: kernels in Triton's interpreter, full-size bundles) start first, and the
    many short files fill the end. scripts/test runs pytest-xdist with ``--dist loadfile``,
    which hands files to the workers in this order; a long file handed out last would leave
    the other worker idle for its whole length."""
    slow = {item.path for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: item.path not in slow)


def _skip_gpu_without_cuda(items):
    """GPU tests are skipped cleanly without CUDA (checked lazily, torch only if installed)."""
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if not has_cuda:
        skip = pytest.mark.skip(reason="needs CUDA (run on a GPU machine)")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def signing_key(tmp_path_factory):
    """The test-only signing key as a mode-0600 copy: ``run`` refuses a private key that
    group or others may read, and git checks the committed one out as 0644. Its public half
    lies beside it, as ``keygen`` writes it (``pr`` reads only that before the children have
    exited, to check a kept base side)."""
    import shutil
    from pathlib import Path

    source = Path(__file__).resolve().parent / "assets" / "keys" / "test-only-signing.key"
    target = tmp_path_factory.mktemp("key") / "test-only-signing.key"
    shutil.copyfile(source, target)
    shutil.copyfile(source.with_suffix(".pub"), target.with_suffix(".pub"))
    target.chmod(0o600)
    return target
