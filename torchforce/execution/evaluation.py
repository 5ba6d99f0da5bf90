"""Evaluating an agent: deterministic episodes on a separate environment, without learning, optionally recorded
as a video.

``evaluate_episodes`` plays the episodes and returns an ``Evaluation`` (returns, lengths, their mean and standard
deviation); ``evaluate`` is its short form that gives the returns alone (what training's periodic evaluation
needs). With ``video=PATH`` every frame the environment renders goes into an MP4 (through imageio and its ffmpeg
plugin, ``pip install 'torchforce[video]'``):

- a Gymnasium environment (``torchforce.environments.Gym``, also inside wrappers such as ``repeat_actions``) must
  have been made with ``render_mode="rgb_array"`` or ``"rgb_array_list"``; with the latter every step is
  recorded, also the steps a wrapper takes in between the agent's (repeated actions, frame skipping);
- any other Environment records when it has a ``render()`` method that returns an RGB image ``[H, W, 3]`` (or a
  list of them);
- without a display (Linux, no ``DISPLAY``), ``MUJOCO_GL=egl`` (MuJoCo through EGL; ``osmesa`` is the software
  alternative, set it yourself) and ``SDL_VIDEODRIVER=dummy`` (pygame, which draws classic control, without a
  window system) are set for this process before the first frame, unless they are set already.

An environment that cannot render is a ``VideoError`` before any episode is played, and the video file is only
there once it is complete (it is written under a temporary name and renamed at the end).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from torchforce.agents import Agent
from torchforce.durable import unwritable
from torchforce.environments import Environment, Gym
from torchforce.execution.base import check_actions_fit
from torchforce.spec import expect_int

VIDEO_SUFFIX = ".mp4"
DEFAULT_FPS = 30
FRAME_MODES = ("rgb_array", "rgb_array_list")


class VideoError(ValueError):
    """A video that cannot be recorded: the environment does not render images, the packages are missing, or the
    file cannot be written where it was asked for."""


@dataclass(frozen=True)
class Evaluation:
    """The outcome of evaluation episodes: one return and one length (steps the agent acted) per episode."""

    returns: list[float]
    lengths: list[int]
    video: Path | None = None
    frames: int = 0  # frames written to the video

    @property
    def mean_return(self) -> float:
        return mean_return(self.returns)

    @property
    def std_return(self) -> float:
        """The standard deviation of the returns (population: divided by the number of episodes)."""
        return float(np.std(self.returns)) if self.returns else float("nan")

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths)) if self.lengths else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": [
                {"episode": index + 1, "return": value, "length": length}
                for index, (value, length) in enumerate(zip(self.returns, self.lengths, strict=True))
            ],
            "mean_return": self.mean_return,
            "std_return": self.std_return,
            "mean_length": self.mean_length,
            "video": None if self.video is None else str(self.video),
            "frames": self.frames,
        }


def evaluate_episodes(
    agent: Agent,
    environment: Environment,
    *,
    episodes: int = 10,
    deterministic: bool = True,
    max_episode_timesteps: int | None = None,
    video: str | Path | None = None,
    fps: int | None = None,
    on_step: Callable[[int, int], object] | None = None,
) -> Evaluation:
    """Play ``episodes`` episodes acted with ``independent=True``: the agent's counters, memory and training rows
    are untouched, so evaluation can run in the middle of training. An episode ends at a terminal (1 or 2) or
    after ``max_episode_timesteps`` steps; where a terminal ends only a part of a game that goes on
    (``Environment.game_goes_on``: an Atari life), the game is played on, each part an episode of the agent (as in
    training), and the return and length are the whole game's. ``video``: an ``.mp4`` file to record the episodes
    into, one after the other, at ``fps`` frames per second (default: the environment's ``render_fps``, else 30).
    ``on_step(episode, step)`` is called after each step (both counted from 1): a progress bar's hook, as rendering
    a video may take far longer than playing (MuJoCo through software EGL: about 0.1 s a frame)."""
    episodes = expect_int(episodes, "episodes", minimum=1)
    max_episode_timesteps = expect_int(max_episode_timesteps, "max_episode_timesteps", minimum=1, allow_none=True)
    fps = expect_int(fps, "fps", minimum=1, allow_none=True)
    check_actions_fit(agent, environment)
    recorder = None if video is None else VideoRecorder(environment, Path(video), fps=fps)
    returns, lengths = [], []
    with recorder if recorder is not None else contextlib.nullcontext():
        for episode in range(1, episodes + 1):
            state = environment.reset() if recorder is None else recorder.reset()
            agent.start_independent_episode()  # its own recurrent state, frames and noise, from the start
            total, steps = 0.0, 0
            while True:
                action = agent.act(state, deterministic=deterministic, independent=True)
                state, terminal, reward = environment.execute(action)
                if recorder is not None:
                    recorder.capture()
                total += reward
                steps += 1
                if on_step is not None:
                    on_step(episode, steps)
                if max_episode_timesteps is not None and steps >= max_episode_timesteps:
                    break
                if terminal:
                    if not environment.game_goes_on:
                        break
                    state = environment.reset() if recorder is None else recorder.reset()  # the game's next life
                    agent.start_independent_episode()
            returns.append(total)
            lengths.append(steps)
    if recorder is None:
        return Evaluation(returns, lengths)
    return Evaluation(returns, lengths, video=recorder.path, frames=recorder.frames)


def evaluate(
    agent: Agent,
    environment: Environment,
    *,
    episodes: int = 20,
    deterministic: bool = True,
    max_episode_timesteps: int | None = None,
) -> list[float]:
    """The returns of ``evaluate_episodes`` (which see)."""
    return evaluate_episodes(
        agent,
        environment,
        episodes=episodes,
        deterministic=deterministic,
        max_episode_timesteps=max_episode_timesteps,
    ).returns


def mean_return(returns: list[float]) -> float:
    return float(np.mean(returns)) if returns else float("nan")


# ---------------------------------------------------------------------------------------------- videos


class VideoRecorder:
    """The frames ``environment`` renders, written to ``path`` as they come (used as a context manager: the file
    appears under its name only when the recording ends without an error). Everything that can be checked before
    the episodes is checked when it is made: the file name, its folder, the packages, that the environment renders
    images at all."""

    def __init__(self, environment: Environment, path: Path, *, fps: int | None = None) -> None:
        check_video_path(path)
        _prefer_headless_rendering()  # before anything renders: pygame and MuJoCo read it when they start
        self.environment, self.path = environment, path
        self._imageio = _video_writer_module()
        self._render, default_fps = _frame_source(environment)
        self.fps = fps or default_fps
        self.frames = 0
        self._writer: Any = None
        self._partial = path.with_name(f".{path.stem}.{secrets.token_hex(4)}.partial{path.suffix}")

    def __enter__(self) -> VideoRecorder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if self._writer is not None:
                try:
                    self._writer.close()
                except OSError as failure:
                    if kind is None:  # else the error that ended the recording is the one to tell
                        raise VideoError(self._write_failed(failure)) from failure
            if kind is None:
                if self.frames == 0:
                    raise VideoError(f"{self.environment} rendered no frame: the video '{self.path}' would be empty")
                try:
                    os.replace(self._partial, self.path)
                except OSError as failure:
                    raise VideoError(self._write_failed(failure)) from failure
        finally:
            self._partial.unlink(missing_ok=True)

    def reset(self) -> Any:
        """Reset the environment and record its first frame; returns its states. The first reset also starts the
        video: a renderer that fails then (an environment made with ``rgb_array_list`` renders in ``reset``
        already) is a VideoError that says what to try."""
        if self._writer is not None:
            states = self.environment.reset()
            self.capture()
            return states
        try:
            states = self.environment.reset()
            rendered = self._render()
        except Exception as error:  # noqa: BLE001 - a renderer fails in many ways; each gets the same advice
            raise VideoError(_render_failure(self.environment, error)) from error
        self._writer = self._imageio.get_writer(
            str(self._partial), fps=self.fps, macro_block_size=2, ffmpeg_log_level="error"
        )
        self._write(rendered)
        return states

    def capture(self) -> None:
        """Record what the environment rendered since the last call (one frame, or the list it collected)."""
        self._write(self._render())

    def _write(self, rendered: Any) -> None:
        for frame in _frames(rendered, self.environment):
            try:
                self._writer.append_data(frame)
            except OSError as error:
                raise VideoError(self._write_failed(error)) from error
            self.frames += 1

    def _write_failed(self, error: OSError) -> str:
        """What to say when writing the video failed (a full disk, a folder gone): the file system's reason, or,
        where ffmpeg (which writes the file) stopped, that its own message (on standard error, before) says why."""
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if "FFMPEG COMMAND" in str(error):  # imageio-ffmpeg's error: the pipe into ffmpeg broke
            return f"video '{self.path}': writing it failed: ffmpeg stopped ({first}); its message above says why"
        return f"video '{self.path}': writing it failed: {error.strerror or first}"


def check_video_path(path: Path) -> None:
    """A VideoError unless ``path`` can become the video: an ``.mp4`` file in a folder that exists and takes new
    files (checked before any episode is played, which may take long)."""
    if path.suffix.lower() != VIDEO_SUFFIX:
        raise VideoError(f"video '{path}': videos are written as MP4; name the file '....mp4'")
    if not path.parent.is_dir():
        raise VideoError(f"video '{path}': the folder '{path.parent}' does not exist")
    if path.is_dir():
        raise VideoError(f"video '{path}' is a folder")
    reason = unwritable(path.parent)
    if reason is not None:
        raise VideoError(f"video '{path}': the folder '{path.parent}' takes no new file ({reason})")


def _video_writer_module() -> Any:
    """``imageio.v2`` with its ffmpeg plugin, or a VideoError that says what to install."""
    try:
        module = importlib.import_module("imageio.v2")
        importlib.import_module("imageio_ffmpeg")
    except ImportError:
        raise VideoError(
            "recording a video needs the imageio and imageio-ffmpeg packages: pip install 'torchforce[video]'"
        ) from None
    return module


def _innermost_gym(environment: Environment) -> Gym | None:
    """The Gymnasium adapter ``environment`` is, or wraps (``repeat_actions`` keeps it as ``.environment``)."""
    seen: set[int] = set()
    current: Any = environment
    while isinstance(current, Environment) and id(current) not in seen:
        if isinstance(current, Gym):
            return current
        seen.add(id(current))
        current = getattr(current, "environment", None)
    return None


def _frame_source(environment: Environment) -> tuple[Callable[[], Any], int]:
    """How to get ``environment``'s frames, and its frame rate; a VideoError when it renders no images."""
    gym = _innermost_gym(environment)
    if gym is not None:
        modes = list(gym.gym.metadata.get("render_modes") or [])
        if "rgb_array" not in modes:
            raise VideoError(
                f"{environment} cannot record a video: Gymnasium's '{gym.gym_id}' renders "
                f"{', '.join(map(repr, modes)) or 'nothing'}, not 'rgb_array' images"
            )
        if gym.gym.render_mode not in FRAME_MODES:
            raise VideoError(
                f"{environment} cannot record a video: it was made with render_mode={gym.gym.render_mode!r}; "
                "make it with render_mode='rgb_array_list' (every step) or 'rgb_array'"
            )
        fps = gym.gym.metadata.get("render_fps")
        return gym.gym.render, int(fps) if isinstance(fps, (int, float)) and fps >= 1 else DEFAULT_FPS
    render = getattr(environment, "render", None)
    if callable(render):
        return render, DEFAULT_FPS
    raise VideoError(
        f"{environment} cannot record a video: it is no Gymnasium environment and has no render() method that "
        "returns an RGB image [height, width, 3]"
    )


def _frames(rendered: Any, environment: Environment) -> list[np.ndarray]:
    """``rendered`` (one image or a list of them) as RGB uint8 frames; a VideoError for anything else."""
    images = rendered if isinstance(rendered, list) else [rendered]
    frames = []
    for image in images:
        array = np.asarray(image) if image is not None else None
        if array is None or array.ndim != 3 or array.shape[-1] != 3:
            shape = None if array is None else list(array.shape)
            raise VideoError(f"{environment} rendered {shape or 'nothing'} instead of an RGB image [height, width, 3]")
        frames.append(array if array.dtype == np.uint8 else np.clip(array, 0, 255).astype(np.uint8))
    return frames


def _prefer_headless_rendering() -> None:
    """Without a display: MuJoCo through EGL and pygame (classic control) without a window system, unless the
    user chose otherwise (``MUJOCO_GL``, ``SDL_VIDEODRIVER``)."""
    has_display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if sys.platform.startswith("linux") and not has_display:
        os.environ.setdefault("MUJOCO_GL", "egl")
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def _render_failure(environment: Environment, error: BaseException) -> str:
    message = f"{environment} failed to start and render its first frame: {type(error).__name__}: {error}"
    gym = _innermost_gym(environment)
    if gym is not None and "mujoco" in type(gym.gym.unwrapped).__module__:
        backend = os.environ.get("MUJOCO_GL", "(not set)")
        message += (
            f". MuJoCo renders without a display through MUJOCO_GL={backend}; the headless backends are 'egl' "
            "(libEGL with a GPU driver or Mesa) and 'osmesa' (software, libosmesa6): set MUJOCO_GL to one that "
            "works on this machine and try again"
        )
    return message
