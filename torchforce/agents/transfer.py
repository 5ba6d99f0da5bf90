"""Arrays to the agent's device and tensors back to the host.

On the CPU a tensor and its array share memory: nothing is copied either way. On a CUDA device every transfer goes
through pinned (page-locked) host memory, so that the copy runs asynchronously on the device's stream, and a group of
tensors coming back waits for the stream once, not once per tensor: acting with an agent that keeps log pi(a|s) and
V(s) for its updates brings actions, log-probabilities and values back with one host synchronization a step.
"""

from __future__ import annotations

import numpy as np
import torch


def to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """``array`` as a tensor on ``device``: sharing its memory on the CPU, copied through pinned memory to CUDA."""
    tensor = torch.from_numpy(array)
    if device.type == "cpu":
        return tensor
    if device.type == "cuda":
        # a pinned copy may be read by the device after this returns: torch's host allocator keeps it until then
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def to_host(*groups: dict[str, torch.Tensor]) -> list[dict[str, np.ndarray]]:
    """Each group of tensors (of one device, no gradients) as numpy arrays, in order, once all have arrived."""
    for group in groups:
        for tensor in group.values():
            if not tensor.is_cpu:
                return _copied(groups, tensor.device)
    return [{name: tensor.numpy() for name, tensor in group.items()} for group in groups]


def _copied(groups: tuple[dict[str, torch.Tensor], ...], device: torch.device) -> list[dict[str, np.ndarray]]:
    """``to_host`` of tensors on ``device``: on CUDA pinned copies queued on its stream, then one wait for them all."""
    if device.type != "cuda":
        return [{name: tensor.cpu().numpy() for name, tensor in group.items()} for group in groups]
    arrived = []
    for group in groups:
        pinned = {}
        for name, tensor in group.items():
            pinned[name] = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
            pinned[name].copy_(tensor, non_blocking=True)
        arrived.append(pinned)
    torch.cuda.current_stream(device).synchronize()  # the one wait: every copy above is queued on this stream
    return [{name: tensor.numpy() for name, tensor in group.items()} for group in arrived]
