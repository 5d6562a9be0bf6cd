import pytest


def pytest_collection_modifyitems(config, items):
    """Files holding a slow test first; GPU tests skipped cleanly without CUDA."""
    _slow_files_first(items)
    _skip_gpu_without_cuda(items)


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
    group or others may read, and git checks the committed one out as 0644."""
    import shutil
    from pathlib import Path

    source = Path(__file__).resolve().parent / "assets" / "keys" / "test-only-signing.key"
    target = tmp_path_factory.mktemp("key") / "test-only-signing.key"
    shutil.copyfile(source, target)
    target.chmod(0o600)
    return target
