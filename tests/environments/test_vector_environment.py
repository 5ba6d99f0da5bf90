"""VectorEnvironment: batching, auto-reset and final_states, sync == subprocess, worker errors, clean shutdown."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from tests.tiny_environments import OneNumber
from torchforce.environments import (
    Environment,
    Minimal,
    MultiState,
    VectorEnvironment,
    VectorEnvironmentError,
    VectorStep,
    make,
    make_vector,
)
from torchforce.spec import SpecError


class Failing(Minimal):
    """Fails on its third step."""

    def execute(self, actions):
        if self._timestep == 2:
            raise ZeroDivisionError("this environment fails on purpose")
        return super().execute(actions)


def reference_rollout(environments: list[Environment], actions: np.ndarray) -> list[tuple]:
    """What a VectorEnvironment must return, computed copy by copy with plain Environment calls."""
    states = [env.reset() for env in environments]
    steps = []
    for row_actions in actions:
        terminals, rewards, finals = [], [], []
        for i, env in enumerate(environments):
            state, terminal, reward = env.execute(row_actions[i])
            finals.append(state)
            states[i] = env.reset() if terminal else state
            terminals.append(terminal)
            rewards.append(reward)
        steps.append((np.stack(states), np.array(terminals), np.array(rewards, np.float32), np.stack(finals)))
    return steps


def rollout(vector: VectorEnvironment, actions: np.ndarray) -> list[VectorStep]:
    vector.reset()
    return [vector.execute(row) for row in actions]


def cartpole_actions(steps: int, n: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 2, size=(steps, n))


def test_sync_matches_stepping_each_copy_by_hand():
    n, steps = 4, 60
    actions = cartpole_actions(steps, n)
    expected = reference_rollout(
        [make("CartPole-v1", max_episode_timesteps=15, seed=10 + i) for i in range(n)], actions
    )
    vector = make_vector({"type": "gym", "gym_id": "CartPole-v1", "max_episode_timesteps": 15}, n, seed=10)
    got = rollout(vector, actions)
    ended = {1: 0, 2: 0}
    for step, (states, terminal, reward, final) in zip(got, expected, strict=True):
        assert step.terminal.dtype == np.int8 and step.reward.dtype == np.float32 and step.states.dtype == np.float32
        np.testing.assert_array_equal(step.states, states)
        np.testing.assert_array_equal(step.terminal, terminal)
        np.testing.assert_array_equal(step.reward, reward)
        np.testing.assert_array_equal(step.final_states, final)
        for value in step.terminal[step.terminal > 0]:
            ended[int(value)] += 1
    assert ended[1] > 0 and ended[2] > 0  # both kinds of episode end were exercised


def test_auto_reset_and_final_states():
    vector = VectorEnvironment([Minimal("float", episode_length=3, seed=i) for i in range(3)])
    first = vector.reset()
    assert first.shape == (3, 1)
    step = vector.execute(np.zeros(3))
    assert step.final_states is step.states  # nothing ended: the final states are the current ones
    vector.execute(np.zeros(3))
    before = vector.execute(np.zeros(3))
    assert before.terminal.tolist() == [1, 1, 1]
    assert not np.array_equal(before.final_states, before.states)  # last state of the episode vs the new first
    assert all(env._timestep == 0 for env in vector.environments)  # every copy was reset
    assert vector.execute(np.zeros(3)).terminal.tolist() == [0, 0, 0]


def test_named_states_and_actions():
    vector = VectorEnvironment(factory=lambda: MultiState(episode_length=2), num_environments=3)
    vector.seed(0)
    assert vector.states == MultiState().states and vector.actions == MultiState().actions
    states = vector.reset()
    assert states["float"].shape == (3, 2) and states["int"].dtype == np.int64 and states["bool"].shape == (3,)
    actions = {
        "int": states["int"],
        "bool": states["bool"],
        "float": states["float"][:, 0],
        "bounded": states["float"][:, 1],
    }
    step = vector.execute(actions)
    np.testing.assert_array_equal(step.reward, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="actions must be a dict of arrays"):
        vector.execute({"int": actions["int"]})


def test_copy_false_hands_out_the_buffers():
    vector = make_vector("minimal", 2, seed=0, copy=False)
    first = vector.reset()
    step = vector.execute(np.array([0, 1]))
    assert step.states is first  # overwritten in place
    copied = make_vector("minimal", 2, seed=0)
    assert copied.reset() is not copied.execute(np.array([0, 1])).states


def test_seed_gives_copy_i_seed_plus_i():
    vector = make_vector("CartPole-v1", 3)
    assert vector.seed(5) == [5, 6, 7]
    states = vector.reset()
    for i in range(3):
        np.testing.assert_array_equal(states[i], make("CartPole-v1", seed=5 + i).reset())


@pytest.mark.parametrize("spec", [{"type": "gym", "gym_id": "CartPole-v1", "seed": 5}, {"type": "minimal", "seed": 5}])
def test_a_seed_in_the_spec_gives_copy_i_that_seed_plus_i(spec):
    """Copies built from a spec that holds a seed would all start alike: the seed is taken as make_vector's."""
    vector = make_vector(spec, 3)
    states = vector.reset()
    for i in range(3):
        np.testing.assert_array_equal(states[i], make({**spec, "seed": 5 + i}).reset())
    assert len({row.tobytes() for row in states}) == 3
    vector.close()


