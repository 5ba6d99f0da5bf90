"""What an agent spec's ``device`` asks of the machine that runs it, read without torch (the client decides where a
run may start before anything heavy is imported).

``None`` or ``"cpu"``: the CPU. ``"cuda"``, ``"cuda:N"``: a GPU, and the agent refuses to build without one.
``"auto"``: a GPU where the process sees one, else the CPU (SB3's ``device="auto"``): the setting for an experiment
created on a laptop and run on a cluster's GPUs.
"""

from __future__ import annotations

import re
from typing import Any

AUTO_DEVICE = "auto"
_CUDA = re.compile(r"cuda(?::(\d+))?")


def needs_gpu(device: Any) -> bool:
    """Whether an agent on ``device`` builds only where CUDA is: ``"cuda"`` or ``"cuda:N"`` (a malformed
    ``"cuda:x"`` is not a device at all, which building the agent says)."""
    return isinstance(device, str) and _CUDA.fullmatch(device) is not None


def missing_gpu(device: Any) -> bool:
    """Whether an agent on ``device`` needs a GPU (``needs_gpu``) and this process sees none (imports torch only
    then)."""
    if not needs_gpu(device):
        return False
    import torch

    return not torch.cuda.is_available()


def gpu_index(device: Any) -> int:
    """The GPU's number in ``"cuda:N"``; 0 for ``"cuda"`` (torch's current GPU, the first) and every other device."""
    match = _CUDA.fullmatch(device) if isinstance(device, str) else None
    return int(match.group(1)) if match is not None and match.group(1) is not None else 0


def uses_gpu(device: Any) -> bool:
    """Whether an agent on ``device`` computes on a GPU where one is given to it: ``"cuda"``, ``"cuda:N"`` or
    ``"auto"``."""
    return device == AUTO_DEVICE or needs_gpu(device)
