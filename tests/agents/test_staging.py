"""The time-major staging of transitions (``agents/episodes.Staging``) as the memory sees it: on-policy segments row
after row, cut with terminal 2 where they stand; rows that end at different steps, truncations with their final
states, segments written in the middle of a step (an update due at ``observe``), checkpoints taken mid-episode, and
rows whose episodes differ so much in length that the buffer moves and grows."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from torchforce.agents import create_agent
from torchforce.spec import SpecError, SpecWarning

ROWS = 3


def on_policy(unit: str = "timesteps", capacity: int = 1000):
    """A PPO agent on states [row, t] that never updates by itself (its first update never comes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the first update's steps would not fit in the memory: it never comes
        return create_agent(
            {
                "type": "ppo",
                "network": [{"type": "dense", "size": 4}],
                "update_mode": {"unit": unit, "batch_size": 10, "first_update": 10**6},
                "memory": {"type": "latest", "capacity": capacity},
                "seed": 0,
            },
            states={"type": "float", "shape": (2,)},
            actions={"type": "int", "num_actions": 2},
        )


def states(t: int, rows: int = ROWS) -> np.ndarray:
    return np.array([[row, t] for row in range(rows)], dtype=np.float32)


def step(agent, t: int, terminal: list[int], next_states: np.ndarray | None = None) -> None:
    agent.act(states(t, len(terminal)))
    rewards = [10.0 * row + t for row in range(len(terminal))]
    agent.observe(terminal=terminal, reward=rewards, next_states=next_states)


def stored(agent) -> dict[str, np.ndarray]:
    """Everything in the memory, oldest first, after writing what is staged (as an update on timesteps does)."""
    agent._store(agent.episodes.flush())
    return agent.memory.retrieve_timesteps(len(agent.memory))


def pairs(values: np.ndarray) -> list[list[int]]:
    return values.astype(int).tolist()


FINAL = np.array([[0, 0], [0, 0], [2, 99]], dtype=np.float32)  # the final state of row 2's truncated episode


def first_steps(agent) -> None:
    """t=0..2: row 1 ends at t=1, row 2 is truncated at t=2 (final state [2, 99])."""
    step(agent, 0, [0, 0, 0])
    step(agent, 1, [0, 1, 0])
    step(agent, 2, [0, 0, 2], next_states=FINAL)


def test_segments_are_written_row_after_row_and_cut_where_they_stand() -> None:
    agent = on_policy()
    first_steps(agent)
    step(agent, 3, [0, 0, 0])
    memory = stored(agent)
    # row 0: t=0..2 (t=3 waits for its next state), cut; row 1: its episode's end at t=1, then t=2, cut; row 2: t=0..2,
    # ended by the truncation, whose next state is the final state
    assert pairs(memory["states/state"]) == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [2, 0], [2, 1], [2, 2]]
    assert pairs(memory["next_states/state"]) == [
        [0, 1],
        [0, 2],
        [0, 3],
        [1, 1],
        [1, 1],
        [1, 3],
        [2, 1],
        [2, 2],
        [2, 99],
    ]
    assert memory["terminal"].tolist() == [0, 0, 2, 0, 1, 2, 0, 0, 2]
    assert memory["reward"].tolist() == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    # what stayed: every row's step t=3; t=4 completes it, and row 0 ends there, so only row 0 has t=4 to write
    step(agent, 4, [1, 0, 0])
    memory = stored(agent)
    assert pairs(memory["states/state"][9:]) == [[0, 3], [0, 4], [1, 3], [2, 3]]
    assert pairs(memory["next_states/state"][9:]) == [[0, 4], [0, 4], [1, 4], [2, 4]]
    assert memory["terminal"][9:].tolist() == [0, 1, 2, 2]
    assert agent.episodes.completed == {"timesteps": 13, "episodes": 3}


