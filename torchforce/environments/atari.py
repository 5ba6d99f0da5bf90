"""Atari from pixels: ALE games with the standard preprocessing of DQN (Mnih et al. 2015) and of Stable-Baselines3's
``AtariWrapper``, as plain Gymnasium wrappers (``atari_env``) and as the environment type ``"atari"`` (``Atari``).

``atari_env("Pong")`` builds ``ALE/Pong-v5`` with ``frameskip=1`` and grayscale screens and wraps it, innermost first:

1. ``NoopReset``: a reset takes a random number of no-op steps in ``1..noop_max`` (0: none), so that episodes do
   not all start in the same state.
2. ``MaxAndSkip``: each step repeats the action ``frame_skip`` frames, sums their rewards and returns the
   element-wise maximum of the last two frames (Atari sprites flicker: some are drawn every other frame only).
3. ``game_monitor`` (with ``monitor=DIR``): one JSON line per real game in ``DIR/episodes.jsonl`` (below).
4. ``EpisodicLife``: losing a life ends the agent's episode (terminated) while the game goes on; the next reset
   then takes one no-op step instead of resetting the game. Every other reset is a real one: after game over or a
   time limit, with a seed, and after an episode that ended otherwise (cut by a runner's ``max_episode_timesteps``,
   or left unfinished when a run stopped), so that an episode never starts in the middle of a life.
5. ``FireReset`` (games whose actions include FIRE, with ``fire_reset``): every reset ends by pressing FIRE, which
   launches the ball in games such as Breakout (after each lost life too, since it sits above ``EpisodicLife``).
6. ``Downscale``: the 210x160 grayscale screen (ALE's own luminance) to ``screen_size`` x ``screen_size`` by area
   averaging, each output pixel the mean of the screen area it covers (what OpenCV's INTER_AREA computes, here as
   precomputed weighted sums over rows, then columns; opencv is not needed), rounded to uint8.
7. ``ClipReward`` (with ``clip_rewards``): rewards become their sign, -1, 0 or 1.
8. ``FrameStack``: the last ``frame_stack`` screens, oldest first, along the last axis. An episode starts with its
   first screen repeated (as the ``sequence`` preprocessor does).

Observations are uint8 arrays of shape ``(screen_size, screen_size, frame_stack)``, channels last: the layout of
torchforce's conv2d layers (and of Gymnasium images; Stable-Baselines3's CnnPolicy transposes them itself). The
``Atari`` environment declares them as a ``uint8`` state, so agents keep them as bytes in their memories; networks
scale them with a ``{"type": "divide", "scale": 255}`` layer. Actions are ``Discrete``: the game's minimal action
set, or all 18 with ``full_action_space``.

``max_episode_frames`` (108,000 frames, 30 minutes of play, as ALE's ``NoFrameskip-v4`` ids have) ends a game by
truncation (terminal 2) counted in frames since the game's reset, noops included. ``repeat_action_probability``
(0 by default, as ``NoFrameskip-v4``; ``-v5``'s sticky actions are 0.25) repeats the previous action frame by frame.

Scores: with ``EpisodicLife`` an episode is one life, and with ``clip_rewards`` its return is not the game's score.
``monitor=DIR`` therefore records real games below both: each line of ``DIR/episodes.jsonl`` has the Gym adapter's
keys (``episode``, ``reward``: the unclipped score, ``length``: steps of ``frame_skip`` frames, those that resets
take included (the no-op after a lost life, FIRE), ``terminal``: 1 game over, 2 time limit, ``seconds``) plus
``frames``: the game's ALE frames, the reset's no-ops included. Records already in ``DIR`` are replaced when the
environment is built, or kept and continued with ``monitor_continue`` (the games numbered on from the last record:
how tfcli's worker builds a run it resumes). Copies (``make_vector``) given the same ``DIR`` append to one file,
their games numbered in the order they end (see the Gym adapter's module doc).

Seeding: ``reset(seed=s)`` seeds ALE and the random numbers of the no-op resets (the game's ``np_random``), so a
seeded run replays exactly.
"""

from __future__ import annotations

import collections
import importlib.util
import os
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium
import numpy as np

