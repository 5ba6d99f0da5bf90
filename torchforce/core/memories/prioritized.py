"""``prioritized_replay``: proportional prioritized experience replay (Schaul et al. 2016, arXiv:1511.05952).

Rows are drawn with probability ``P(i) = p_i / sum_k p_k`` from a sum-tree. A new row gets the largest priority
set so far (the paper's Algorithm 1, line 6; 1.0 before any update), so it is likely to be replayed soon. After a
training step the agent calls ``update_priorities(indices, loss_per_instance)``, which sets
``p_i = (|loss_i| + prioritization_constant) ** prioritization_weight``. Each retrieval carries importance-sampling
weights ``w_i = (N * P(i)) ** -importance_sampling_weight / max_j w_j`` (max over the batch), which the agent
multiplies into its per-row loss to undo the sampling bias.

2018 differences: TensorForce 0.4 staged new rows in a buffer of ``buffer_size`` and had no importance sampling.
``buffer_size`` is accepted so 2018 configs load, and unused: new rows get the maximal priority instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from torchforce.core.memories.base import FieldSpec, Memory, request_count
from torchforce.core.memories.sumtree import SumTree
from torchforce.spec import SpecError, expect_float, expect_int
from torchforce.spec.checks import FLOAT32_MAX


class PrioritizedReplay(Memory):
    """A ring buffer sampled in proportion to per-row priorities; only ``retrieve_timesteps`` is supported.

    ``prioritization_weight`` is the paper's alpha in [0, 1] (0 = uniform), ``prioritization_constant`` its
    epsilon (keeps rows with zero loss drawable), ``importance_sampling_weight`` its beta (0 = no correction, 1 =
    full; the paper anneals 0.4 -> 1, we keep it constant at 0.4 by default).
    """

    units = ("timesteps",)

    def __init__(
        self,
        *,
        fields: Mapping[str, FieldSpec],
        rng: np.random.Generator,
        capacity: int,
        include_next_states: bool = False,
        stacked_frames: bool = False,
        prioritization_weight: float = 1.0,
        prioritization_constant: float = 1e-6,
        importance_sampling_weight: float = 0.4,
        buffer_size: int | None = None,
    ) -> None:
        super().__init__(
            fields=fields,
            rng=rng,
            capacity=capacity,
            include_next_states=include_next_states,
            stacked_frames=stacked_frames,
        )
        # alpha <= 1 and a constant within float32 keep every priority, and their sum, finite in float64
        self.prioritization_weight = expect_float(
            prioritization_weight, "prioritization_weight", minimum=0.0, maximum=1.0
        )
        self.prioritization_constant = expect_float(
            prioritization_constant, "prioritization_constant", minimum=0.0, maximum=FLOAT32_MAX
        )
        self.importance_sampling_weight = expect_float(
            importance_sampling_weight, "importance_sampling_weight", minimum=0.0, maximum=1.0
        )
        self.buffer_size = expect_int(buffer_size, "buffer_size", minimum=0, allow_none=True)  # unused, see above
        try:
            self._tree = SumTree(self.capacity)
        except MemoryError:
            raise SpecError(
                "capacity",
                "the priorities of this many rows do not fit in this machine's memory",
                got=self.capacity,
                hint="Lower memory.capacity.",
            ) from None
        self._max_priority = 1.0

    @property
    def priorities(self) -> np.ndarray:
        """A copy of the priority of every storage index (0 where nothing is stored yet)."""
        return self._tree.priorities.copy()

    def store(self, batch: Mapping[str, np.ndarray]) -> None:
        start, n = self._write(batch)
        first = min(n, self.capacity - start)  # the rows up to the end of the ring, then the rest from 0
        if first:
            self._tree.update_range(start, np.full(first, self._max_priority))
        if n > first:
            self._tree.update_range(0, np.full(n - first, self._max_priority))

    def retrieve_timesteps(self, n: int) -> dict[str, np.ndarray]:
        """``n`` rows drawn by priority (stratified), with ``indices`` and importance-sampling ``weights``."""
        n = request_count(n, "retrieve_timesteps: n")
        self._require_rows(f"{n} timesteps")
        total = self._tree.total
        if not total > 0.0:
            raise ValueError(
                f"cannot retrieve {n} timesteps: every stored priority is 0 "
                "(zero losses with prioritization_constant 0); use a prioritization_constant > 0."
            )
        indices = self._tree.sample(n, self.rng)
        probabilities = self._tree.priorities[indices] / total
        weights = (self._size * probabilities) ** -self.importance_sampling_weight
        batch = self._gather(indices)
        batch["weights"] = (weights / weights.max()).astype(np.float32)
        return batch

    def retrieve_episodes(self, n: int) -> dict[str, np.ndarray]:
        raise ValueError("prioritized_replay retrieves timesteps only; use 'replay' or 'latest' for episodes.")

    def retrieve_sequences(self, n: int, length: int) -> dict[str, np.ndarray]:
        raise ValueError("prioritized_replay retrieves timesteps only; use 'replay' or 'latest' for sequences.")

    def update_priorities(self, indices: np.ndarray, loss_per_instance: np.ndarray) -> None:
        """Set the priorities of the rows at storage ``indices`` (as retrieved) from their losses.

        ``loss_per_instance`` is a numpy array (or a detached CPU tensor) with one loss per index. Call it before
        the next ``store``: a row overwritten in between would receive its predecessor's priority.
        """
        indices = np.asarray(indices)
        loss = np.asarray(loss_per_instance, dtype=np.float64)
        if indices.ndim != 1 or loss.shape != indices.shape:
            raise ValueError(
                f"update_priorities: expected one loss per index, as 1-d arrays; "
                f"got indices of shape {indices.shape} and losses of shape {loss.shape}."
            )
        if indices.size == 0:
            return
        if not np.issubdtype(indices.dtype, np.integer):
            raise ValueError(f"update_priorities: indices must be integers, got dtype {indices.dtype}.")
        if indices.min() < 0 or indices.max() >= self._size:
            raise ValueError(
                f"update_priorities: indices must be storage indices of stored rows (0 to {self._size - 1}), "
                f"got values from {indices.min()} to {indices.max()}."
            )
        if not np.isfinite(loss).all():
            raise ValueError("update_priorities: the losses must be finite; got NaN or infinity.")
        priorities = (np.abs(loss) + self.prioritization_constant) ** self.prioritization_weight
        self._tree.update(indices, priorities)
        self._max_priority = max(self._max_priority, float(priorities.max()))

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["priorities"] = self._tree.priorities.copy()
        state["max_priority"] = self._max_priority
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if "priorities" not in state:
            raise ValueError("memory.load_state_dict: the saved memory has no priorities (not a prioritized_replay).")
        priorities = np.asarray(state["priorities"], dtype=np.float64)
        maximum = float(state["max_priority"])
        if priorities.shape != self._tree.priorities.shape or not np.isfinite(priorities).all() or priorities.min() < 0:
            raise ValueError(  # checked before anything changes, as the rows are
                f"memory.load_state_dict: the saved priorities ({priorities.shape[0] if priorities.ndim else 0} "
                f"values) are not {self._tree.priorities.shape[0]} finite numbers >= 0."
            )
        super().load_state_dict(state)
        self._tree.nodes[:] = 0.0
        self._tree.priorities[:] = priorities
        self._tree.rebuild()
        self._max_priority = maximum
