"""Evaluating and exporting an experiment's trained agent: what ``tfcli experiment evaluate`` and ``export`` do.

Both restore the agent from a checkpoint of the experiment's results and change nothing there:

- Where: the results the worker writes, when they are on this machine (``experiments/NAME/results/``, or a Ray
  job's storage folder here), else the results downloaded last (``tfcli experiment download``).
- Which checkpoint: ``latest`` (``checkpoints/latest.json``), ``best`` (``checkpoints/best.json``, which periodic
  evaluation during training writes: ``{"timesteps", "mean_return", "folder"}``), or a timestep whose checkpoint
  folder is still kept (``checkpoints/<timestep:012d>/``).
- The agent is built as the worker builds it (``worker_agent_spec``: no saver, no summaries) for the experiment's
  environment and network, then restored from the checkpoint's agent file for acting only
  (``restore_model(for_acting=True)``: ``torch.load`` with ``weights_only=True`` of the file mapped, not read, so
  that its replay memory and optimizers' state, gigabytes for an Atari DQN, stay on the disk); the runner's and the
  environments' state are not read, nothing is unpickled.
- The environment is the experiment's (with its ``repeat_actions``), seeded with ``seed`` (default: the
  experiment's). A Gymnasium or Atari environment's ``monitor*`` and ``visualize`` options are dropped: a monitor would
  replace the training's episode records, a window needs a display. For a video it renders ``rgb_array_list``
  (every step, also those ``repeat_actions`` takes in between).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from torchforce.client.checkpoints import Checkpoints, check_inside, plain_name
from torchforce.client.errors import ClientError
from torchforce.client.experiment import Experiment
from torchforce.client.experiment_build import acted_environment, runnable_here, worker_agent_spec
from torchforce.client.modules import modules_folder, use_modules
from torchforce.client.monitor import gym_specs
from torchforce.client.project import check_output
from torchforce.spec import SpecError

if TYPE_CHECKING:  # torch loads when an agent is built, not when the command line is parsed
    from torchforce.agents import Agent
    from torchforce.environments import Environment

CHECKPOINT_KINDS = ("best", "latest")
MONITOR_OPTIONS = ("monitor", "monitor_safe", "monitor_continue", "monitor_video", "visualize")
VIDEO_RENDER_MODE = "rgb_array_list"


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint of an experiment: how it was asked for (``best``, ``latest`` or its timestep), its folder,
    its timestep, and for ``best`` the mean return that made it the best."""

    which: str
    folder: Path
    timesteps: int
    mean_return: float | None = None

    def describe(self) -> str:
        return describe_checkpoint(self.which, self.timesteps, self.mean_return)

    def to_dict(self) -> dict[str, Any]:
        return {
            "which": self.which,
            "folder": self.folder.name,
            "timesteps": self.timesteps,
            "mean_return": self.mean_return,
        }


def describe_checkpoint(which: str, timesteps: int, mean_return: float | None = None) -> str:
    """``its best checkpoint (timestep 20,000, evaluation mean return 500)`` and the like."""
    if which == "best":
        score = "" if mean_return is None else f", evaluation mean return {mean_return:g}"
        return f"its best checkpoint (timestep {timesteps:,}{score})"
    if which == "latest":
        return f"its latest checkpoint (timestep {timesteps:,})"
    return f"its checkpoint at timestep {timesteps:,}"


def checkpoint_choice(text: str) -> str:
    """What ``--checkpoint`` accepts: ``best``, ``latest`` or a timestep (a whole number >= 0)."""
    if text in CHECKPOINT_KINDS or re.fullmatch(r"\d+", text):
        return text if text in CHECKPOINT_KINDS else str(int(text))
    raise ValueError(f"expected 'best', 'latest' or a timestep (a whole number), got '{text}'")


# ---------------------------------------------------------------------------------------------- checkpoints


def results_folder(experiment: Experiment) -> Path:
    """The results to read: where the worker writes them when that is on this machine, else those downloaded."""
    local = experiment.storage().local
    return local if local is not None else experiment.results


