"""The Atari preprocessing (``torchforce.environments.atari``) on the real ALE: each wrapper alone on a bare game,
the whole chain, the game records below the life and clip wrappers, seeding, and the ``"atari"`` environment type."""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest

from torchforce.environments import Atari, Gym, atari_env, make, make_vector
from torchforce.environments.atari import (
    ClipReward,
    Downscale,
    EpisodicLife,
    FireReset,
    MaxAndSkip,
    NoopReset,
    area_taps,
    atari_game_id,
)
from torchforce.environments.names import register_installed
from torchforce.spec import SpecError

NOOP, FIRE = 0, 1


def bare(game: str) -> gymnasium.Env:
    """The unwrapped game as ``atari_env`` starts from: one frame per step, no sticky actions, grayscale."""
    register_installed()
    return gymnasium.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0, obs_type="grayscale")


def frame_number(env: gymnasium.Env) -> int:
    return int(env.unwrapped.ale.getEpisodeFrameNumber())


def lives(env: gymnasium.Env) -> int:
    return int(env.unwrapped.ale.lives())


def wrappers(env: gymnasium.Env) -> list[str]:
    names = []
    while isinstance(env, gymnasium.Wrapper):
        names.append(type(env).__name__)
        env = env.env
    return names


# ------------------------------------------------------------------------------------------- wrappers, one by one


def test_noop_reset_takes_between_one_and_noop_max_noops_drawn_from_the_seed():
    env = NoopReset(bare("Pong"), noop_max=30)
    counts = []
    for seed in range(12):
        env.reset(seed=seed)
        counts.append(frame_number(env))  # one frame per no-op: the game's reset itself leaves the counter at 0
    assert all(1 <= count <= 30 for count in counts) and len(set(counts)) > 3, counts
    env.reset(seed=5)
    assert frame_number(env) == counts[5]  # the same seed, the same count
    bare_env = bare("Pong")
    bare_env.reset(seed=0)
    assert frame_number(bare_env) == 0


def test_max_and_skip_repeats_the_action_four_frames_sums_rewards_and_max_pools_the_last_two():
    skipping, single = MaxAndSkip(bare("Breakout"), skip=4), bare("Breakout")
    skipping.reset(seed=0)
    single.reset(seed=0)
    for action in (FIRE, NOOP, NOOP, NOOP, NOOP):  # the ball is launched and moves
        before = frame_number(skipping)
        observation, reward, *_ = skipping.step(action)
        assert frame_number(skipping) == before + 4
        frames, total = [], 0.0
        for _ in range(4):
            frame, step_reward, *_ = single.step(action)
            frames.append(frame)
            total += step_reward
        assert reward == total
        np.testing.assert_array_equal(observation, np.maximum(frames[2], frames[3]))
    assert not np.array_equal(observation, frames[3])  # the moving ball sits in both frames: pooling changed the last


def test_a_lost_life_ends_the_agents_episode_but_not_the_game():
    env = EpisodicLife(MaxAndSkip(bare("Breakout"), skip=4))
    env.reset(seed=0)
    assert lives(env) == 5
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated) and steps < 500:  # FIRE launches the ball; the paddle stays, so it is lost
        _, _, terminated, truncated, _ = env.step(FIRE)
        steps += 1
    assert terminated and not truncated and steps > 5
    assert lives(env) == 4 and not env.unwrapped.ale.game_over()
    played = frame_number(env)
    env.reset()  # one no-op step, not a new game
    assert lives(env) == 4 and frame_number(env) == played + 4
    # a seeded reset starts a new game whatever the lives
    env.reset(seed=1)
    assert lives(env) == 5 and frame_number(env) == 0


def test_a_reset_after_an_episode_cut_mid_life_starts_a_new_game():
    # a runner's max_episode_timesteps, or a run that stopped, resets with lives left and none lost: the next
    # episode must not go on from the middle of the old game
    env = EpisodicLife(MaxAndSkip(bare("Breakout"), skip=4))
    env.reset(seed=0)
    for _ in range(10):
        _, _, terminated, truncated, _ = env.step(NOOP)
        assert not (terminated or truncated)
    assert frame_number(env) == 40
    env.reset()
    assert lives(env) == 5 and frame_number(env) == 0


