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
