"""The Gymnasium adapter on real ids: specs, terminal 1 vs 2, seeding, errors, the 2018 monitor options."""

from __future__ import annotations

import json
import logging
import time

import numpy as np
import pytest

from torchforce.environments import Environment, Gym, make, make_vector
from torchforce.spec import SpecError


def run_episode(env: Environment, action, limit: int = 10_000) -> tuple[int, int]:
    """Steps until the episode ends; returns (steps, terminal)."""
    env.reset()
    for step in range(1, limit + 1):
        _, terminal, _ = env.execute(action)
        if terminal:
            return step, terminal
    raise AssertionError("the episode did not end")


def test_cartpole_specs_and_types():
    env = Gym("CartPole-v1")
    assert str(env) == "Gym(CartPole-v1)"
    assert env.states == {"type": "float", "shape": (4,)}
    assert env.actions == {"type": "int", "shape": (), "num_actions": 2}
    state = env.reset()
    assert isinstance(state, np.ndarray) and state.dtype == np.float32 and state.shape == (4,)
    state, terminal, reward = env.execute(np.int64(1))
    assert terminal == 0 and type(terminal) is int and reward == 1.0 and type(reward) is float
    env.close()


def test_truncation_is_2_and_termination_is_1():
    env = Gym("CartPole-v1", max_episode_timesteps=5)
    assert run_episode(env, 0) == (5, 2)  # the pole cannot fall in 5 steps
    env = Gym("CartPole-v1", max_episode_timesteps=400)
    steps, terminal = run_episode(env, 1)  # always pushing right drops the pole within a few dozen steps
    assert terminal == 1 and steps < 100
    assert run_episode(Gym("CartPole-v1"), 1)[1] == 1


def test_continuous_control_specs():
    pendulum = Gym("Pendulum-v1")
    assert pendulum.states == {"type": "float", "shape": (3,)}
    assert pendulum.actions == {"type": "float", "shape": (1,), "min_value": -2.0, "max_value": 2.0}
    pendulum.reset()
    state, terminal, reward = pendulum.execute(np.array([0.5]))
    assert state.shape == (3,) and terminal == 0 and reward <= 0
    assert pendulum.execute(0.5)[0].shape == (3,)  # a bare number fits a shape-(1,) action too
    assert run_episode(pendulum, [0.0]) == (200, 2)

    car = Gym("MountainCarContinuous-v0", max_episode_timesteps=10)
    assert car.states == {"type": "float", "shape": (2,)}
    assert car.actions == {"type": "float", "shape": (1,), "min_value": -1.0, "max_value": 1.0}
    assert run_episode(car, [1.0]) == (10, 2)


