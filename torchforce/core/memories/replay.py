"""``replay``: retrievals sample stored rows uniformly at random (off-policy agents)."""

from __future__ import annotations

import numpy as np

from torchforce.core.memories.base import Memory, ranges, request_count


class Replay(Memory):
    """A ring buffer sampled uniformly with the memory's generator.

    Unlike 2018, terminal rows are sampled like any other: their targets simply do not bootstrap.
    """

    def retrieve_timesteps(self, n: int) -> dict[str, np.ndarray]:
        """``n`` rows drawn uniformly with replacement."""
        n = request_count(n, "retrieve_timesteps: n")
        self._require_rows(f"{n} timesteps")
        # Before the ring is full the rows sit at storage indices 0..size-1; after, every index holds a row.
        return self._gather(self.rng.integers(0, self._size, size=n, dtype=np.int64))

    def retrieve_episodes(self, n: int) -> dict[str, np.ndarray]:
        """``n`` distinct complete episodes drawn uniformly without replacement, concatenated in drawn order."""
        n = request_count(n, "retrieve_episodes: n")
        starts, ends = self._episode_bounds()
        if n > len(starts):
            raise self._episodes_error(n)
        chosen = self.rng.choice(len(starts), size=n, replace=False)
        offsets = ranges(starts[chosen], ends[chosen] - starts[chosen] + 1)
        return self._gather(self._storage_indices(offsets))

    def retrieve_sequences(self, n: int, length: int) -> dict[str, np.ndarray]:
        """``n`` windows of ``length`` rows drawn uniformly with replacement among those that end an episode only at
        their last row; ``n * length`` rows, window after window."""
        n = request_count(n, "retrieve_sequences: n")
        length = request_count(length, "retrieve_sequences: length")
        starts = self._window_starts(length)
        if len(starts) == 0:
            raise ValueError(
                f"cannot retrieve {n} sequences of length {length}: the memory holds no such window "
                f"({self._describe()})."
            )
        chosen = starts[self.rng.integers(0, len(starts), size=n)]
        offsets = ranges(chosen, np.full(n, length))
        return self._gather(self._storage_indices(offsets))
