import os

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device and libktune")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """GPU tests skip without CUDA; with KTUNE_REQUIRE_GPU=1 each fails
    instead. Runs before any fixture, so none touches CUDA first."""
    if "gpu" not in item.keywords or torch.cuda.is_available():
        return
    if os.environ.get("KTUNE_REQUIRE_GPU") == "1":
        pytest.fail("KTUNE_REQUIRE_GPU=1 but torch sees no CUDA device", pytrace=False)
    pytest.skip("no CUDA device (KTUNE_REQUIRE_GPU=1 makes this a failure)")