from torchforce.environments.gym import Gym, check_monitor, has_display, log_episodes
from torchforce.environments.names import atari_id, gym_registry, register_installed
from torchforce.environments.records import EpisodeLog, records_file
from torchforce.spec import SpecError, did_you_mean, expect_bool, expect_float, expect_int
from torchforce.spec.checks import expect_elements

GAME_EXAMPLE = "a game name like 'Pong' or 'Breakout', or an id like 'ALE/Pong-v5'"
NOOP = 0  # ALE's action sets, the minimal ones and the full one, start with NOOP
# ALE's render modes, and Gymnasium's list of every frame since the last render (what videos of evaluations use)
RENDER_MODES = ("rgb_array", "human", "rgb_array_list")
MAX_REPEAT = 10_000  # frames a step (frame_skip) or a reset's no-ops (noop_max) may take: about 3 minutes of play
SCREEN_HEIGHT = 210  # ALE's screens are 210 x 160; a larger screen_size would only repeat pixels


def atari_games() -> list[str]:
    """The names of the games ale-py registers (``Pong``, ``SpaceInvaders``, ...)."""
    register_installed()
    return sorted(key[4:-3] for key in gym_registry() if key.startswith("ALE/") and key.endswith("-v5"))


def atari_game_id(game: Any, path: str = "game") -> str:
    """``ALE/<Game>-v5`` for a game given as ``"Pong"``, ``"pong"``, ``"space_invaders"``, or an id such as
    ``"ALE/Pong-v5"`` or ``"PongNoFrameskip-v4"`` (the version does not matter: ``atari_env`` sets every option
    itself). An unknown game is a SpecError with the closest name."""
    if not isinstance(game, str) or not game:
        raise SpecError(path, "not an Atari game", got=game, expected=GAME_EXAMPLE)
    if importlib.util.find_spec("ale_py") is None:
        raise SpecError(
            path, "Atari games come with ale-py, which is not installed", hint="pip install 'torchforce[atari]'"
        )
    register_installed()
    found = atari_id(game.replace("_", ""))
    if found is not None and found in gym_registry():
        return found
    games = atari_games()
    by_lower = {name.lower(): name for name in games}
    guess = did_you_mean(game.rsplit("/", 1)[-1].split("-v")[0].replace("_", "").lower(), by_lower)
    hint = f"Did you mean '{by_lower[guess]}'?" if guess else f"ale-py has {len(games)} games: " + ", ".join(games)
    raise SpecError(path, "unknown Atari game", got=game, expected=GAME_EXAMPLE, hint=hint)


# ------------------------------------------------------------------------------------------------------- wrappers


def fire_action(env: gymnasium.Env) -> int | None:
    """The index of FIRE in the game's action set, if it has one."""
    meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
    return meanings.index("FIRE") if "FIRE" in meanings else None


class NoopReset(gymnasium.Wrapper):
    """A reset is followed by a random number of no-op steps in ``1..noop_max``, drawn from the game's seeded
    ``np_random``; a game that ends meanwhile is reset again."""

    def __init__(self, env: gymnasium.Env, noop_max: int) -> None:
        super().__init__(env)
        self.noop_max = noop_max

    def reset(self, **kwargs: Any) -> Any:
        observation, info = self.env.reset(**kwargs)
        for _ in range(int(self.unwrapped.np_random.integers(1, self.noop_max + 1))):
            observation, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:
                observation, info = self.env.reset()
        return observation, info


class MaxAndSkip(gymnasium.Wrapper):
    """Each step repeats the action ``skip`` frames (fewer when the game ends), sums the rewards and returns the
    element-wise maximum of the last two frames."""

    def __init__(self, env: gymnasium.Env, skip: int) -> None:
        super().__init__(env)
        self.skip = skip

    def step(self, action: Any) -> Any:
        observation, reward, terminated, truncated, info = self.env.step(action)
        total, previous = float(reward), None
        for _ in range(self.skip - 1):
            if terminated or truncated:
                break
            previous = observation
            observation, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
        if previous is not None:
            observation = np.maximum(previous, observation)
        return observation, total, terminated, truncated, info


