"""Environments pickled in the middle of an episode go on with it exactly: Gymnasium's MuJoCo environments and ALE
games, which pickling builds again from their arguments, get their simulator back (``snapshots``); an environment
of that kind that cannot be restored says so (``resumable``), and a vector of it saves no episodes in progress."""

from __future__ import annotations

import cloudpickle
import gymnasium
import numpy as np
import pytest
from gymnasium.utils.ezpickle import EzPickle

from torchforce.environments import Gym, make, make_vector, snapshots


def actions_for(spec: dict, count: int, rows: int | None = None) -> list:
    rng = np.random.default_rng(0)
    shape = () if rows is None else (rows,)
    if spec["type"] == "int":
        return [rng.integers(spec["num_actions"], size=shape) for _ in range(count)]
    return [rng.uniform(-1, 1, size=(*shape, *spec["shape"])).astype(np.float32) for _ in range(count)]


def steps(environment, actions: list) -> list[tuple]:
    return [tuple(np.array(value, copy=True) for value in environment.execute(action)) for action in actions]


def assert_same(got: list[tuple], expected: list[tuple]) -> None:
    assert len(got) == len(expected)
    for step, want in zip(got, expected, strict=True):
        for a, b in zip(step, want, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "gym", "gym_id": "Ant-v5"},  # reads the torso's position that the last step derived, before it steps
        {"type": "gym", "gym_id": "HalfCheetah-v5"},
        {"type": "atari", "game": "Breakout"},
    ],
    ids=["Ant", "HalfCheetah", "Breakout"],
)
def test_a_pickled_mujoco_or_atari_environment_goes_on_with_its_episode_bit_for_bit(spec):
    environment = make(spec, seed=3)
    environment.reset()
    for action in actions_for(environment.actions, 60)[30:]:
        environment.execute(action)
    assert snapshots.take(environment.gym.unwrapped) is not None and environment.resumable
    blob = cloudpickle.dumps(environment)
    ahead = actions_for(environment.actions, 40)
    expected = steps(environment, ahead)
    restored = cloudpickle.loads(blob)
    assert_same(steps(restored, ahead), expected)
    # its resets draw from the generator the episode had: the next episode starts as it would have
    environment.reset(), restored.reset()
    np.testing.assert_array_equal(environment.execute(ahead[0])[0], restored.execute(ahead[0])[0])


@pytest.mark.parametrize("mode", ["sync", "subprocess"])
def test_a_vector_of_atari_games_with_a_monitor_saves_and_restores_its_episodes(tmp_path, mode):
    """The monitor's record of a game reads the emulator's frame count when the game ends: it pickles (the emulator
    itself cannot be), and the restored copies go on exactly."""
    vector = make_vector({"type": "atari", "game": "Breakout", "monitor": str(tmp_path)}, 3, seed=5, mode=mode)
    try:
        vector.reset()
        for action in actions_for(vector.actions, 40, rows=3):
            vector.execute(action)
        blobs = vector.get_state()
        ahead = actions_for(vector.actions, 30, rows=3)[::-1]

        def play() -> list[tuple]:
            return [(s.states.copy(), s.terminal.copy(), s.reward.copy()) for s in map(vector.execute, ahead)]

        expected = play()
        vector.set_state(blobs)
        assert_same(play(), expected)
    finally:
        vector.close()


class Rebuilt(gymnasium.Env, EzPickle):
    """An environment that pickling builds again from its arguments (as Box2D's do), with state of its own."""

    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, start: float = 0.0) -> None:
        EzPickle.__init__(self, start)
        self.position = start

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0.0
        return np.array([self.position], np.float32), {}

    def step(self, action):
        self.position += 1.0
        return np.array([self.position], np.float32), 1.0, False, False, {}


def test_an_environment_pickling_rebuilds_and_that_cannot_be_restored_is_not_resumable():
    rebuilt = Gym(Rebuilt, seed=0)
    rebuilt.reset()
    rebuilt.execute(1)
    assert not rebuilt.resumable and snapshots.take(rebuilt.gym.unwrapped) is None
    assert cloudpickle.loads(cloudpickle.dumps(rebuilt)).gym.unwrapped.position == 0.0  # why: the episode is gone
    assert make("CartPole-v1").resumable  # pickles whole
    for mode in ("sync", "subprocess"):
        vector = make_vector(lambda: Gym(Rebuilt), 2, mode=mode)
        try:
            vector.reset()
            assert vector.get_state() is None  # a checkpoint keeps no episodes in progress: a resume starts anew
        finally:
            vector.close()