def test_mujoco(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo may write MUJOCO_LOG.TXT into the working directory
    env = Gym("InvertedPendulum-v5", seed=0)
    assert env.states == {"type": "float", "shape": (4,)}
    assert env.actions == {"type": "float", "shape": (1,), "min_value": -3.0, "max_value": 3.0}
    state = env.reset()
    assert state.dtype == np.float32  # MuJoCo observes float64
    state, terminal, reward = env.execute(np.zeros(1, dtype=np.float32))
    assert state.shape == (4,) and reward == 1.0 and terminal == 0
    env.close()


def test_mujoco_warnings_go_to_logging_not_to_stderr_and_a_log_file(tmp_path, monkeypatch, caplog, capfd):
    import mujoco

    monkeypatch.chdir(tmp_path)
    own = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(None)  # as in a fresh process
    try:
        with caplog.at_level(logging.DEBUG, logger="torchforce.mujoco"):
            Gym("HalfCheetah-v5", seed=0).close()  # its model: 'settotalmass' is deprecated
            mujoco.get_mju_user_warning()("Nan, Inf or huge value in QACC at DOF 0")  # as the simulation would say
        levels = {record.getMessage().split(":")[1].strip().split()[0]: record.levelno for record in caplog.records}
        assert levels == {"compiler": logging.DEBUG, "Nan,": logging.WARNING}
        assert list(tmp_path.iterdir()) == [] and "settotalmass" not in capfd.readouterr().err
        mine = []
        mujoco.set_mju_user_warning(mine.append)  # a handler of the user's own stays
        Gym("HalfCheetah-v5", seed=0).close()
        assert len(mine) == 1 and "settotalmass" in mine[0]
    finally:
        mujoco.set_mju_user_warning(own)


def test_atari_pong():
    start = time.perf_counter()
    env = make("ALE/Pong-v5", seed=0)
    assert env.states == {"type": "float", "shape": (210, 160, 3), "min_value": 0.0, "max_value": 255.0}
    assert env.actions == {"type": "int", "shape": (), "num_actions": 6}
    state = env.reset()
    assert state.shape == (210, 160, 3) and state.dtype == np.float32
    for action in range(6):
        state, terminal, reward = env.execute(action)
        assert terminal == 0
    env.close()
    assert time.perf_counter() - start < 5


@pytest.mark.filterwarnings("ignore:.*out of date:DeprecationWarning")
def test_legacy_atari_id_of_2018_configs_works_with_a_warning():
    with pytest.warns(UserWarning, match="ALE/SpaceInvaders-v5"):
        env = Environment.from_spec({"type": "tensorforce.contrib.openai_gym.OpenAIGym", "gym_id": "SpaceInvaders-v0"})
    assert env.actions == {"type": "int", "shape": (), "num_actions": 6}
    env.close()


def test_seed_makes_resets_reproducible():
    env = Gym("CartPole-v1")
    assert env.seed(7) == 7
    first = env.reset()
    env.seed(7)
    np.testing.assert_array_equal(env.reset(), first)
    env.seed(8)
    assert not np.array_equal(env.reset(), first)
    np.testing.assert_array_equal(Gym("CartPole-v1", seed=7).reset(), first)

    def trajectory(env: Gym) -> list:
        states = [env.reset()]
        for _ in range(30):
            state, terminal, _ = env.execute(int(env.gym.action_space.sample()))
            states.append(env.reset() if terminal else state)
        return states

    np.testing.assert_array_equal(trajectory(Gym("CartPole-v1", seed=3)), trajectory(Gym("CartPole-v1", seed=3)))


def test_seeding_only_applies_to_the_next_reset():
    env = Gym("CartPole-v1", seed=1)
    first, second = env.reset(), env.reset()
    assert not np.array_equal(first, second)


# ---------------------------------------------------------------------------------------------------------- errors


def test_unknown_id_suggests_the_closest():
    with pytest.raises(SpecError, match="unknown Gymnasium id 'CartPol-v1'") as error:
        Gym("CartPol-v1")
    assert "Did you mean 'CartPole-v1'?" in str(error.value)
    assert "Pendulum-v1" in str(pytest.raises(SpecError, Gym, "Pendulum-v0").value)


def test_unknown_atari_id_names_the_ale_id():
    for gym_id in ("SpaceInvaders-v2", "spaceinvaders-v0", "ALE/SpaceInvaders-v3"):
        with pytest.raises(SpecError) as error:
            Gym(gym_id)
        assert "'ALE/SpaceInvaders-v5'" in str(error.value), gym_id


def test_unknown_kwarg_is_a_spec_error_with_suggestion():
    with pytest.raises(SpecError, match="environment.max_episode_steps: unknown argument") as error:
        Gym("CartPole-v1", max_episode_steps=3)
    assert "Did you mean 'max_episode_timesteps'?" in str(error.value)
    with pytest.raises(SpecError, match="frame_skip: unknown argument for 'ALE/Pong-v5'") as error:
        Gym("ALE/Pong-v5", frame_skip=2)
    assert "'frameskip'" in str(error.value)
    with pytest.raises(SpecError, match="environment.gravit: unknown argument"):
        Environment.from_spec({"type": "gym", "gym_id": "Pendulum-v1", "gravit": 9.0})


@pytest.mark.filterwarnings("ignore:.*out of date:DeprecationWarning")
def test_obsolete_version_names_the_newest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match="cannot make 'HalfCheetah-v3'") as error:
        Gym("HalfCheetah-v3")
    assert "HalfCheetah-v5" in str(error.value)


def test_bad_action_is_a_clear_error():
    env = Gym("CartPole-v1")
    env.reset()
    with pytest.raises(ValueError, match="Gym\\(CartPole-v1\\): cannot use actions"):
        env.execute({"action": "left"})


