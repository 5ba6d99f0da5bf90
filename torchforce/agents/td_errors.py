"""The |TD errors| of an update's batch and what prioritized replay makes of them, for every agent that regresses a
Q function onto TD targets from a replay memory (DQN, DQfD, NAF, and DDPG's critic).

An update measures ``|delta| = |y - Q(s, a)|`` of its whole batch before the optimizer's step (``TDErrors.step``: the
loss records them when it sees the whole batch, or they are measured once more after the step when the optimizer
only saw parts of it). The batch's rows then get them as their priorities (``prioritize``), and the loss per row is
weighted by the importance-sampling weights prioritized replay drew it with (``weighted``). Memories without
priorities leave both alone.
"""

from __future__ import annotations

from typing import Any

import torch

from torchforce.agents.errors import NonFiniteError
from torchforce.agents.transitions import FlatBatch, Transitions


class TDErrors:
    """Measures the |TD errors| of an update's whole batch before its step (see the module)."""

    def __init__(self) -> None:
        self._whole: FlatBatch | None = None
        self._measured: torch.Tensor | None = None

    def step(self, optimizer: Any, loss: Any, data: FlatBatch) -> tuple[dict[str, Any], torch.Tensor]:
        """``optimizer.step(loss, data)``, and the |TD errors| of ``data`` before it (``loss`` calls ``record``)."""
        self._whole, self._measured = data, None
        try:
            info = optimizer.step(loss, data)
            if self._measured is None:  # a subsampling optimizer never saw the whole batch: measure it after the step
                with torch.no_grad():
                    loss(data)
            measured = self._measured
        finally:
            self._whole, self._measured = None, None
        if measured is None:
            raise RuntimeError("the loss did not measure the TD errors of the batch (TDErrors.record)")
        return info, measured

    def record(self, data: FlatBatch, td_error: torch.Tensor) -> None:
        """What a loss calls with its |TD error| per row: kept when ``data`` is the whole batch, the first time."""
        if data is self._whole and self._measured is None:
            self._measured = td_error.detach()


def weighted(loss_per_instance: torch.Tensor, data: FlatBatch) -> torch.Tensor:
    """The loss per row times prioritized replay's importance-sampling weights, where the batch has them."""
    weights = data.get("weights")
    return loss_per_instance if weights is None else loss_per_instance * weights


def prioritize(agent: Any, batch: Transitions, td_error: torch.Tensor) -> None:
    """The |TD errors| of ``batch``'s rows become their priorities in ``agent.memory``, where it keeps any."""
    if batch.indices is None or not hasattr(agent.memory, "update_priorities"):
        return
    if not bool(torch.isfinite(td_error).all()):  # NaN priorities would make every later draw NaN
        raise NonFiniteError(
            f"{agent.name} agent: the TD errors of update {agent.updates + 1} are NaN or infinite, so they cannot "
            "be prioritized replay's priorities (a diverged update?). Try a lower learning rate, gradient clipping "
            "(clip_grad_norm in the optimizer spec) or a huber_loss, and check that rewards and states are finite."
        )
    agent.memory.update_priorities(batch.indices, td_error.cpu().numpy())