def find_checkpoint(experiment: Experiment, which: str = "latest") -> Checkpoint:
    """The checkpoint ``which`` (``best``, ``latest`` or a timestep) of the experiment's results; a ClientError
    that says what there is when there is no such checkpoint."""
    which = checkpoint_choice(str(which))
    folder = results_folder(experiment) / "checkpoints"
    download = (
        ""
        if experiment.storage().local is not None
        else f" Its results are on a cluster: bring them here with 'tfcli experiment download -e {experiment.name}'."
    )
    if which in CHECKPOINT_KINDS:
        pointer_file = folder / f"{which}.json"
        if not pointer_file.is_file():
            raise ClientError(_no_pointer_message(experiment, which, folder), hint=_no_pointer_hint(which) + download)
        pointer = _read_pointer(pointer_file)
        name, timesteps = pointer["folder"], pointer["timesteps"]
        mean = pointer.get("mean_return")
        checkpoint = Checkpoint(which, folder / name, timesteps, float(mean) if _is_number(mean) else None)
        if not checkpoint.folder.is_dir():
            raise ClientError(
                f"{pointer_file} names the checkpoint folder '{name}', which is not there (any more)",
                hint="A running worker may have just replaced it; try again." + download,
            )
    else:
        checkpoint = Checkpoint(which, folder / f"{int(which):012d}", int(which))
        if not checkpoint.folder.is_dir():
            kept = _kept_timesteps(folder)
            raise ClientError(
                f"experiment '{experiment.name}' has no checkpoint at timestep {int(which):,}",
                hint=(f"Kept: {', '.join(f'{t:,}' for t in kept)}." if kept else "It has no checkpoint yet.")
                + " Give --checkpoint latest, best or one of those timesteps."
                + download,
            )
    _inside(checkpoint.folder, folder, folder / f"{which}.json")
    return checkpoint


def _no_pointer_message(experiment: Experiment, which: str, folder: Path) -> str:
    if which == "best":
        return f"experiment '{experiment.name}' has no best checkpoint yet (no {folder / 'best.json'})"
    return f"experiment '{experiment.name}' has no checkpoint yet (no {folder / 'latest.json'})"


def _no_pointer_hint(which: str) -> str:
    if which == "best":
        return (
            "The best checkpoint is kept by the evaluation that runs periodically during training, once it has "
            "evaluated; use --checkpoint latest meanwhile."
        )
    return "Start the experiment and let it run until it checkpoints."


def _read_pointer(path: Path) -> dict[str, Any]:
    """A checkpoint pointer (``latest.json``, ``best.json``) checked: a plain folder name and a timestep."""
    try:
        pointer = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ClientError(f"cannot read {path}: {error}") from None
    if (
        isinstance(pointer, dict)
        and plain_name(pointer.get("folder"))
        and isinstance(pointer.get("timesteps"), int)
        and not isinstance(pointer.get("timesteps"), bool)
    ):
        return pointer
    raise ClientError(
        f'{path} is damaged: expected {{"timesteps": <int>, "folder": "<checkpoint folder>"}}, got '
        f"{json.dumps(pointer)[:200]}"
    )


def _inside(path: Path, root: Path, pointer_file: Path) -> None:
    """Refuse a checkpoint file that leads out of ``root`` (through a symbolic link), as resuming does."""
    try:
        check_inside(path, root, pointer_file)
    except ValueError as error:
        raise ClientError(str(error)) from None


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kept_timesteps(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.is_dir() and re.fullmatch(r"\d{12}", p.name))


# ---------------------------------------------------------------------------------------------- agent, environment


def environment_spec(spec: dict[str, Any], *, video: bool = False) -> Any:
    """The experiment's environment as evaluation builds it (see the module doc)."""
    return acted_environment(spec, _unmonitored(spec["environment"], video))


def own_environment_spec(spec: dict[str, Any], environment: Any) -> Any:
    """An evaluation environment of its own (``evaluation.environment``) as the worker's evaluation rounds build it:
    without monitor options, like the experiment's (their rounds are in ``results/evaluations.jsonl``; a monitor
    there would clear, or mix into, the training's records at every start)."""
    return acted_environment(spec, _unmonitored(environment, False))


