import os
import signal

import pytest
import torch

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Tests share two cores with a parallel worker: one torch thread each keeps timings sane."""
    torch.set_num_threads(1)
    yield


HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """A test that runs a worker or a sweep driver in this process installs their signal handlers (pause on SIGINT,
    stop on SIGTERM): they go with the test, so that a Ctrl-C in a later test is a KeyboardInterrupt again."""
    from torchforce.client.signals import Signals

    before = {number: signal.getsignal(number) for number in HANDLED}
    yield
    for number, handler in before.items():
        if signal.getsignal(number) is not handler and handler is not None:
            signal.signal(number, handler)
    Signals.request = None


def pytest_collection_modifyitems(items):
    """The learning tests take up to a minute or two each: run them first, so parallel workers share them instead
    of one worker finishing them alone after everything else."""
    items.sort(key=lambda item: item.get_closest_marker("learning") is None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Refuse to run a grouped test on whichever worker: each worker would start its Ray module's cluster again."""
    if getattr(item.config.option, "loadgroup", False) and item.get_closest_marker("xdist_group"):
        if "@" not in item.nodeid:
            pytest.fail(
                "--dist loadgroup: pytest-xdist did not tag this test with its xdist_group, so it spreads the "
                "group's tests over the workers. pytest 9.2 with pytest-xdist 3.8 does this: install with "
                "`-c constraints.txt` (pytest 9.1.1).",
                pytrace=False,
            )