def test_a_checkpoint_taken_mid_episode_continues_as_the_agent_would_have() -> None:
    def go_on(agent) -> dict[str, np.ndarray]:
        step(agent, 3, [0, 0, 1])
        step(agent, 4, [0, 0, 0])
        return stored(agent)

    agent = on_policy()
    first_steps(agent)
    state = agent.state_dict()
    assert state["segments"]["lengths"].tolist() == [2, 2, 3]  # t=2 of rows 0 and 1 waits; row 2's ended there
    assert state["open"]["waiting"].tolist() == [True, True, False]
    assert pairs(state["open"]["record"]["states/state"]) == pairs(states(2))
    expected = go_on(agent)
    restored = on_policy()
    restored.load_state_dict(state)  # after the agent went on, since acting draws from the RNG state it restores
    memory = go_on(restored)
    assert expected.keys() == memory.keys()
    for name, values in expected.items():
        np.testing.assert_array_equal(memory[name], values, err_msg=name)
    assert len(memory["terminal"]) == 3 * 4


def test_a_checkpoint_taken_between_act_and_observe_continues_as_the_agent_would_have() -> None:
    agent = on_policy()
    first_steps(agent)
    agent.act(states(3))
    state = agent.state_dict()
    assert state["rows"]["acted"] and state["segments"]["lengths"].tolist() == [3, 3, 3]
    rewards = [3.0, 13.0, 23.0]
    agent.observe(terminal=[1, 0, 0], reward=rewards)
    expected = stored(agent)
    restored = on_policy()
    restored.load_state_dict(state)
    restored.observe(terminal=[1, 0, 0], reward=rewards)
    assert restored.state_dict()["segments"]["lengths"].tolist() == [4, 3, 3]  # no longer the state it read
    memory = stored(restored)
    for name, values in expected.items():
        np.testing.assert_array_equal(memory[name], values, err_msg=name)
    assert pairs(memory["states/state"][:4]) == [[0, 0], [0, 1], [0, 2], [0, 3]]  # row 0 ended at t=3: written
    assert memory["terminal"][:4].tolist() == [0, 0, 0, 1]


def test_segments_due_at_observe_take_the_steps_of_the_rows_that_just_ended() -> None:
    """An update can come due in ``observe`` (the schedule counts the rows that end there): those rows' last step is
    complete and written, the others' waits for the next act and starts their next segment."""
    agent = on_policy()
    step(agent, 0, [0, 0, 0])
    step(agent, 1, [1, 0, 1])
    memory = stored(agent)  # as an update at this observe writes it
    assert pairs(memory["states/state"]) == [[0, 0], [0, 1], [1, 0], [2, 0], [2, 1]]
    assert memory["terminal"].tolist() == [0, 1, 2, 0, 1]
    step(agent, 2, [0, 0, 0])  # completes row 1's t=1; every row's t=2 waits
    memory = stored(agent)
    assert pairs(memory["states/state"][5:]) == [[1, 1]]
    assert pairs(memory["next_states/state"][5:]) == [[1, 2]]
    assert memory["terminal"][5:].tolist() == [2]


def test_episodes_of_very_different_lengths_keep_their_steps_in_order() -> None:
    """Row 0 plays an episode of 10 steps, then one of 140, while row 1 finishes one every 5: the buffer moves the
    rows' steps back (64 slots at first) and doubles, and every episode reaches the memory whole, in order, when it
    ends."""
    agent = on_policy("episodes", capacity=5000)
    ends = {0: (9, 149), 1: tuple(range(4, 150, 5))}
    for t in range(150):
        step(agent, t, [int(t in ends[0]), int(t in ends[1])])
    memory = agent.memory.retrieve_timesteps(len(agent.memory))
    expected = []  # (row, first t, last t) of every episode, in the order they end (rows in order within a step)
    for t in range(150):
        for row in (0, 1):
            if t in ends[row]:
                previous = [last for last in ends[row] if last < t]
                expected.append((row, previous[-1] + 1 if previous else 0, t))
    bounds = np.flatnonzero(memory["terminal"]) + 1
    episodes = np.split(memory["states/state"].astype(int), bounds)[:-1]
    assert [(e[0, 0], e[0, 1], e[-1, 1]) for e in episodes] == expected
    assert all(pairs(e) == [[e[0, 0], t] for t in range(e[0, 1], e[-1, 1] + 1)] for e in episodes)
    following = np.split(memory["next_states/state"].astype(int), bounds)[:-1]
    assert all((f[:-1] == e[1:]).all() and (f[-1] == e[-1]).all() for e, f in zip(episodes, following, strict=True))