def _unmonitored(environment: Any, video: bool) -> Any:
    """A Gymnasium or Atari environment spec without its monitor options (and rendering frames for a video), also
    where a wrapper's spec holds it (``repeat_actions``' ``environment``)."""

    def unmonitored(spec: dict[str, Any], _: str) -> dict[str, Any]:
        spec = {key: value for key, value in spec.items() if key not in MONITOR_OPTIONS}
        if video:
            spec["render_mode"] = VIDEO_RENDER_MODE
        return spec

    return gym_specs(environment, unmonitored, "environment")


def build_environment(experiment: Experiment, *, video: bool = False) -> Environment:
    """The experiment's environment (see ``environment_spec``); a ClientError naming it when it cannot be built."""
    from torchforce.environments import make

    use_modules(modules_folder(experiment.project.root))  # the project's own classes, as the worker has them
    spec = experiment.checked_spec
    try:
        return make(environment_spec(spec, video=video))
    except SpecError:
        raise
    except Exception as error:  # noqa: BLE001 - an environment's constructor can fail in any way
        raise ClientError(
            f"cannot build the environment of experiment '{experiment.name}': {type(error).__name__}: {error}",
            hint=_mujoco_hint(error),
        ) from None


def _mujoco_hint(error: BaseException) -> str | None:
    """For a failure inside OpenGL (MuJoCo's rendering, which ``MUJOCO_GL`` chooses when it is imported), what to
    set."""
    text = f"{type(error).__module__}: {error}"
    if not (re.search(r"opengl|\begl\b|osmesa|mujoco", text, re.IGNORECASE) or re.search(r"\bgl[A-Z]\w+", text)):
        return None
    return (
        f"MuJoCo renders through MUJOCO_GL={os.environ.get('MUJOCO_GL', '(not set)')}; headless, 'egl' (libEGL) or "
        "'osmesa' (libosmesa6) work where their library is installed: set MUJOCO_GL to one that works here."
    )


def restore_agent(experiment: Experiment, checkpoint: Checkpoint, environment: Environment) -> Agent:
    """The experiment's agent for ``environment``, restored from ``checkpoint`` (which stays as it is) for acting
    only: it acts as the checkpoint's agent does (``act(..., independent=True)``) and refuses to learn."""
    from torchforce.agents import create_agent

    spec = experiment.checked_spec
    kwargs: dict[str, Any] = {"states": environment.states, "actions": environment.actions}
    if spec["network"] is not None:
        kwargs["network"] = spec["network"]
    model = model_file(checkpoint.folder)
    agent = create_agent(runnable_here(worker_agent_spec(spec)), **kwargs)
    try:
        agent.restore_model(checkpoint.folder, file=model, for_acting=True)
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        agent.close()
        raise ClientError(
            f"cannot restore experiment '{experiment.name}' from {checkpoint.folder}: {error}",
            hint="The checkpoint must come from this experiment's agent and network (experiment.json unchanged).",
        ) from None
    return agent


def model_file(folder: Path) -> str:
    """The agent's file in a checkpoint folder: what ``runner.json`` names (the worker's checkpoints), or what the
    agent's own pointer file ``checkpoint`` names (checkpoints of the first format); a plain name inside it."""
    record_file = folder / Checkpoints.RUNNER
    if not record_file.is_file():
        record_file = folder / "checkpoint"
    try:
        record = json.loads(record_file.read_text())
    except (OSError, ValueError) as error:
        raise ClientError(f"cannot read the checkpoint {folder}: {error}") from None
    model = (
        record.get("model" if record_file.name == Checkpoints.RUNNER else "latest")
        if isinstance(record, dict)
        else None
    )
    if not plain_name(model):
        raise ClientError(f"{record_file}: expected the name of the agent's file in {folder}, got {model!r}")
    _inside(folder / model, folder, record_file)
    _inside(folder / (model if model.endswith(".pt") else f"{model}.pt"), folder, record_file)  # what loads
    return model


# ---------------------------------------------------------------------------------------------- the commands


