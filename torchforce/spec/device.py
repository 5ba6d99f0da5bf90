"""What an agent spec's ``device`` asks of the machine that runs it, read without torch (the client decides where a
run may start before anything heavy is imported).

``None`` or ``"cpu"``: the CPU. ``"cuda"``, ``"cuda:N"``: a GPU, and the agent refuses to build without one.
``"auto"``: a GPU where the process sees one, else the CPU (SB3's ``device="auto"``): the setting for an experiment
created on a laptop and run on a cluster's GPUs.
"""

from __future__ import annotations

from typing import Any

AUTO_DEVICE = "auto"


def needs_gpu(device: Any) -> bool:
    """Whether an agent on ``device`` builds only where CUDA is: ``"cuda"`` or ``"cuda:N"``."""
    return isinstance(device, str) and (device == "cuda" or device.startswith("cuda:"))


def uses_gpu(device: Any) -> bool:
    """Whether an agent on ``device`` computes on a GPU where one is given to it: ``"cuda"``, ``"cuda:N"`` or
    ``"auto"``."""
    return device == AUTO_DEVICE or needs_gpu(device)
