"""A sum-tree over priorities, stored as one array, updated and sampled for a whole batch at once.

Node 1 is the root; node ``i`` has children ``2i`` and ``2i + 1``; the leaves are nodes ``first_leaf ..
first_leaf + capacity - 1`` (``first_leaf`` is the smallest power of two >= capacity; unused leaves stay 0). Each
inner node holds the sum of its children, recomputed from them on every update, so sums never drift.
"""

from __future__ import annotations

import numpy as np


class SumTree:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"SumTree capacity must be >= 1, got {capacity}.")
        self.capacity = capacity
        self.depth = (capacity - 1).bit_length()  # levels between the root and the leaves
        self.first_leaf = 1 << self.depth
        self.nodes = np.zeros(2 * self.first_leaf, dtype=np.float64)  # nodes[0] is unused

    @property
    def total(self) -> float:
        return float(self.nodes[1])

    @property
    def priorities(self) -> np.ndarray:
        """The leaves, as a view: after writing into it, call ``rebuild()``."""
        return self.nodes[self.first_leaf : self.first_leaf + self.capacity]

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities at leaf ``indices`` and recompute their ancestors, one tree level per step."""
        nodes = np.asarray(indices, dtype=np.int64) + self.first_leaf
        tree = self.nodes
        tree[nodes] = priorities
        for _ in range(self.depth):
            nodes >>= 1
            left = nodes << 1
            tree[nodes] = tree[left] + tree[left + 1]

    def update_range(self, start: int, priorities: np.ndarray) -> None:
        """Set the priorities of the consecutive leaves ``start, start + 1, ...``: slices instead of gathers, and
        plain scalars once the range of ancestors is one node (new rows arrive this way, often one at a time)."""
        tree = self.nodes
        low = start + self.first_leaf
        high = low + len(priorities)  # exclusive
        tree[low:high] = priorities
        for _ in range(self.depth):
            low, high = low >> 1, ((high - 1) >> 1) + 1
            if high - low == 1:
                break
            tree[low:high] = tree[2 * low : 2 * high : 2] + tree[2 * low + 1 : 2 * high : 2]
        else:
            return
        while low:
            tree[low] = tree[2 * low] + tree[2 * low + 1]
            low >>= 1

    def rebuild(self) -> None:
        """Recompute every inner node from the leaves (after the leaves were set directly)."""
        tree = self.nodes
        for level in range(self.depth - 1, -1, -1):
            first = 1 << level
            tree[first : 2 * first] = tree[2 * first : 4 * first : 2] + tree[2 * first + 1 : 4 * first : 2]

    def find(self, values: np.ndarray) -> np.ndarray:
        """For each value in ``[0, total)``, the leaf whose cumulative-priority interval contains it.

        Ties go right, so leaves (and subtrees) of priority 0 are never found; a value that rounding pushed past
        the last positive leaf of a subtree is found again with a descent that only enters positive subtrees.
        """
        values = np.asarray(values, dtype=np.float64)
        remaining = values.copy()
        nodes = np.ones(values.shape, dtype=np.int64)
        for _ in range(self.depth):
            nodes <<= 1
            left = self.nodes[nodes]
            right = remaining >= left
            remaining -= left * right
            nodes += right
        empty = self.nodes[nodes] == 0.0
        if empty.any():
            nodes[empty] = self._find_positive(values[empty])
        return nodes - self.first_leaf

    def _find_positive(self, values: np.ndarray) -> np.ndarray:
        """Like ``find``, but a step goes right only into a subtree with positive sum (nodes, not leaf indices)."""
        remaining = values.copy()
        nodes = np.ones(values.shape, dtype=np.int64)
        for _ in range(self.depth):
            nodes <<= 1
            left = self.nodes[nodes]
            right = (remaining >= left) & (self.nodes[nodes + 1] > 0.0)
            remaining -= left * right
            nodes += right
        return nodes

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` leaves drawn proportionally to priority, stratified: one draw in each of ``n`` equal segments."""
        values = (np.arange(n) + rng.random(n)) * (self.total / n)
        return self.find(values)