def test_game_over_resets_the_game():
    env = EpisodicLife(MaxAndSkip(bare("Breakout"), skip=4))
    env.reset(seed=0)
    episodes = steps = 0
    while not env.unwrapped.ale.game_over() and steps < 2000:  # about 40 steps a life
        _, _, terminated, _, _ = env.step(FIRE)
        steps += 1
        if terminated:
            episodes += 1
            if not env.unwrapped.ale.game_over():
                env.reset()
    assert episodes == 5
    env.reset()
    assert lives(env) == 5 and frame_number(env) == 0


def test_fire_reset_launches_the_ball_in_breakout():
    def lost_a_life(env: gymnasium.Env) -> bool:
        env.reset(seed=0)
        for _ in range(200):
            _, _, terminated, _, _ = env.step(NOOP)
            if terminated:
                return True
        return False

    plain = EpisodicLife(MaxAndSkip(bare("Breakout"), skip=4))
    assert not lost_a_life(plain)  # without FIRE the ball never comes
    firing = FireReset(EpisodicLife(MaxAndSkip(bare("Breakout"), skip=4)), fire=FIRE)
    assert lost_a_life(firing)
    assert lost_a_life(firing)  # and after the lost life, the next reset launched the ball again


def test_fire_reset_only_where_the_game_has_fire():
    assert "FireReset" in wrappers(atari_env("Breakout"))
    assert "FireReset" not in wrappers(atari_env("Freeway"))  # NOOP, UP, DOWN
    assert "FireReset" not in wrappers(atari_env("Breakout", fire_reset=False))


def test_the_chain_is_in_the_usual_order():
    env = atari_env("Breakout", clip_rewards=True, monitor=None)
    assert wrappers(env)[:7] == [
        "FrameStack",
        "ClipReward",
        "Downscale",
        "FireReset",
        "EpisodicLife",
        "MaxAndSkip",
        "NoopReset",
    ]


def test_downscale_averages_areas_into_84x84_uint8():
    rows, weights = area_taps(210, 84)
    assert rows.shape == (84, 3) and np.allclose(weights.sum(axis=1), 1.0)
    env = Downscale(MaxAndSkip(bare("Breakout"), skip=4), 84)
    assert env.observation_space == gymnasium.spaces.Box(0, 255, (84, 84), np.uint8)
    screen, _ = env.env.reset(seed=0)
    small = env.observation(screen)
    assert small.shape == (84, 84) and small.dtype == np.uint8
    # the exact area average: 210 = 84 * 5/2 rows, 160 = 84 * 40/21 columns, by repeating pixels then averaging
    fine = np.repeat(np.repeat(screen.astype(np.float64), 2, axis=0), 21, axis=1)
    expected = fine.reshape(84, 5, 84, 40).mean(axis=(1, 3))
    assert np.abs(small - expected).max() <= 0.5 + 1e-3
    assert np.array_equal(env.observation(np.full((210, 160), 77, np.uint8)), np.full((84, 84), 77, np.uint8))


def test_observations_are_84x84x4_uint8_frames_stacked_oldest_first():
    stacked, single = atari_env("Pong"), atari_env("Pong", frame_stack=1)
    assert stacked.observation_space == gymnasium.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    assert isinstance(stacked.action_space, gymnasium.spaces.Discrete) and stacked.action_space.n == 6
    observation, _ = stacked.reset(seed=3)
    first, _ = single.reset(seed=3)
    assert observation.shape == (84, 84, 4) and observation.dtype == np.uint8
    assert all(np.array_equal(observation[..., k], first[..., 0]) for k in range(4))  # a reset repeats the first
    frames = [first[..., 0]]
    for action in [2, 3, 2, 2, 3, 3, 2, 2, 2, 3] * 3:
        observation, *_ = stacked.step(action)
        frame, *_ = single.step(action)
        frames.append(frame[..., 0])
    np.testing.assert_array_equal(observation, np.stack(frames[-4:], axis=-1))
    assert len({frame.tobytes() for frame in frames[-4:]}) > 1  # the frames differ, so the order is tested
    kept = observation.copy()
    stacked.step(2)
    np.testing.assert_array_equal(observation, kept)  # each observation is an array of its own, as memories keep it


