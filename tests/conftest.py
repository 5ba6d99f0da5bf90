import os

import pytest
import torch

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tests share two cores with a parallel worker: one torch thread each keeps timings sane."""
    torch.set_num_threads(1)
    yield


def pytest_collection_modifyitems(items):
    """The learning tests take up to a minute or two each: run them first, so parallel workers share them instead
    of one worker finishing them alone after everything else."""
    items.sort(key=lambda item: item.get_closest_marker("learning") is None)
