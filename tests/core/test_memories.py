"""Memories: retrieval contents against hand-written arrays, sampling, priorities, saving, and every error."""

import re

import numpy as np
import pytest

from torchforce.core.memories import MEMORIES, FieldSpec, Memory, build_memory, with_capacity
from torchforce.core.memories.latest import Latest
from torchforce.core.memories.prioritized import PrioritizedReplay
from torchforce.core.memories.replay import Replay
from torchforce.core.memories.sumtree import SumTree
from torchforce.spec import SpecError

FIELDS = {
    "states/x": FieldSpec((2,), np.float32),
    "actions/a": FieldSpec((), np.int64),
    "terminal": FieldSpec((), np.int8),
    "reward": FieldSpec((), np.float32),
}


def rows(ids, terminal=None):
    """A batch whose rows are recognizable by id: reward = id, states/x = (id, -id), actions/a = 10 * id."""
    ids = np.asarray(ids, dtype=np.int64)
    return {
        "states/x": np.stack([ids, -ids], axis=1).astype(np.float32),
        "actions/a": 10 * ids,
        "terminal": np.zeros(len(ids), dtype=np.int8) if terminal is None else np.asarray(terminal, dtype=np.int8),
        "reward": ids.astype(np.float32),
    }


def make(kind, capacity, seed=0, **kwargs):
    return build_memory({"type": kind, "capacity": capacity, **kwargs}, FIELDS, rng=np.random.default_rng(seed))


def ids_of(batch):
    return batch["reward"].astype(int).tolist()


def check_rows(batch, ids):
    """Every field of ``batch`` holds exactly the rows ``ids``, in that order."""
    ids = np.asarray(ids)
    assert ids_of(batch) == ids.tolist()
    np.testing.assert_array_equal(batch["states/x"], np.stack([ids, -ids], axis=1).astype(np.float32))
    np.testing.assert_array_equal(batch["actions/a"], 10 * ids)
    assert batch["states/x"].dtype == np.float32 and batch["actions/a"].dtype == np.int64
    assert batch["terminal"].dtype == np.int8 and batch["indices"].dtype == np.int64


# storing and latest


def test_store_wraps_around_and_latest_timesteps_are_in_order():
    memory = make("latest", 5)
    assert isinstance(memory, Latest) and memory.capacity == 5 and len(memory) == 0
    memory.store(rows([0, 1, 2]))
    memory.store(rows([3, 4, 5, 6]))  # wraps inside the batch: 5 and 6 overwrite 0 and 1
    assert len(memory) == 5
    batch = memory.retrieve_timesteps(3)
    check_rows(batch, [4, 5, 6])
    assert batch["indices"].tolist() == [4, 0, 1]
    batch = memory.retrieve_timesteps(10)  # clipped to what is stored
    check_rows(batch, [2, 3, 4, 5, 6])
    assert batch["indices"].tolist() == [2, 3, 4, 0, 1]


def test_store_single_rows_and_a_full_capacity_batch():
    memory = make("latest", 3)
    for i in range(4):
        memory.store(rows([i]))
    check_rows(memory.retrieve_timesteps(3), [1, 2, 3])
    memory.store(rows([7, 8, 9]))  # exactly capacity, starting mid-ring
    batch = memory.retrieve_timesteps(3)
    check_rows(batch, [7, 8, 9])
    assert batch["indices"].tolist() == [1, 2, 0]
    memory.store(rows([]))  # an empty batch is a no-op
    check_rows(memory.retrieve_timesteps(3), [7, 8, 9])


def test_store_casts_same_kind_inputs():
    memory = make("latest", 4)
    memory.store({"states/x": [[1.0, 2.0]], "actions/a": [3], "terminal": [True], "reward": [0.5]})
    batch = memory.retrieve_timesteps(1)
    assert batch["terminal"].tolist() == [1] and batch["reward"].tolist() == [0.5]


def test_retrievals_are_copies():
    memory = make("latest", 4)
    memory.store(rows([0, 1]))
    batch = memory.retrieve_timesteps(2)
    batch["reward"][:] = 99
    batch["states/x"][:] = 99
    check_rows(memory.retrieve_timesteps(2), [0, 1])


def episodes_memory(kind="latest", capacity=10):
    """Episodes A = 0..2 (terminal 1), B = 3..4 (terminal 2), C = 5..7 (terminal 1), then 8..9 unfinished."""
    memory = make(kind, capacity)
    memory.store(rows(range(10), terminal=[0, 0, 1, 0, 2, 0, 0, 1, 0, 0]))
    return memory