def test_clipped_rewards_are_signs_and_the_game_record_keeps_the_score(tmp_path):
    clipped = atari_env("SpaceInvaders", clip_rewards=True, monitor=tmp_path / "records")
    raw = atari_env("SpaceInvaders", clip_rewards=False)
    clipped.reset(seed=0)
    raw.reset(seed=0)
    rng = np.random.default_rng(0)
    score = clipped_sum = 0.0
    lives_lost, steps = 0, 1  # the reset's FIRE step
    for _ in range(5000):  # a random game lasts about 500 steps
        action = int(rng.integers(6))
        _, reward, terminated, truncated, _ = clipped.step(action)
        _, raw_reward, raw_terminated, *_ = raw.step(action)
        assert reward == np.sign(raw_reward) and terminated == raw_terminated
        score, clipped_sum, steps = score + raw_reward, clipped_sum + reward, steps + 1
        if terminated or truncated:
            lives_lost += 1
            if clipped.unwrapped.ale.game_over():
                break
            clipped.reset()
            raw.reset()
            steps += 2  # the no-op step that resumes play, then FIRE
    (record,) = [json.loads(line) for line in (tmp_path / "records" / "episodes.jsonl").read_text().splitlines()]
    assert lives_lost == 3  # three agent episodes, one game
    assert record["reward"] == score > clipped_sum > 0
    assert record["length"] == steps
    assert record["terminal"] == 1 and record["episode"] == 0 and record["seconds"] > 0
    assert record["frames"] == frame_number(clipped) and record["frames"] >= 4 * steps
    assert ClipReward(bare("Pong")).reward(-7.0) == -1.0


def test_a_game_cut_by_max_episode_frames_is_truncated(tmp_path):
    env = atari_env("Pong", max_episode_frames=200, monitor=tmp_path)
    env.reset(seed=0)
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated) and steps < 100:
        _, _, terminated, truncated, _ = env.step(NOOP)
        steps += 1
    assert truncated and not terminated and steps <= 50  # 200 frames, a few of them no-ops, 4 a step
    record = json.loads((tmp_path / "episodes.jsonl").read_text())
    assert record["terminal"] == 2 and record["frames"] == 200
    assert frame_number(atari_env("Pong", max_episode_frames=None)) == 0


def test_a_continued_game_monitor_keeps_its_games_and_numbers_them_on(tmp_path):
    """``monitor_continue`` (how tfcli's worker builds a resumed run's environments) keeps the games recorded, where
    a monitor without it replaces them."""

    def one_game(**monitor: object) -> None:
        env = atari_env("Pong", max_episode_frames=120, noop_max=0, monitor=tmp_path, **monitor)
        env.reset(seed=0)
        while not env.step(NOOP)[3]:  # until the time limit cuts the game
            pass
        env.close()

    def games() -> list[tuple[int, int]]:
        lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
        return [(game["episode"], game["frames"]) for game in map(json.loads, lines)]

    one_game()
    one_game(monitor_continue=True)
    assert games() == [(0, 120), (1, 120)]
    one_game()
    assert games() == [(0, 120)]
    with pytest.raises(SpecError, match="environment.monitor_continue: needs monitor"):
        make({"type": "atari", "game": "Pong", "monitor_continue": True})


# ------------------------------------------------------------------------------------------- the environment type


def test_the_atari_type_is_a_gym_environment_of_uint8_frames():
    env = make({"type": "atari", "game": "Breakout", "seed": 0})
    assert isinstance(env, Atari) and isinstance(env, Gym) and str(env) == "Atari(Breakout)"
    assert env.states == {"type": "uint8", "shape": (84, 84, 4)}
    assert env.actions == {"type": "int", "shape": (), "num_actions": 4}
    state = env.reset()
    assert state.shape == (84, 84, 4) and state.dtype == np.uint8
    terminals = []
    for _ in range(300):
        state, terminal, reward = env.execute(FIRE)
        assert state.dtype == np.uint8 and isinstance(reward, float)
        if terminal:
            terminals.append(terminal)
            state = env.reset()
    assert terminals and set(terminals) == {1}  # each lost life
    env.close()