def test_wrong_action_batch_is_a_clear_error():
    vector = make_vector("CartPole-v1", 2)
    vector.reset()
    with pytest.raises(ValueError, match="expected 2 rows"):
        vector.execute(np.zeros(3, dtype=np.int64))


def test_bad_arguments():
    with pytest.raises(SpecError, match="give either environments or factory"):
        VectorEnvironment()
    with pytest.raises(SpecError, match="mode: unknown value"):
        VectorEnvironment([Minimal()], mode="threads")
    with pytest.raises(SpecError, match="other states/actions"):
        VectorEnvironment([Minimal("int"), Minimal("bool")])


# ------------------------------------------------------------------------------------------------------ subprocess


def our_children_are_gone(vector: VectorEnvironment) -> None:
    assert vector._processes and all(not p.is_alive() and p.exitcode is not None for p in vector._processes)
    assert not set(multiprocessing.active_children()) & set(vector._processes)


def test_subprocess_matches_sync_and_closes_cleanly():
    n, steps = 5, 80
    actions = cartpole_actions(steps, n)
    spec = {"type": "gym", "gym_id": "CartPole-v1", "max_episode_timesteps": 12}
    with make_vector(spec, n, seed=3) as sync:
        expected = rollout(sync, actions)
    with make_vector(spec, n, mode="subprocess", seed=3, num_workers=2) as vector:
        assert vector._chunks == [(0, 2), (2, 5)] or vector._chunks == [(0, 3), (3, 5)]
        assert vector.states == sync.states and vector.actions == sync.actions
        got = rollout(vector, actions)
        assert vector.seed(None) == [None] * n
    for a, b in zip(got, expected, strict=True):
        for field in VectorStep._fields:
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert sum((s.terminal > 0).sum() for s in got) > 0
    our_children_are_gone(vector)
    vector.close()  # closing twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        vector.reset()


def test_subprocess_named_specs_from_environment_list():
    environments = [MultiState(episode_length=2, seed=i) for i in range(3)]
    vector = VectorEnvironment(environments, mode="subprocess", num_workers=3)
    try:
        sync = VectorEnvironment([MultiState(episode_length=2, seed=i) for i in range(3)])
        states, expected = vector.reset(), sync.reset()
        for name in expected:
            np.testing.assert_array_equal(states[name], expected[name])
        actions = {"int": np.array([0, 1, 2]), "bool": np.ones(3, bool), "float": np.zeros(3), "bounded": np.zeros(3)}
        for _ in range(3):
            got, want = vector.execute(actions), sync.execute(actions)
            np.testing.assert_array_equal(got.reward, want.reward)
            np.testing.assert_array_equal(got.terminal, want.terminal)
            for name in want.states:
                np.testing.assert_array_equal(got.states[name], want.states[name])
                np.testing.assert_array_equal(got.final_states[name], want.final_states[name])
    finally:
        vector.close()
    our_children_are_gone(vector)


def test_worker_errors_carry_the_traceback():
    vector = VectorEnvironment(factory=lambda: Failing("int"), num_environments=2, mode="subprocess", num_workers=2)
    try:
        vector.reset()
        vector.execute(np.zeros(2, dtype=np.int64))
        vector.execute(np.zeros(2, dtype=np.int64))
        with pytest.raises(VectorEnvironmentError, match="(?s)environment worker 0 .*ZeroDivisionError.*on purpose"):
            vector.execute(np.zeros(2, dtype=np.int64))
    finally:
        vector.close()
    our_children_are_gone(vector)