def test_latest_episodes_are_the_most_recent_complete_ones():
    memory = episodes_memory()
    assert memory.num_episodes == 3
    check_rows(memory.retrieve_episodes(1), [5, 6, 7])
    check_rows(memory.retrieve_episodes(2), [3, 4, 5, 6, 7])
    check_rows(memory.retrieve_episodes(3), list(range(8)))
    with pytest.raises(ValueError, match=re.escape("cannot retrieve 4 complete episodes: the memory holds 10 rows, 3")):
        memory.retrieve_episodes(4)


def test_latest_episodes_skip_a_partially_overwritten_oldest_episode():
    memory = episodes_memory()
    memory.store(rows([10, 11], terminal=[0, 1]))  # overwrites 0 and 1: episode A is partial, D = 8..11 complete
    assert memory.num_episodes == 3
    check_rows(memory.retrieve_episodes(3), list(range(3, 12)))
    with pytest.raises(ValueError, match="cannot retrieve 4 complete episodes: the memory holds 10 rows, 3 complete"):
        memory.retrieve_episodes(4)
    memory.store(rows([12]))  # overwrites 2, the end of A: the oldest row now starts B
    assert memory.num_episodes == 3
    batch = memory.retrieve_episodes(3)
    check_rows(batch, list(range(3, 12)))
    assert batch["indices"].tolist() == [3, 4, 5, 6, 7, 8, 9, 0, 1]
    memory.store(rows([13]))  # overwrites 3: B is partial
    assert memory.num_episodes == 2
    check_rows(memory.retrieve_episodes(2), list(range(5, 12)))