def test_staged_steps_beyond_the_capacity_are_written_row_by_row() -> None:
    """What the rows staged is written as one batch when it fits the memory, else one segment per row, as each
    row's segment always was: the memory keeps the newest rows, and a segment longer than the memory is an error."""
    agent = on_policy(capacity=500)
    for t in range(200):
        step(agent, t, [0, 0, 0])
    memory = stored(agent)  # 3 x 199 complete steps into 500 rows: the newest from row 0's t=97 on
    assert len(memory["terminal"]) == 500
    assert pairs(memory["states/state"][[0, 101, 102, 499]]) == [[0, 97], [0, 198], [1, 0], [2, 198]]
    assert memory["terminal"][[100, 101, 102, 499]].tolist() == [0, 2, 0, 2]
    small = on_policy(capacity=100)
    for t in range(120):
        step(small, t, [0, 0, 0])
    with pytest.raises(SpecError, match="cannot store 119 rows at once"):
        stored(small)


def test_an_on_policy_batch_that_is_no_multiple_of_the_environments_warns():
    # the memory holds each environment's steps one after another, and an update reads its newest rows: a batch
    # of 10 over 3 environments leaves environment 0's first steps out and reads environment 2's twice
    def agent(batch_size: int):
        return create_agent(
            {
                "type": "ppo",
                "network": [{"type": "dense", "size": 4}],
                "update_mode": {"unit": "timesteps", "batch_size": batch_size, "frequency": batch_size},
                "seed": 0,
            },
            states={"type": "float", "shape": (2,)},
            actions={"type": "int", "num_actions": 2},
        )

    with pytest.warns(SpecWarning, match="with 3 environments, an on-policy update reads the newest 10 rows"):
        agent(10).act(states(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent(12).act(states(0))  # 4 acts of 3 rows: every update reads exactly what was written since the last


@pytest.mark.parametrize(
    ("mode", "counts", "again"),
    [
        # each environment's 8 rows an update hold 5 windows of 4: 15, of which the newest 12 are read
        ({"batch_size": 12, "frequency": 24, "first_update": 24}, {0: 2, 1: 5, 2: 5}, False),
        # the first update's 4 rows each hold 2 windows of 3; the next ones' 2 rows none: the same 6 read again
        ({"batch_size": 6, "length": 3}, {0: 2, 1: 2, 2: 2}, True),
    ],
)
def test_an_on_policy_update_on_sequences_over_environments_warns_where_it_reads_them_unevenly(mode, counts, again):
    # the memory holds each environment's steps one after another, cut at the update, and an update reads the
    # newest windows: they are the last environments' unless the numbers give every environment the same windows
    message = "with 3 environments, an on-policy update on sequences reads the newest"
    with pytest.warns(SpecWarning, match=message):
        starts = sequence_starts({"length": 4, **mode})
    assert {row: len(windows) for row, windows in starts[0].items()} == counts
    assert (starts[1] == starts[0]) == again


def test_an_on_policy_update_on_sequences_that_gives_each_environment_its_windows_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # each environment's 8 rows an update hold 5 windows of 4: 3 x 5 = 15 = 24 - 3 x (4 - 1)
        starts = sequence_starts({"batch_size": 15, "frequency": 24, "length": 4})
    assert starts == [{row: list(range(t, t + 5)) for row in range(ROWS)} for t in (0, 8, 16)]


def sequence_starts(mode: dict) -> list[dict[int, list[int]]]:
    """The windows PPO's first three updates on sequences over 3 environments read: per row, their first t."""
    agent = create_agent(
        {"type": "ppo", "network": [{"type": "dense", "size": 4}], "update_mode": {"unit": "sequences", **mode}},
        states={"type": "float", "shape": (2,)},
        actions={"type": "int", "num_actions": 2},
    )
    reads, retrieve = [], agent.memory.retrieve_sequences
    agent.memory.retrieve_sequences = lambda n, length: reads.append(retrieve(n, length)) or reads[-1]
    t = 0
    while len(reads) < 3:
        step(agent, t, [0] * ROWS)
        t += 1
    starts = []
    for read in reads:
        firsts = read["states/state"].astype(int)[:: agent.update_mode.length]
        starts.append({row: [int(t) for r, t in firsts if r == row] for row in range(ROWS)})
    return starts