@pytest.mark.parametrize("game", ["Pong", "pong", "ALE/Pong-v5", "PongNoFrameskip-v4"])
def test_game_names(game):
    assert atari_game_id(game) == "ALE/Pong-v5"
    assert str(make("atari", game=game)) == "Atari(Pong)"


def test_snake_case_game_names():
    assert atari_game_id("space_invaders") == atari_game_id("SpaceInvaders") == "ALE/SpaceInvaders-v5"


def test_seeded_runs_replay_exactly():
    def run(seed: int) -> tuple[int, list[bytes]]:
        env = make({"type": "atari", "game": "Breakout", "seed": seed})
        states = [env.reset().tobytes()]
        noops = frame_number(env.gym)
        for action in [1, 2, 3, 2, 0, 3, 3, 2] * 8:
            state, terminal, _ = env.execute(action)
            states.append(state.tobytes())
            if terminal:
                states.append(env.reset().tobytes())
        env.close()
        return noops, states

    assert run(7) == run(7)
    starts = {run(seed)[0] for seed in range(6)}
    assert len(starts) > 1  # the no-ops follow the seed


def test_vectorized_copies_keep_uint8_states():
    with make_vector({"type": "atari", "game": "Pong"}, 2, seed=0) as vector:
        states = vector.reset()
        assert states.shape == (2, 84, 84, 4) and states.dtype == np.uint8
        for _ in range(60):
            step = vector.execute(np.array([2, 2]))
            assert step.states.dtype == np.uint8 and step.states.shape == (2, 84, 84, 4)
        assert not np.array_equal(step.states[0], step.states[1])  # copy i is seeded with seed + i: other no-ops


def test_vectorized_copies_in_worker_processes():
    with make_vector({"type": "atari", "game": "Pong"}, 2, mode="subprocess", seed=0) as vector:
        states = vector.reset()
        step = vector.execute(np.array([2, 3]))
        assert states.dtype == step.states.dtype == np.uint8 and step.states.shape == (2, 84, 84, 4)


# ------------------------------------------------------------------------------------------------------- errors


def test_an_unknown_game_is_a_spec_error_with_did_you_mean():
    with pytest.raises(SpecError, match="unknown Atari game") as error:
        make({"type": "atari", "game": "Pnog"})
    assert error.value.path == "environment.game" and "Did you mean 'Pong'?" in str(error.value)
    with pytest.raises(SpecError, match="Did you mean 'SpaceInvaders'"):
        atari_env("space_invader")
    with pytest.raises(SpecError, match="not an Atari game"):
        atari_env(3)  # type: ignore[arg-type]


def test_bad_options_are_spec_errors_naming_them(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(SpecError, match="needs 'game'"):
        make({"type": "atari"})
    with pytest.raises(SpecError) as error:
        make({"type": "atari", "game": "Pong", "frameskip": 4})
    assert "frameskip" in error.value.path and "Did you mean 'frame_skip'?" in str(error.value)
    for key, value in [
        ("frame_skip", 0),
        ("frame_skip", 10**6),  # a step of hours
        ("frame_stack", 0),
        ("frame_stack", 2**40),
        ("noop_max", -1),
        ("noop_max", 10**6),
        ("screen_size", "84"),
        ("screen_size", 211),  # larger than the screen
        ("max_episode_frames", 2**31),  # ALE's counter is an int
        ("render_mode", "human"),  # a window, without a display
        ("repeat_action_probability", 1.5),
        ("episodic_life", "yes"),
        ("max_episode_frames", 0),
        ("monitor", 5),
        ("render_mode", "nope"),
    ]:
        with pytest.raises(SpecError) as error:
            make({"type": "atari", "game": "Pong", key: value})
        assert error.value.path == f"environment.{key}", key


def test_building_a_game_prints_nothing():
    """ALE's banner would land in the middle of tfcli's output (``experiment show`` builds the environment)."""
    import subprocess
    import sys

    code = "from torchforce.environments.atari import atari_env; atari_env('Pong').reset(seed=0)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout == ""