def evaluate_experiment(
    experiment: Experiment,
    *,
    episodes: int = 10,
    checkpoint: str = "latest",
    video: str | Path | None = None,
    seed: int | None = None,
    on_step: Callable[[int, int], object] | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` deterministic episodes with the agent of ``checkpoint``; ``video``: record them (MP4);
    ``on_step(episode, step)``: called after each step (``evaluate_episodes``).
    Returns the report ``tfcli experiment evaluate --json`` prints: the experiment, the checkpoint, the
    environment, the seed, per episode return and length, their mean and standard deviation, the video."""
    from torchforce.execution.evaluation import VideoError, check_video_path, evaluate_episodes

    if video is not None:
        try:
            check_video_path(Path(video))
        except VideoError as error:
            raise ClientError(
                str(error), hint="Give --video a file 'NAME.mp4' in an existing folder you can write to."
            ) from None
    from torchforce.agents.errors import NonFiniteError

    found = find_checkpoint(experiment, checkpoint)
    spec = experiment.checked_spec
    seed = spec["seed"] if seed is None else seed
    environment = build_environment(experiment, video=video is not None)
    try:
        agent = restore_agent(experiment, found, environment)
        try:
            environment.seed(seed)
            result = evaluate_episodes(
                agent,
                environment,
                episodes=episodes,
                deterministic=True,
                max_episode_timesteps=spec["max_timesteps_per_episode"],
                video=video,
                on_step=on_step,
            )
        except VideoError as error:
            raise ClientError(str(error), hint=_video_hint(str(error))) from None
        except NonFiniteError as error:  # a diverged run's checkpoint: say which, and where to look instead
            raise ClientError(
                f"the {found.describe()}: {error}",
                hint="Evaluate an earlier checkpoint: --checkpoint best, or a STEP before the run diverged "
                "(tfcli experiment checkpoints lists them).",
            ) from None
        finally:
            agent.close()
    finally:
        environment.close()
    return {
        "experiment": experiment.name,
        "checkpoint": found.to_dict(),
        "environment": str(environment),
        "seed": seed,
        **result.to_dict(),
    }


def _video_hint(message: str) -> str | None:
    if "imageio" in message:
        return "Install them into the environment that runs tfcli."
    if "cannot record" in message:
        return "Leave out --video to evaluate without recording."
    return None


def export_experiment(
    experiment: Experiment, *, format: str | None, output: str | Path | None = None, checkpoint: str = "latest"
) -> tuple[Path, Checkpoint]:
    """Write the acting policy of ``checkpoint`` as ``format`` (``torchforce.export``; None: the one ``output``'s
    suffix names, as ``export_policy`` reads it, or TorchScript without ``output``) to ``output`` (default:
    ``experiments/NAME/exports/policy-<timestep>.pt`` or ``.onnx``); returns the file and the checkpoint."""
    from torchforce.export import FORMATS, SUFFIXES, ExportError, export_policy

    if format is None:  # the one -o's suffix names; without -o, TorchScript (torch alone loads it)
        format = SUFFIXES.get(Path(output).suffix.lower()) if output is not None else "torchscript"
        if format is None:
            raise ClientError(
                "which format? --format is not given" + (f", and '{output}' names none" if output is not None else ""),
                hint="Give --format " + " or ".join(FORMATS) + ", or -o FILE.onnx or FILE.pt.",
            )
    if format not in FORMATS:
        raise ClientError(f"unknown export format '{format}'", hint=f"Give --format {' or '.join(FORMATS)}.")
    suffix = Path(output).suffix.lower() if output is not None else FORMATS[format]
    if SUFFIXES.get(suffix, format) != format:
        raise ClientError(
            f"the output '{output}' is named as {SUFFIXES[suffix]}, but --format says {format}",
            hint=f"Name it '....{FORMATS[format].lstrip('.')}', or give --format {SUFFIXES[suffix]}.",
        )
    found = find_checkpoint(experiment, checkpoint)
    if output is None:
        path = experiment.folder / "exports" / f"policy-{found.timesteps}{FORMATS[format]}"
    else:
        path = Path(output)
        check_output(path, "the output", example=f"policy-{found.timesteps}{FORMATS[format]}")
    environment = build_environment(experiment)
    try:
        agent = restore_agent(experiment, found, environment)
    finally:
        environment.close()
    try:
        path.parent.mkdir(exist_ok=True)  # the default folder, exports/
        return export_policy(agent, path, format=format), found
    except ExportError as error:
        raise ClientError(f"cannot export experiment '{experiment.name}': {error}") from None
    finally:
        agent.close()