def test_latest_sequences_do_not_cross_episode_ends():
    memory = make("latest", 10)
    memory.store(rows(range(8), terminal=[0, 0, 1, 0, 0, 1, 0, 0]))
    # windows of 3 may end an episode only at their last row: they start at 0 (0 1 2) and 3 (3 4 5)
    check_rows(memory.retrieve_sequences(1, 3), [3, 4, 5])
    check_rows(memory.retrieve_sequences(2, 3), [0, 1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match=re.escape("cannot retrieve 3 sequences of length 3: the memory holds 2 such")):
        memory.retrieve_sequences(3, 3)
    memory.store(rows([8, 9]))  # now also 6 7 8 and 7 8 9 (overlapping, most recent last)
    check_rows(memory.retrieve_sequences(2, 3), [6, 7, 8, 7, 8, 9])
    check_rows(memory.retrieve_sequences(3, 1), [7, 8, 9])


def test_latest_sequences_across_the_ring_boundary():
    memory = make("latest", 5)
    memory.store(rows(range(4)))
    memory.store(rows(range(4, 7)))
    batch = memory.retrieve_sequences(2, 4)
    check_rows(batch, [2, 3, 4, 5, 3, 4, 5, 6])
    assert batch["indices"].tolist() == [2, 3, 4, 0, 3, 4, 0, 1]
    with pytest.raises(ValueError, match="cannot retrieve 1 sequences of length 6: the memory holds 0 such windows"):
        memory.retrieve_sequences(1, 6)


# replay


def test_replay_samples_uniformly_with_the_memory_rng():
    memory = make("replay", 6, seed=3)
    assert isinstance(memory, Replay)
    memory.store(rows(range(4)))
    memory.store(rows(range(4, 8)))  # stored: 6 7 2 3 4 5 at storage indices 0..5
    expected = np.random.default_rng(3).integers(0, 6, size=20)
    batch = memory.retrieve_timesteps(20)
    assert batch["indices"].tolist() == expected.tolist()
    check_rows(batch, np.array([6, 7, 2, 3, 4, 5])[expected])
    again = make("replay", 6, seed=3)
    again.store(rows(range(4)))
    again.store(rows(range(4, 8)))
    np.testing.assert_array_equal(again.retrieve_timesteps(20)["indices"], expected)
    for _ in range(3):
        np.testing.assert_array_equal(again.retrieve_timesteps(7)["indices"], memory.retrieve_timesteps(7)["indices"])


def test_replay_samples_only_stored_rows_before_the_ring_is_full():
    memory = make("replay", 100)
    memory.store(rows([0, 1, 2]))
    assert set(memory.retrieve_timesteps(200)["indices"].tolist()) == {0, 1, 2}


def test_replay_includes_terminal_rows():
    memory = make("replay", 10)
    memory.store(rows([0, 1], terminal=[1, 2]))
    batch = memory.retrieve_timesteps(50)
    assert len(batch["reward"]) == 50
    assert set(batch["terminal"].tolist()) == {1, 2}
    single = make("replay", 4)
    single.store(rows([5], terminal=[1]))
    check_rows(single.retrieve_timesteps(3), [5, 5, 5])


def test_replay_episodes_are_distinct_complete_episodes():
    memory = episodes_memory("replay")
    episodes = {0: [0, 1, 2], 1: [3, 4], 2: [5, 6, 7]}
    order = np.random.default_rng(0).choice(3, size=3, replace=False)
    check_rows(memory.retrieve_episodes(3), sum((episodes[k] for k in order), []))
    for _ in range(20):
        ids = ids_of(memory.retrieve_episodes(2))
        assert ids in (
            [0, 1, 2, 3, 4],
            [3, 4, 0, 1, 2],
            [0, 1, 2, 5, 6, 7],
            [5, 6, 7, 0, 1, 2],
            [3, 4, 5, 6, 7],
            [5, 6, 7, 3, 4],
        )
    with pytest.raises(ValueError, match="cannot retrieve 4 complete episodes: the memory holds 10 rows, 3 complete"):
        memory.retrieve_episodes(4)


def test_replay_sequences_are_valid_windows():
    memory = make("replay", 10)
    memory.store(rows(range(10), terminal=[0, 0, 1, 0, 0, 1, 0, 0, 0, 0]))
    batch = memory.retrieve_sequences(200, 3)
    windows = batch["reward"].astype(int).reshape(200, 3)
    starts = set(windows[:, 0].tolist())
    assert starts == {0, 3, 6, 7}
    np.testing.assert_array_equal(windows, windows[:, :1] + np.arange(3))
    with pytest.raises(ValueError, match="cannot retrieve 2 sequences of length 11: the memory holds no such window"):
        memory.retrieve_sequences(2, 11)


# sum-tree and prioritized replay


def test_sumtree_sums_and_find():
    tree = SumTree(5)
    assert tree.first_leaf == 8 and tree.depth == 3
    tree.update(np.arange(5), np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert tree.total == 15.0
    np.testing.assert_array_equal(tree.nodes[1:8], [15, 10, 5, 3, 7, 5, 0])
    # cumulative intervals: leaf 0 [0, 1), 1 [1, 3), 2 [3, 6), 3 [6, 10), 4 [10, 15)
    values = [0, 0.5, 1, 2.999, 3, 9.999, 10, 14.999, 15.0]  # 15.0 (rounding) must not reach the empty leaves
    assert tree.find(values).tolist() == [0, 0, 1, 1, 2, 3, 4, 4, 4]
    tree.update(np.array([1]), np.array([0.0]))
    assert tree.total == 13.0
    assert tree.find([0.999, 1.0, 1.5]).tolist() == [0, 2, 2]  # the empty leaf 1 is never found
    tree.update(np.array([4, 4, 0]), np.array([1.0, 1.0, 2.0]))
    np.testing.assert_array_equal(tree.nodes[1:8], [10, 9, 1, 2, 7, 1, 0])
    single = SumTree(1)
    single.update(np.array([0]), np.array([2.5]))
    assert single.total == 2.5 and single.find([0.0, 2.4]).tolist() == [0, 0]


def test_sumtree_range_updates_and_rebuild_match_gathered_updates():
    rng = np.random.default_rng(1)
    tree, by_range, rebuilt = SumTree(37), SumTree(37), SumTree(37)
    for start, n in [(0, 37), (5, 1), (36, 1), (30, 7), (0, 1), (3, 16), (12, 2)]:
        priorities = rng.random(n)
        tree.update(np.arange(start, start + n), priorities)
        by_range.update_range(start, priorities)
        np.testing.assert_array_equal(by_range.nodes, tree.nodes)
    rebuilt.priorities[:] = tree.priorities
    rebuilt.rebuild()
    np.testing.assert_array_equal(rebuilt.nodes, tree.nodes)
    single = SumTree(1)
    single.update_range(0, np.array([4.0]))
    assert single.total == 4.0


def prioritized(capacity=4, seed=0, **kwargs):
    """A prioritized memory holding rows 0..capacity-1 with priorities 1, 2, ..., capacity (alpha 1, epsilon 0)."""
    memory = make(
        "prioritized_replay", capacity, seed, prioritization_weight=1.0, prioritization_constant=0.0, **kwargs
    )
    memory.store(rows(range(capacity)))
    memory.update_priorities(np.arange(capacity), np.arange(1.0, capacity + 1))
    return memory


def test_prioritized_sampling_follows_priorities():
    memory = prioritized()
    assert isinstance(memory, PrioritizedReplay)
    counts = np.zeros(4)
    for _ in range(100):
        batch = memory.retrieve_timesteps(64)
        check_rows(batch, batch["indices"])
        counts += np.bincount(batch["indices"], minlength=4)
    np.testing.assert_allclose(counts / counts.sum(), [0.1, 0.2, 0.3, 0.4], atol=0.01)


def test_prioritized_importance_sampling_weights():
    memory = prioritized(importance_sampling_weight=0.5)
    # total 10 in 10 strata of width 1: the draw in [k, k + 1) always falls in the same leaf
    batch = memory.retrieve_timesteps(10)
    assert batch["indices"].tolist() == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    # w_i = (N * P(i)) ** -0.5 with N = 4, P = p / 10, normalized by the largest (i = 0): sqrt(0.4 / (0.4 * p_i))
    expected = [1.0] + [0.70710678] * 2 + [0.57735027] * 3 + [0.5] * 4
    assert batch["weights"].dtype == np.float32
    np.testing.assert_allclose(batch["weights"], expected, rtol=1e-6)
    no_correction = prioritized(importance_sampling_weight=0.0)
    np.testing.assert_array_equal(no_correction.retrieve_timesteps(10)["weights"], np.ones(10))


def test_update_priorities_sets_priority_from_loss():
    memory = make("prioritized_replay", 4, prioritization_weight=0.5, prioritization_constant=1.0)
    memory.store(rows([0, 1, 2]))
    np.testing.assert_array_equal(memory.priorities, [1, 1, 1, 0])  # new rows: max priority, 1 at first
    memory.update_priorities(np.array([0, 2]), np.array([-3.0, 8.0]))  # (|loss| + 1) ** 0.5
    np.testing.assert_array_equal(memory.priorities, [2, 1, 3, 0])
    memory.update_priorities(np.array([2]), np.array([0.0]))
    memory.store(rows([3]))  # the largest priority so far (3), even after row 2 went down
    np.testing.assert_array_equal(memory.priorities, [2, 1, 1, 3])


def test_new_rows_get_the_max_priority_across_the_ring_boundary():
    memory = prioritized(capacity=4)  # priorities 1 2 3 4
    memory.store(rows([4, 5]))  # storage indices 0 and 1
    np.testing.assert_array_equal(memory.priorities, [4, 4, 3, 4])
    memory.update_priorities(np.array([2]), np.array([6.0]))
    memory.store(rows([6, 7, 8]))  # wraps inside the batch: storage indices 2, 3, 0
    np.testing.assert_array_equal(memory.priorities, [6, 4, 6, 6])
    nodes = memory._tree.nodes
    np.testing.assert_array_equal(nodes[1:4], [22, 10, 12])


def test_update_priorities_changes_what_is_sampled():
    memory = prioritized()
    memory.update_priorities(np.array([0, 1, 2, 3]), np.array([0.0, 5.0, 0.0, 5.0]))
    drawn = memory.retrieve_timesteps(1000)["indices"]
    assert set(drawn.tolist()) == {1, 3}
    memory.update_priorities(np.array([1, 3]), np.array([0.0, 0.0]))
    with pytest.raises(ValueError, match="every stored priority is 0"):
        memory.retrieve_timesteps(1)


def test_update_priorities_errors():
    memory = prioritized()
    with pytest.raises(ValueError, match=re.escape("expected one loss per index, as 1-d arrays; got indices of shape")):
        memory.update_priorities(np.array([0, 1]), np.array([1.0]))
    with pytest.raises(ValueError, match=re.escape("storage indices of stored rows (0 to 3), got values from 0 to 4")):
        memory.update_priorities(np.array([0, 4]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="indices must be integers, got dtype float64"):
        memory.update_priorities(np.array([0.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="the losses must be finite"):
        memory.update_priorities(np.array([0]), np.array([np.nan]))
    with pytest.raises(ValueError, match="prioritized_replay retrieves timesteps only"):
        memory.retrieve_episodes(1)
    with pytest.raises(ValueError, match="prioritized_replay retrieves timesteps only"):
        memory.retrieve_sequences(1, 2)


# saving


def scripted_memory(kind, seed):
    memory = make(kind, 7, seed)
    memory.store(rows(range(5), terminal=[0, 1, 0, 0, 1]))
    memory.store(rows(range(5, 11), terminal=[0, 0, 2, 0, 1, 0]))  # wraps; the oldest episode is partial
    memory.retrieve_timesteps(5)
    if kind == "prioritized_replay":
        memory.update_priorities(np.array([1, 4, 6]), np.array([0.5, 3.0, 2.0]))
    return memory


def assert_same(batch, other):
    assert batch.keys() == other.keys()
    for name in batch:
        np.testing.assert_array_equal(batch[name], other[name])


@pytest.mark.parametrize("kind", ["latest", "replay", "prioritized_replay"])
def test_state_dict_round_trip_after_wraparound(kind):
    memory = scripted_memory(kind, seed=0)
    state = memory.state_dict()
    restored = make(kind, 7, seed=123)
    restored.load_state_dict(state)
    memory.store(rows([50, 51], terminal=[0, 1]))
    memory.load_state_dict(state)  # the saved state is a copy: the stores since do not show in it
    assert len(memory) == len(restored) == 7
    assert memory.num_episodes == restored.num_episodes == 2
    for _ in range(3):
        assert_same(memory.retrieve_timesteps(5), restored.retrieve_timesteps(5))
    if kind == "prioritized_replay":
        np.testing.assert_array_equal(restored.priorities, memory.priorities)
    else:
        assert_same(memory.retrieve_episodes(2), restored.retrieve_episodes(2))
        assert_same(memory.retrieve_sequences(3, 2), restored.retrieve_sequences(3, 2))
    for each in (memory, restored):
        each.store(rows([60, 61, 62]))
    assert_same(memory.retrieve_timesteps(9), restored.retrieve_timesteps(9))


def test_state_dict_restores_contents_and_the_partial_oldest_episode():
    restored = make("latest", 7)
    restored.load_state_dict(scripted_memory("latest", seed=0).state_dict())
    # rows 4..10 are stored; 4 ends an episode whose start was overwritten; 5..7 and 8..9 are complete
    check_rows(restored.retrieve_timesteps(7), [4, 5, 6, 7, 8, 9, 10])
    assert restored.retrieve_timesteps(7)["indices"].tolist() == [4, 5, 6, 0, 1, 2, 3]
    check_rows(restored.retrieve_episodes(2), [5, 6, 7, 8, 9])


@pytest.mark.parametrize("kind", ["replay", "prioritized_replay"])
def test_a_partly_filled_memory_saves_only_its_rows_in_use(kind):
    memory = make(kind, 1000, seed=0)
    memory.store(rows([1, 2, 3], terminal=[0, 0, 1]))
    state = memory.state_dict()
    assert {name: len(values) for name, values in state["data"].items()} == dict.fromkeys(FIELDS, 3)
    restored = make(kind, 1000, seed=5)
    restored.store(rows(range(10, 20)))  # rows beyond the saved ones must not survive the load
    restored.load_state_dict(state)
    assert len(restored) == 3
    assert_same(memory.retrieve_timesteps(8), restored.retrieve_timesteps(8))
    for each in (memory, restored):
        each.store(rows([4, 5]))
    if kind == "replay":
        check_rows(restored.retrieve_episodes(1), [1, 2, 3])
    assert_same(memory.retrieve_timesteps(8), restored.retrieve_timesteps(8))
    assert not restored.state_dict()["data"]["reward"][5:].any() and len(restored.state_dict()["data"]["reward"]) == 5


def test_load_state_dict_errors():
    memory = make("replay", 4)
    with pytest.raises(ValueError, match="the saved memory has capacity 5, this one 4"):
        memory.load_state_dict(make("replay", 5).state_dict())
    other = build_memory({"capacity": 4}, {**FIELDS, "extra": FieldSpec((), np.float32)}, rng=np.random.default_rng())
    with pytest.raises(ValueError, match=re.escape("the saved fields (states/x, actions/a, terminal, reward, extra)")):
        memory.load_state_dict(other.state_dict())
    state = memory.state_dict()
    state["data"]["states/x"] = np.zeros((4, 3), dtype=np.float32)
    with pytest.raises(ValueError, match=re.escape("saved field 'states/x' has shape (4, 3) and dtype float32, exp")):
        memory.load_state_dict(state)
    with pytest.raises(ValueError, match=re.escape("has no priorities (not a prioritized_replay)")):
        make("prioritized_replay", 4).load_state_dict(memory.state_dict())


# errors


def test_store_errors():
    memory = make("replay", 3)
    batch = rows([0])
    del batch["reward"]
    batch["next_states/x"] = batch["states/x"]
    with pytest.raises(ValueError, match=re.escape("missing: reward; unexpected: next_states/x.")):
        memory.store(batch)
    with pytest.raises(ValueError, match=re.escape("field 'states/x' expected shape (n, 2), got (1, 3).")):
        memory.store({**rows([0]), "states/x": np.zeros((1, 3))})
    with pytest.raises(ValueError, match=re.escape("field 'reward' expected shape (n), got ().")):
        memory.store({**rows([0]), "reward": np.float32(1.0)})
    with pytest.raises(
        ValueError, match="every field needs the same number of rows; 'states/x' has 2, 'actions/a' has 1"
    ):
        memory.store({**rows([0, 1]), "actions/a": np.zeros(1, dtype=np.int64)})
    with pytest.raises(ValueError, match="field 'terminal' expected dtype int8, got float64"):
        memory.store({**rows([0]), "terminal": np.zeros(1)})
    with pytest.raises(ValueError, match="cannot store 4 rows at once in a memory of capacity 3"):
        memory.store(rows(range(4)))
    with pytest.raises(ValueError, match="memory.store expects a dict of arrays, got list"):
        memory.store([rows([0])])
    assert len(memory) == 0


@pytest.mark.parametrize("kind", ["latest", "replay", "prioritized_replay"])
def test_a_batch_larger_than_the_memory_names_the_capacity(kind):
    with pytest.raises(SpecError) as caught:
        make(kind, 3).store(rows(range(4)))
    assert caught.value.path == "memory.capacity"
    assert str(caught.value) == (
        "memory.capacity: cannot store 4 rows at once in a memory of capacity 3.\n"
        "  An on-policy agent stores each finished episode whole (update_mode unit 'episodes'), or everything "
        "since its last update (update_mode.frequency): raise memory.capacity above that."
    )


@pytest.mark.parametrize("kind", ["latest", "replay"])
def test_too_few_episodes_in_a_full_memory_blames_the_capacity(kind):
    memory = episodes_memory(kind)  # full: 10 rows, 3 complete episodes
    with pytest.raises(SpecError) as caught:
        memory.retrieve_episodes(4)
    assert str(caught.value) == (
        "memory.capacity: cannot retrieve 4 complete episodes: the memory holds 10 rows, 3 complete episodes, "
        "capacity 10.\n  The memory is full, so its episodes are too long for 4 of them to fit: raise "
        "memory.capacity (it counts timesteps, not episodes), or lower update_mode.batch_size."
    )
    roomy = episodes_memory(kind, capacity=20)  # not full: more episodes may still come, so no blame
    with pytest.raises(ValueError) as caught:
        roomy.retrieve_episodes(4)
    assert not isinstance(caught.value, SpecError)
    assert str(caught.value) == (
        "cannot retrieve 4 complete episodes: the memory holds 10 rows, 3 complete episodes, capacity 20."
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("replay", {"type": "replay", "capacity": 7}),  # a bare name gets the default like {"type": "replay"}
        ({"type": "latest"}, {"type": "latest", "capacity": 7}),
        ({"type": "latest", "capacity": 3}, {"type": "latest", "capacity": 3}),
        ("replay_bufer", "replay_bufer"),  # unknown: left for build_memory to report with a did-you-mean
        ("my.module:Memory", "my.module:Memory"),
        (Replay, Replay),
    ],
)
def test_with_capacity_fills_in_a_default(spec, expected):
    assert with_capacity(spec, 7) == expected


@pytest.mark.parametrize("kind", ["latest", "replay", "prioritized_replay"])
def test_empty_memory_and_bad_requests(kind):
    memory = make(kind, 5)
    with pytest.raises(ValueError, match=re.escape("cannot retrieve 4 timesteps: the memory is empty (capacity 5).")):
        memory.retrieve_timesteps(4)
    with pytest.raises(ValueError, match="retrieve_timesteps: n must be >= 1, got 0"):
        memory.retrieve_timesteps(0)
    with pytest.raises(ValueError, match="retrieve_timesteps: n must be an integer, got 1.5"):
        memory.retrieve_timesteps(1.5)
    if kind != "prioritized_replay":
        with pytest.raises(
            ValueError, match="cannot retrieve 1 complete episodes: the memory holds 0 rows, 0 complete"
        ):
            memory.retrieve_episodes(1)
        with pytest.raises(ValueError, match="cannot retrieve 1 sequences of length 2: the memory holds"):
            memory.retrieve_sequences(1, 2)
        with pytest.raises(ValueError, match="retrieve_sequences: length must be >= 1, got 0"):
            memory.retrieve_sequences(1, 0)


def test_field_errors():
    rng = np.random.default_rng()
    without_terminal = {name: spec for name, spec in FIELDS.items() if name != "terminal"}
    with pytest.raises(ValueError, match=re.escape("memory fields must include 'terminal' (shape (), int8); got")):
        build_memory({"capacity": 2}, without_terminal, rng=rng)
    with pytest.raises(ValueError, match="memory field 'reward' must have shape \\(\\) and dtype float32, got shape"):
        build_memory({"capacity": 2}, {**FIELDS, "reward": FieldSpec((), np.float64)}, rng=rng)
    with pytest.raises(ValueError, match="memory field name 'weights' is reserved"):
        build_memory({"capacity": 2}, {**FIELDS, "weights": FieldSpec((), np.float32)}, rng=rng)
    with pytest.raises(TypeError, match="memory field 'reward' must be a FieldSpec, got tuple"):
        build_memory({"capacity": 2}, {**FIELDS, "reward": ((), np.float32)}, rng=rng)
    with pytest.raises(TypeError, match="memory rng must be a numpy Generator, got int"):
        build_memory({"capacity": 2}, FIELDS, rng=0)
    with pytest.raises(ValueError, match="FieldSpec: shape sizes must be >= 0"):
        FieldSpec((-1,), np.float32)


def test_fieldspec_normalizes():
    spec = FieldSpec([3, np.int64(2)], "float32")
    assert spec == FieldSpec((3, 2), np.float32) and spec.dtype is np.dtype(np.float32) and spec.shape == (3, 2)
    with pytest.raises(AttributeError):
        spec.shape = (1,)


# specs


def test_build_memory_specs():
    rng = np.random.default_rng()
    assert sorted(MEMORIES.names()) == ["latest", "prioritized_replay", "replay"]
    memory = build_memory({"type": "replay", "capacity": 10000, "include_next_states": True}, FIELDS, rng=rng)
    assert isinstance(memory, Replay) and memory.include_next_states is True and memory.capacity == 10000
    assert isinstance(build_memory({"capacity": 3}, FIELDS, rng=rng), Replay)  # the default type
    assert isinstance(build_memory({"capacity": 3}, FIELDS, rng=rng, default="latest"), Latest)
    assert build_memory(memory, FIELDS, rng=rng) is memory
    per = build_memory({"type": "prioritized_replay", "capacity": 8, "buffer_size": 100}, FIELDS, rng=rng)
    assert (per.prioritization_weight, per.prioritization_constant, per.importance_sampling_weight) == (1.0, 1e-6, 0.4)
    assert per.buffer_size == 100 and isinstance(per, Memory)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"type": "replay_buffer", "capacity": 3},
            'memory.type: unknown memory "replay_buffer".\n  Known: latest, '
            "prioritized_replay, replay. Did you mean 'replay'?",
        ),
        ({"type": "replay", "capacity": 3, "capacty": 4}, "memory.capacty: unknown argument"),
        ({"type": "replay", "capacity": 0}, "memory.capacity: out of range; expected an integer >= 1, got 0."),
        (
            {"type": "latest", "capacity": "ten"},
            'memory.capacity: not an integer; expected an integer >= 1, got "ten".',
        ),
        ({"type": "replay", "capacity": 3, "include_next_states": 1}, "memory.include_next_states: not a boolean"),
        (
            {"type": "prioritized_replay", "capacity": 3, "importance_sampling_weight": 1.5},
            "memory.importance_sampling_weight: out of range; expected a number in [0.0, 1.0], got 1.5.",
        ),
        (
            {"type": "prioritized_replay", "capacity": 3, "prioritization_constant": -1},
            "memory.prioritization_constant: out of range",
        ),
        ({"type": "prioritized_replay", "capacity": 3, "buffer_size": -1}, "memory.buffer_size: out of range"),
    ],
)
def test_build_memory_spec_errors(spec, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        build_memory(spec, FIELDS, rng=np.random.default_rng())


def test_spec_error_paths_nest():
    with pytest.raises(SpecError, match=re.escape("agent.memory.capacity: out of range")):
        build_memory({"capacity": -2}, FIELDS, rng=np.random.default_rng(), path="agent.memory")
    with pytest.raises(SpecError, match=re.escape("agent.memory: ")) as error:
        build_memory("latest", FIELDS, rng=np.random.default_rng(), path="agent.memory")
    assert "needs 'capacity'" in str(error.value)
    with pytest.raises(SpecError, match=re.escape("memory.capacty: unknown argument")) as error:
        build_memory({"capacity": 3, "capacty": 4}, FIELDS, rng=np.random.default_rng())
    assert "Did you mean 'capacity'?" in str(error.value)


def test_an_optional_field_left_out_is_zeros_where_stored_and_loaded():
    fields = {**FIELDS, "acted/v": FieldSpec((), np.float32, optional=True)}
    memory = build_memory({"type": "latest", "capacity": 3}, fields, rng=np.random.default_rng(0))
    memory.store({**rows([1, 2]), "acted/v": np.array([5.0, 6.0], np.float32)})
    memory.store(rows([3, 4]))  # overwrites row 1's slot: no 5.0 may survive there
    assert memory.contents()["acted/v"].tolist() == [6.0, 0.0, 0.0]
    state = memory.state_dict()
    state["data"] = {name: data for name, data in state["data"].items() if name != "acted/v"}
    memory.store({**rows([5]), "acted/v": np.array([7.0], np.float32)})
    memory.load_state_dict(state)
    assert ids_of(memory.contents()) == [2, 3, 4] and memory.contents()["acted/v"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="missing: states/x"):
        memory.store({name: values for name, values in rows([6]).items() if name != "states/x"})  # not optional


def test_an_optional_field_with_a_fallback_left_out_copies_it_where_stored_and_loaded():
    fields = {**FIELDS, "states/y": FieldSpec((2,), np.float32, optional=True, fallback="states/x")}
    memory = build_memory({"type": "latest", "capacity": 3}, fields, rng=np.random.default_rng(0))
    memory.store({**rows([1]), "states/y": np.array([[9.0, 9.0]], np.float32)})
    memory.store(rows([2, 3]))  # left out: a copy of states/x
    assert memory.contents()["states/y"].tolist() == [[9.0, 9.0], [2.0, -2.0], [3.0, -3.0]]
    state = memory.state_dict()
    state["data"] = {name: data for name, data in state["data"].items() if name != "states/y"}
    memory.store({**rows([4]), "states/y": np.array([[7.0, 7.0]], np.float32)})
    memory.load_state_dict(state)  # saved without it: a copy of states/x, the 9.0s gone with the saved rows
    assert memory.contents()["states/y"].tolist() == [[1.0, -1.0], [2.0, -2.0], [3.0, -3.0]]


@pytest.mark.parametrize(
    "spec",
    [
        FieldSpec((2,), np.float32, fallback="states/x"),  # not optional
        FieldSpec((2,), np.float32, optional=True, fallback="states/z"),  # no such field
        FieldSpec((3,), np.float32, optional=True, fallback="states/x"),  # another shape
        FieldSpec((2,), np.float64, optional=True, fallback="states/x"),  # another dtype
    ],
)
def test_a_fallback_must_be_another_field_of_the_same_shape_and_dtype(spec):
    with pytest.raises(ValueError, match=re.escape("memory field 'states/y': its fallback")):
        build_memory({"type": "latest", "capacity": 3}, {**FIELDS, "states/y": spec}, rng=np.random.default_rng(0))


def test_a_frames_field_with_a_fallback_left_out_copies_it_and_keeps_the_copy_through_a_save():
    """The same for image states kept as frames (``stacked_frames``): a left-out field's frames are its fallback's."""
    frames = {"states/x": FieldSpec((2, 32, 32), np.uint8), "terminal": FIELDS["terminal"], "reward": FIELDS["reward"]}
    fields = {**frames, "states/y": FieldSpec((2, 32, 32), np.uint8, optional=True, fallback="states/x")}
    memory = build_memory(
        {"type": "latest", "capacity": 4, "stacked_frames": True}, fields, rng=np.random.default_rng(0)
    )
    images = np.arange(3 * 2 * 32 * 32).reshape(3, 2, 32, 32).astype(np.uint8)
    batch = {"states/x": images, "terminal": np.zeros(3, np.int8), "reward": np.zeros(3, np.float32)}
    memory.store(batch)
    np.testing.assert_array_equal(memory.contents()["states/y"], images)
    state = memory.state_dict()
    memory.load_state_dict(state)
    np.testing.assert_array_equal(memory.contents()["states/y"], images)


@pytest.mark.parametrize("priorities", [[1.0, 2.0], [1.0, float("nan"), 3.0, 4.0], [1.0, -2.0, 3.0, 4.0]])
def test_saved_priorities_that_do_not_fit_change_nothing(priorities):
    """The priorities are checked with the rows, before anything is loaded: a memory is never left half-loaded
    (the rows of the state beside the priorities it had)."""
    memory = prioritized()
    state = prioritized(seed=3).state_dict()
    state["data"] = {name: values[::-1].copy() for name, values in state["data"].items()}
    state["priorities"] = np.array(priorities)
    before = memory.state_dict()
    with pytest.raises(ValueError, match="saved priorities"):
        memory.load_state_dict(state)
    after = memory.state_dict()
    assert all(np.array_equal(before["data"][name], after["data"][name]) for name in before["data"])
    assert np.array_equal(before["priorities"], after["priorities"])