def test_a_killed_worker_is_a_vector_error_and_the_others_stay_in_step():
    """A worker process that died (killed, out of memory) fails the next command with a VectorEnvironmentError
    naming it, not a BrokenPipeError; the live worker's reply is read, so a retry gets fresh replies."""
    vector = make_vector("minimal", 4, mode="subprocess", seed=0, num_workers=2)
    try:
        vector.reset()
        vector._processes[1].kill()
        vector._processes[1].join(timeout=10)
        for _ in range(2):  # the first send may still fit in the dead pipe's buffer; the second cannot
            with pytest.raises(VectorEnvironmentError, match=r"environment worker 1 \(copies 2\.\.3\) failed"):
                vector.execute(np.zeros(4, dtype=np.int64))
    finally:
        vector.close()
    our_children_are_gone(vector)


def test_spec_errors_in_workers_stay_spec_errors():
    with pytest.raises(SpecError, match="action_type: unknown value") as error:
        make_vector({"type": "minimal", "action_type": "integer"}, 2, mode="subprocess", num_workers=1)
    assert "expected one of" in str(error.value)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("env-worker")]


class OneBuffer(OneNumber):
    """Hands out the one array it writes its state into (Gymnasium allows it), and is cut after 3 steps."""

    def __init__(self) -> None:
        self.buffer = np.zeros(1, dtype=np.float32)

    def reset(self):
        self.buffer[0] = 0.0
        return self.buffer

    def execute(self, actions):
        self.buffer[0] += 1.0
        return self.buffer, 2 if self.buffer[0] == 3.0 else 0, 1.0


@pytest.mark.parametrize("mode", ["sync", "subprocess"])
def test_the_final_state_of_a_copy_that_writes_one_array_is_its_last_state_not_its_reset(mode):
    vector = VectorEnvironment(factory=OneBuffer, num_environments=2, mode=mode)
    try:
        vector.reset()
        for _ in range(2):
            vector.execute(np.zeros(2, dtype=np.int64))
        step = vector.execute(np.zeros(2, dtype=np.int64))
        assert step.terminal.tolist() == [2, 2]
        assert step.final_states[:, 0].tolist() == [3.0, 3.0] and step.states[:, 0].tolist() == [0.0, 0.0]
    finally:
        vector.close()


class LosesItsServer(Minimal):
    """Talks to something that goes away on its second step."""

    def execute(self, actions):
        if self._timestep == 1:
            raise BrokenPipeError("the simulator's socket closed")
        return super().execute(actions)


def test_an_environments_own_broken_pipe_is_its_error_with_the_traceback_not_a_silent_exit():
    vector = VectorEnvironment(factory=lambda: LosesItsServer("int"), num_environments=2, mode="subprocess")
    try:
        vector.reset()
        vector.execute(np.zeros(2, dtype=np.int64))
        with pytest.raises(VectorEnvironmentError, match="(?s)BrokenPipeError.*socket closed"):
            vector.execute(np.zeros(2, dtype=np.int64))
        vector.reset()  # the workers live on: the failure was the environment's
    finally:
        vector.close()
    our_children_are_gone(vector)


class Interrupted:
    """A worker's pipe whose next reply is interrupted (a Ctrl-C while the parent waits for it)."""

    def __init__(self, connection) -> None:
        self.connection, self.interrupt = connection, True

    def recv(self):
        if self.interrupt:
            self.interrupt = False
            raise KeyboardInterrupt
        return self.connection.recv()

    def __getattr__(self, name):
        return getattr(self.connection, name)


def test_a_vector_interrupted_while_its_workers_answer_refuses_later_commands_and_still_closes():
    """Replies left in the pipes would answer the next commands: the vector says it is out of step instead."""
    vector = make_vector("minimal", 2, mode="subprocess", num_workers=2, seed=0)
    try:
        vector.reset()
        vector._connections[0] = Interrupted(vector._connections[0])
        with pytest.raises(KeyboardInterrupt):
            vector.execute(np.zeros(2, dtype=np.int64))
        for command in (vector.reset, lambda: vector.execute(np.zeros(2, dtype=np.int64))):
            with pytest.raises(VectorEnvironmentError, match="interrupted .* close it and build a new one"):
                command()
    finally:
        vector.close()
    our_children_are_gone(vector)


def int_in_the_first_worker_float_in_the_others() -> Environment:
    first = multiprocessing.current_process().name == "env-worker-0"
    return Minimal("int" if first else "float")


def test_workers_whose_copies_act_differently_are_a_spec_error_naming_the_first_odd_copy():
    """As in one process (each copy against the first): worker processes' copies are checked against each other."""
    with pytest.raises(SpecError, match=r"environments\[2\]: has other states/actions than environments\[0\]"):
        VectorEnvironment(
            factory=int_in_the_first_worker_float_in_the_others, num_environments=4, mode="subprocess", num_workers=2
        )
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("env-worker")]