def game_monitor(env: gymnasium.Env, file: Path) -> gymnasium.Env:
    """``env`` wrapped to append one JSON line per real game to ``file``: the Gym adapter's monitor record
    (``episode``, ``reward``, ``length``, ``terminal``, ``seconds``) plus ``frames``, the ALE frames the game
    lasted."""
    unwrapped = env.unwrapped  # (the emulator is read when a game ends: it cannot be pickled, the game can)
    return log_episodes(
        env,
        EpisodeLog(file, extra=lambda: {"frames": int(unwrapped.ale.getEpisodeFrameNumber())}),  # type: ignore[attr-defined]
    )


class EpisodicLife(gymnasium.Wrapper):
    """A lost life ends the agent's episode (terminated) but not the game: the reset that follows takes one no-op
    step instead. Any other reset is a real one: after game over or a time limit, with a seed, or after an episode
    that did not end by a lost life (one cut short, or left unfinished), which must not go on mid-life."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.life_lost = False  # the last step ended the agent's episode by a lost life, and the game goes on

    def step(self, action: Any) -> Any:
        observation, reward, terminated, truncated, info = self.env.step(action)
        lives = self.unwrapped.ale.lives()  # type: ignore[attr-defined]
        lost = 0 < lives < self.lives  # terminal for learning even on the step a time limit cuts
        self.life_lost = lost and not (terminated or truncated)
        self.lives = lives
        return observation, reward, terminated or lost, truncated, info

    def reset(self, **kwargs: Any) -> Any:
        if self.life_lost and kwargs.get("seed") is None:
            observation, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:  # the no-op step lost the last life
                observation, info = self.env.reset(**kwargs)
        else:
            observation, info = self.env.reset(**kwargs)
        self.life_lost = False
        self.lives = self.unwrapped.ale.lives()  # type: ignore[attr-defined]
        return observation, info


class FireReset(gymnasium.Wrapper):
    """Every reset ends by pressing FIRE (the game's ``fire`` action); a game that ends on it is reset again."""

    def __init__(self, env: gymnasium.Env, fire: int) -> None:
        super().__init__(env)
        self.fire = fire

    def reset(self, **kwargs: Any) -> Any:
        self.env.reset(**kwargs)
        observation, _, terminated, truncated, info = self.env.step(self.fire)
        if terminated or truncated:
            observation, info = self.env.reset()
        return observation, info


def area_taps(source: int, target: int) -> tuple[np.ndarray, np.ndarray]:
    """How a line of ``source`` pixels is resampled to ``target`` pixels by area, as taps ``index, weight`` of shape
    ``[target, taps]``: output pixel i is ``sum_k weight[i, k] * input[index[i, k]]``. Output pixel i covers
    ``[i * s, (i + 1) * s)`` of the input (``s = source / target``) and averages the pixels under it, each weighted
    by how much of it is covered, so its weights sum to 1. (Taps rather than a matrix product: for a product numpy's
    BLAS may start threads, which on a busy machine costs far more than the arithmetic.)"""
    scale = source / target
    edges = np.arange(target + 1) * scale
    pixels = np.arange(source)
    covered = np.minimum(edges[1:, None], pixels + 1) - np.maximum(edges[:-1, None], pixels)
    covered[covered < 1e-9] = 0.0  # rounding at shared edges
    taps = int(np.count_nonzero(covered, axis=1).max())
    index = np.argsort(covered == 0.0, axis=1, kind="stable")[:, :taps]  # each output pixel's covered pixels first
    weight = np.take_along_axis(covered, index, axis=1) / scale
    return index, weight.astype(np.float32)


class Downscale(gymnasium.ObservationWrapper):
    """A grayscale screen resampled by area to ``size`` x ``size`` (``area_taps`` over rows, then columns), rounded
    to uint8."""

    def __init__(self, env: gymnasium.Env, size: int) -> None:
        super().__init__(env)
        height, width = env.observation_space.shape  # type: ignore[misc]
        row_index, row_weight = area_taps(height, size)
        self.rows = [(row_index[:, k], row_weight[:, k, None]) for k in range(row_index.shape[1])]
        column_index, column_weight = area_taps(width, size)
        self.columns = [(column_index[:, k], column_weight[:, k]) for k in range(column_index.shape[1])]
        self.observation_space = gymnasium.spaces.Box(0, 255, (size, size), np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        screen = observation.astype(np.float32)
        (index, weight), *rest = self.rows
        rows = screen[index] * weight
        for index, weight in rest:
            rows += screen[index] * weight
        (index, weight), *rest = self.columns
        resampled = rows[:, index] * weight
        for index, weight in rest:
            resampled += rows[:, index] * weight
        return (resampled + 0.5).astype(np.uint8)  # rounded: the values lie in [0, 255]


class ClipReward(gymnasium.RewardWrapper):
    """Rewards become their sign: -1, 0 or 1."""

    def reward(self, reward: SupportsFloat) -> float:
        return float(np.sign(float(reward)))


class FrameStack(gymnasium.Wrapper):
    """The last ``length`` screens along a new last axis, oldest first; a reset repeats the first screen. The screens
    are kept as they come and stacked into a new array once a step: 15 us for Atari's four, where shifting one
    stacked array along its last axis and copying it took 97 us."""

    def __init__(self, env: gymnasium.Env, length: int) -> None:
        super().__init__(env)
        shape = (*env.observation_space.shape, length)  # type: ignore[misc]
        self.observation_space = gymnasium.spaces.Box(0, 255, shape, np.uint8)
        self.screens: collections.deque[np.ndarray] = collections.deque(maxlen=length)

    def reset(self, **kwargs: Any) -> Any:
        observation, info = self.env.reset(**kwargs)
        screen = np.array(observation, dtype=np.uint8)  # a copy: the environment may reuse its array
        self.screens.extend([screen] * self.screens.maxlen)  # type: ignore[operator]
        return np.stack(self.screens, axis=-1), info

    def step(self, action: Any) -> Any:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.screens.append(np.array(observation, dtype=np.uint8))
        return np.stack(self.screens, axis=-1), reward, terminated, truncated, info


# ------------------------------------------------------------------------------------------------------ builders


def atari_env(
    game: str,
    *,
    frame_skip: int = 4,
    screen_size: int = 84,
    noop_max: int = 30,
    episodic_life: bool = True,
    fire_reset: bool = True,
    clip_rewards: bool = False,
    frame_stack: int = 4,
    repeat_action_probability: float = 0.0,
    full_action_space: bool = False,
    max_episode_frames: int | None = 108_000,
    monitor: str | os.PathLike | None = None,
    monitor_continue: bool = False,
    render_mode: str | None = None,
) -> gymnasium.Env:
    """An ALE game as a Gymnasium environment with the standard Atari preprocessing (see the module doc for each
    wrapper and its order): uint8 observations of shape ``(screen_size, screen_size, frame_stack)``, Discrete actions.

    Args:
        game: ``"Pong"``, ``"pong"``, ``"space_invaders"`` or an id such as ``"ALE/Pong-v5"`` (see ``atari_game_id``).
        frame_skip: frames per step (the action repeated, rewards summed, the last two frames max-pooled), at most
            10,000.
        screen_size: the side of the square, downscaled screen, at most 210.
        noop_max: a reset takes 1..noop_max random no-op steps (at most 10,000); 0: none.
        episodic_life: a lost life ends the agent's episode (not the game).
        fire_reset: press FIRE on every reset, in games that have it.
        clip_rewards: rewards become their sign.
        frame_stack: how many of the last screens an observation holds.
        repeat_action_probability: ALE's sticky actions (0: none).
        full_action_space: all 18 actions instead of the game's minimal set.
        max_episode_frames: games end by truncation after this many frames; None: no limit.
        monitor: a directory: one record per real game in ``episodes.jsonl`` (replacing earlier records).
        monitor_continue: keep the monitor's earlier records and append to them, the games numbered on.
        render_mode: ``"rgb_array"``, ``"human"`` (a window: needs a display) or ``"rgb_array_list"`` (every
            frame), or None.

    Invalid arguments are SpecErrors whose path is the argument's name.
    """
    gym_id = atari_game_id(game)
    frame_skip = expect_int(frame_skip, "frame_skip", minimum=1, maximum=MAX_REPEAT)
    screen_size = expect_int(screen_size, "screen_size", minimum=1, maximum=SCREEN_HEIGHT)
    noop_max = expect_int(noop_max, "noop_max", minimum=0, maximum=MAX_REPEAT)
    episodic_life = expect_bool(episodic_life, "episodic_life")
    fire_reset = expect_bool(fire_reset, "fire_reset")
    clip_rewards = expect_bool(clip_rewards, "clip_rewards")
    frame_stack = expect_int(frame_stack, "frame_stack", minimum=1)
    expect_elements(screen_size**2 * frame_stack, "frame_stack", f"an observation of {frame_stack} screens")
    sticky = expect_float(repeat_action_probability, "repeat_action_probability", minimum=0.0, maximum=1.0)
    full_action_space = expect_bool(full_action_space, "full_action_space")
    # ALE counts frames in an int
    max_episode_frames = expect_int(
        max_episode_frames, "max_episode_frames", minimum=1, maximum=2**31 - 1, allow_none=True
    )
    monitor_continue = check_monitor(monitor, monitor_continue, "")
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise SpecError("render_mode", "not a render mode of ALE", got=render_mode, expected=" or ".join(RENDER_MODES))
    if render_mode == "human" and not has_display():
        raise SpecError("render_mode", '"human" opens a window, which needs a display; none was found (no DISPLAY)')
    import ale_py

    # ALE prints its banner to standard output when it loads a game, into the middle of tfcli's tables
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    try:
        env = gymnasium.make(
            gym_id,
            frameskip=1,
            obs_type="grayscale",
            repeat_action_probability=sticky,
            full_action_space=full_action_space,
            max_num_frames_per_episode=max_episode_frames,
            render_mode=render_mode,
        )
    except gymnasium.error.Error as error:
        raise SpecError("game", f"cannot make '{gym_id}': {error}") from None
    if noop_max:
        env = NoopReset(env, noop_max)
    env = MaxAndSkip(env, frame_skip)
    if monitor is not None:
        env = game_monitor(env, records_file(Path(monitor), keep=monitor_continue))
    if episodic_life:
        env = EpisodicLife(env)
    fire = fire_action(env)
    if fire_reset and fire is not None:
        env = FireReset(env, fire)
    env = Downscale(env, screen_size)
    if clip_rewards:
        env = ClipReward(env)
    return FrameStack(env, frame_stack)


class Atari(Gym):
    """An ALE game from pixels (``atari_env`` through the Gym adapter): spec ``{"type": "atari", "game": "Pong",
    ...}`` with ``atari_env``'s options and ``seed``. Its state is ``{"type": "uint8", "shape": [84, 84, 4]}``
    (frames as bytes, channels last, oldest first), its action an int of the game's action set. Seeding, vectorized
    copies (``make_vector``, ``num_environments``, subprocess mode) and the 2018 API work as for any Gym
    environment; ``monitor`` records real games (see the module doc), not the agent's episodes, and
    ``monitor_continue`` appends to the records already there."""

    def __init__(
        self,
        game: str | None = None,
        *,
        frame_skip: int = 4,
        screen_size: int = 84,
        noop_max: int = 30,
        episodic_life: bool = True,
        fire_reset: bool = True,
        clip_rewards: bool = False,
        frame_stack: int = 4,
        repeat_action_probability: float = 0.0,
        full_action_space: bool = False,
        max_episode_frames: int | None = 108_000,
        monitor: str | None = None,
        monitor_continue: bool = False,
        render_mode: str | None = None,
        seed: int | None = None,
    ) -> None:
        path = "environment"
        if game is None:  # required; the default only lets a spec without it fail clearly
            raise SpecError(path, "an Atari environment needs 'game'", expected=GAME_EXAMPLE)
        try:
            env = atari_env(
                game,
                frame_skip=frame_skip,
                screen_size=screen_size,
                noop_max=noop_max,
                episodic_life=episodic_life,
                fire_reset=fire_reset,
                clip_rewards=clip_rewards,
                frame_stack=frame_stack,
                repeat_action_probability=repeat_action_probability,
                full_action_space=full_action_space,
                max_episode_frames=max_episode_frames,
                monitor=monitor,
                monitor_continue=monitor_continue,
                render_mode=render_mode,
            )
        except SpecError as error:
            raise error.under(path) from None
        super().__init__(env, seed=seed)
        self.game = self.gym_id.split("/", 1)[1].split("-v")[0]
        # frames stay uint8 (the adapter would read a Box as float32): agents store them as bytes
        self._states = {"type": "uint8", "shape": env.observation_space.shape}
        self._read = np.asarray

    def __str__(self) -> str:
        return f"Atari({self.game})"
