import pytest


def pytest_collection_modifyitems(config, items):
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
