import os

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device and libktune")


def pytest_collection_modifyitems(config, items):
    """GPU tests skip without CUDA; with KTUNE_REQUIRE_GPU=1 each fails instead."""
    if torch.cuda.is_available():
        return
    if os.environ.get("KTUNE_REQUIRE_GPU") == "1":
        mark = pytest.mark.usefixtures("_require_gpu")
    else:
        mark = pytest.mark.skip(reason="no CUDA device (KTUNE_REQUIRE_GPU=1 makes this a failure)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(mark)


@pytest.fixture
def _require_gpu():
    pytest.fail("KTUNE_REQUIRE_GPU=1 but torch sees no CUDA device")