def test_visualize_without_display_is_a_spec_error(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    with pytest.raises(SpecError, match="visualize=true needs a display"):
        Gym("CartPole-v1", visualize=True)
    with pytest.raises(SpecError, match="monitor_video: needs monitor"):
        Gym("CartPole-v1", monitor_video=1)


# --------------------------------------------------------------------------------------------------------- monitor


def test_monitor_writes_one_record_per_episode(tmp_path):
    env = Gym("CartPole-v1", max_episode_timesteps=4, monitor=str(tmp_path / "monitor"))
    for _ in range(2):
        run_episode(env, 0)
    env.close()
    records = [json.loads(line) for line in (tmp_path / "monitor" / "episodes.jsonl").read_text().splitlines()]
    assert [(r["episode"], r["length"], r["reward"], r["terminal"]) for r in records] == [
        (0, 4, 4.0, 2),
        (1, 4, 4.0, 2),
    ]
    with pytest.raises(SpecError, match="already holds episode records"):
        Gym("CartPole-v1", monitor=str(tmp_path / "monitor"), monitor_safe=True)
    Gym("CartPole-v1", monitor=str(tmp_path / "monitor")).close()  # not safe: records are replaced
    assert not (tmp_path / "monitor" / "episodes.jsonl").exists()


def test_monitor_continue_keeps_the_records_and_numbers_the_episodes_on(tmp_path):
    """How a resumed run builds its environment: the records stay (monitor_safe has nothing to refuse then), new
    ones are appended and numbered after the last; a last line a crash cut short goes before the next record."""
    file = tmp_path / "monitor" / "episodes.jsonl"
    first = Gym("CartPole-v1", max_episode_timesteps=4, monitor=str(tmp_path / "monitor"))
    for _ in range(2):
        run_episode(first, 0)
    first.close()
    kept = file.read_text()
    with file.open("a") as stream:
        stream.write('{"episode": 2, "rew')  # the process writing it was killed
    resumed = Gym(
        "CartPole-v1",
        max_episode_timesteps=3,
        monitor=str(tmp_path / "monitor"),
        monitor_continue=True,
        monitor_safe=True,
    )
    run_episode(resumed, 0)
    resumed.close()
    assert file.read_text().startswith(kept)
    records = [json.loads(line) for line in file.read_text().splitlines()]
    assert [(r["episode"], r["length"]) for r in records] == [(0, 4), (1, 4), (2, 3)]
    with pytest.raises(SpecError, match="environment.monitor_continue: needs monitor"):
        Gym("CartPole-v1", monitor_continue=True)
    with pytest.raises(SpecError, match="environment.monitor_continue: not a boolean"):
        Gym("CartPole-v1", monitor=str(tmp_path), monitor_continue="yes")


def test_a_pickled_monitor_leaves_the_time_it_spent_pickled_out_of_the_episodes_seconds(tmp_path):
    """A checkpoint pickles the environments with their episodes in progress: the record of such an episode,
    finished by the resumed run, counts the seconds it was played, not the pause."""
    import cloudpickle

    env = Gym("CartPole-v1", max_episode_timesteps=3, monitor=str(tmp_path))
    env.reset()
    env.execute(0)
    blob = cloudpickle.dumps(env)
    env.close()
    time.sleep(0.5)
    resumed = cloudpickle.loads(blob)
    assert [resumed.execute(0)[1] for _ in range(2)] == [0, 2]  # the episode in progress, to its time limit
    resumed.close()
    (record,) = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert record["length"] == 3 and record["seconds"] < 0.4


@pytest.mark.parametrize("mode", ["sync", "subprocess"])
@pytest.mark.parametrize("kind", ["gym", "atari"])
def test_restored_copies_record_where_this_run_s_monitor_is(tmp_path, mode, kind):
    """A checkpoint pickles the copies with their monitors' files: restored after the project moved (or on another
    machine) they wrote to the old path, and crashed at their first episode's end where it was gone."""
    import shutil

    def spec(folder: str) -> dict:
        if kind == "atari":
            return {
                "type": "atari",
                "game": "Pong",
                "max_episode_frames": 20,
                "noop_max": 0,
                "monitor": str(tmp_path / folder),
            }
        return {"type": "gym", "gym_id": "CartPole-v1", "max_episode_timesteps": 5, "monitor": str(tmp_path / folder)}

    with make_vector(spec("before"), 2, mode=mode, seed=1) as vector:
        vector.reset()
        vector.execute(np.zeros(2, dtype=np.int64))
        blobs = vector.get_state()
    shutil.rmtree(tmp_path / "before")  # the old place is gone
    moved = {**spec("after"), "monitor_continue": True}
    with make_vector(moved, 2, mode=mode, seed=1) as vector:
        vector.reset()
        vector.set_state(blobs)
        for _ in range(4):  # the restored episodes, to their time limit
            vector.execute(np.zeros(2, dtype=np.int64))
    records = [json.loads(line) for line in (tmp_path / "after" / "episodes.jsonl").read_text().splitlines()]
    assert [r["episode"] for r in records] == [0, 1] and not (tmp_path / "before").exists()


@pytest.mark.parametrize("mode", ["sync", "subprocess"])
def test_copies_sharing_a_monitor_number_their_episodes_as_one_sequence(tmp_path, mode):
    """Copies of a vectorized environment append to one file, each record numbered after the file's last (one
    sequence, in the order the episodes end), also when the copies live in worker processes."""
    spec = {"type": "gym", "gym_id": "CartPole-v1", "monitor": str(tmp_path)}
    with make_vector(spec, 3, mode=mode, seed=1) as vector:
        vector.reset()
        ended = 0
        for _ in range(60):
            ended += int(np.count_nonzero(vector.execute(np.zeros(3, dtype=np.int64)).terminal))
    records = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert ended >= 6 and [r["episode"] for r in records] == list(range(ended))


def test_monitor_video_needs_moviepy(tmp_path):
    pytest.importorskip("pygame")
    try:
        import moviepy  # noqa: F401
    except ImportError:
        with pytest.raises(SpecError, match="moviepy"):
            Gym("CartPole-v1", monitor=str(tmp_path), monitor_video=1)
    else:
        Gym("CartPole-v1", monitor=str(tmp_path), monitor_video=1).close()


def test_a_ready_environment_takes_a_shorter_time_limit_and_refuses_a_longer_one():
    import gymnasium

    env = Gym(gymnasium.make("CartPole-v1"), max_episode_timesteps=3)
    env.reset()
    assert [env.execute(0)[1] for _ in range(2)] == [0, 0] and env.execute(0)[1] == 2  # cut at 3 steps
    env.close()
    ready = gymnasium.make("CartPole-v1")  # its TimeLimit ends episodes at 500 steps
    with pytest.raises(SpecError) as caught:
        Gym(ready, max_episode_timesteps=1000)
    message = str(caught.value)
    assert "environment.max_episode_timesteps" in message and "500 steps" in message and "1000" in message
    assert "gymnasium.make('CartPole-v1', max_episode_steps=1000)" in message
    ready.close()


def test_records_on_a_file_system_without_locks_cut_nothing(tmp_path, monkeypatch, caplog):
    """Where the records file cannot be locked (NFS without its lock daemon), another writer's line may be halfway
    written: it was cut as a crash's torn line. Unlocked, nothing is cut and the record starts a line of its own."""
    import errno
    import fcntl

    from torchforce.environments import records as adapter

    def no_locks(stream, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    monkeypatch.setattr(adapter, "_UNLOCKED_WARNED", False)
    file = tmp_path / "episodes.jsonl"
    file.write_text('{"episode": 0, "reward": 1.0}\n{"episode": 1, "rew')  # another copy, halfway through its line
    with caplog.at_level(logging.WARNING):
        adapter.append_record(file, {"reward": 2.0})
        adapter.append_record(file, {"reward": 3.0})
    lines = file.read_text().splitlines()
    assert lines[1] == '{"episode": 1, "rew' and [json.loads(line)["reward"] for line in lines[2:]] == [2.0, 3.0]
    assert [record.message.count("cannot be locked") for record in caplog.records] == [1]
