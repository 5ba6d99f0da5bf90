"""``latest``: retrievals return the most recent rows, oldest first (on-policy agents)."""

from __future__ import annotations

import numpy as np

from torchforce.core.memories.base import Memory, ranges, request_count


class Latest(Memory):
    """A ring buffer whose retrievals are the most recent timesteps, episodes or windows, in insertion order."""

    def retrieve_timesteps(self, n: int) -> dict[str, np.ndarray]:
        """The ``n`` most recent rows, oldest first (fewer when fewer are stored)."""
        n = request_count(n, "retrieve_timesteps: n")
        self._require_rows(f"{n} timesteps")
        count = min(n, self._size)
        return self._gather(self._storage_indices(np.arange(self._size - count, self._size)))

    def retrieve_episodes(self, n: int) -> dict[str, np.ndarray]:
        """The ``n`` most recent complete episodes, oldest first, concatenated.

        An episode whose first rows were overwritten is not complete, and neither is the unfinished newest one.
        """
        n = request_count(n, "retrieve_episodes: n")
        starts, ends = self._episode_bounds()
        if n > len(starts):
            raise self._episodes_error(n)
        first, last = starts[-n], ends[-1]
        return self._gather(self._storage_indices(np.arange(first, last + 1)))

    def retrieve_sequences(self, n: int, length: int) -> dict[str, np.ndarray]:
        """The ``n`` most recent windows of ``length`` consecutive rows, oldest first, concatenated.

        Windows overlap (one starts at every row) and end an episode only at their last row; the result has
        ``n * length`` rows, window after window.
        """
        n = request_count(n, "retrieve_sequences: n")
        length = request_count(length, "retrieve_sequences: length")
        starts = self._window_starts(length)
        if n > len(starts):
            raise ValueError(
                f"cannot retrieve {n} sequences of length {length}: the memory holds {len(starts)} such windows "
                f"({self._describe()})."
            )
        offsets = ranges(starts[-n:], np.full(n, length))
        return self._gather(self._storage_indices(offsets))
