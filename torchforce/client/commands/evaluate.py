"""``tfcli experiment evaluate`` and ``tfcli experiment export``: use a trained agent (thin wrappers over
``torchforce.client.evaluate``)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torchforce.client.commands import add_command, command, positive_int
from torchforce.client.commands.output import format_table, print_json, relative
from torchforce.client.evaluate import (
    checkpoint_choice,
    describe_checkpoint,
    evaluate_experiment,
    export_experiment,
)
from torchforce.client.experiment import Experiment
from torchforce.client.project import Project

EXPORT_FORMATS = ("torchscript", "onnx")


def add_parsers(experiments: argparse._SubParsersAction) -> None:
    """The ``evaluate`` and ``export`` subcommands of ``tfcli experiment``."""
    evaluate = add_command(
        experiments,
        "evaluate",
        help="play deterministic episodes with a trained agent (returns, video)",
        description="Restore the agent from a checkpoint of the experiment's results (the latest, the best that "
        "periodic\nevaluation kept, or one at a timestep) and play deterministic episodes on a fresh copy of its "
        "environment:\na table of each episode's return and length, their mean and standard deviation. --video "
        "records the\nepisodes as an MP4 (needs imageio and imageio-ffmpeg, and an environment that renders "
        "images;\nMuJoCo without a GPU renders about 10 frames a second). On a terminal a progress bar shows the "
        "episodes as\nthey play. The results and checkpoints stay as they are. Only what acting needs is read of "
        "the checkpoint:\nnot its replay memory nor its optimizers' state. A run on a cluster: download its results "
        "first.",
        examples=[
            "tfcli experiment evaluate -e cp",
            "tfcli experiment evaluate -e cp --checkpoint best --episodes 20 --json",
            "tfcli experiment evaluate -e cp --video cp.mp4 --episodes 3",
        ],
    )
    _experiment_argument(evaluate)
    evaluate.add_argument(
        "--episodes", type=positive_int, default=10, metavar="N", help="episodes to play (default 10)"
    )
    _checkpoint_argument(evaluate)
    evaluate.add_argument("--video", metavar="FILE.mp4", help="record the episodes into this MP4 file")
    evaluate.add_argument(
        "--seed", type=int, metavar="S", help="seed of the environment (default: the experiment's seed)"
    )
    evaluate.add_argument("--json", action="store_true", help="machine-readable output")
    export = add_command(
        experiments,
        "export",
        help="export the acting policy as TorchScript or ONNX",
        description="Write the trained agent's acting policy as a module that maps a batch of states to its "
        "deterministic\nactions (the mode of a discrete action, the mean of a continuous one), with the state "
        "preprocessing\nincluded: TorchScript (torch.jit.load) or ONNX (onnxruntime; exporting needs onnx and "
        "onnxscript).\nA run-long running_standardize (the MuJoCo PPO configs' normalization) goes in with its "
        "statistics frozen\nas they are at the checkpoint. The states go in as the agent gets them from its "
        "environment (Atari:\nthe wrappers' 84x84x4 uint8 frame stacks, not raw screens). One tensor per state in, "
        "one per action\nout, in name order; their names, shapes and dtypes travel in the file as JSON: TorchScript's "
        "extra file\ntorchforce.json (torch.jit.load(path, _extra_files={'torchforce.json': ''})), ONNX's metadata "
        "property\ntorchforce. Only what acting needs is read of the checkpoint: not its replay memory nor its "
        "optimizers'\nstate.",
        examples=[
            "tfcli experiment export -e cp --format onnx",
            "tfcli experiment export -e cp --format torchscript -o cp_policy.pt --checkpoint best",
            "tfcli experiment export -e cp -o cp_policy.onnx   # the format from the suffix",
        ],
    )
    _experiment_argument(export)
    export.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        help="the file format (default: the one -o's suffix names, .onnx or .pt; without -o, torchscript)",
    )
    export.add_argument(
        "-o", "--output", metavar="FILE", help="the file to write (default: experiments/NAME/exports/policy-STEP.*)"
    )
    _checkpoint_argument(export)


def _experiment_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-e", "--experiment", required=True, metavar="NAME", help="the experiment's name")


def _checkpoint_argument(parser: argparse.ArgumentParser) -> None:
    def choice(text: str) -> str:
        try:
            return checkpoint_choice(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parser.add_argument(
        "--checkpoint",
        type=choice,
        default="latest",
        metavar="best|latest|STEP",
        help="which checkpoint: the latest (default), the best, or the one at timestep STEP",
    )


@command("experiment", "evaluate")
def experiment_evaluate(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
    with episode_bar(args.episodes, video=args.video is not None, shown=sys.stderr.isatty()) as on_step:
        report = evaluate_experiment(
            experiment,
            episodes=args.episodes,
            checkpoint=args.checkpoint,
            video=args.video,
            seed=args.seed,
            on_step=on_step,
        )
    if args.json:
        print_json(report)
        return
    checkpoint = report["checkpoint"]
    which = describe_checkpoint(checkpoint["which"], checkpoint["timesteps"], checkpoint["mean_return"])
    count = len(report["episodes"])
    print(
        f"'{experiment.name}' at {which}: {count} deterministic episode{'' if count == 1 else 's'} of "
        f"{report['environment']}, seed {report['seed']}\n"
    )
    rows = [[row["episode"], f"{row['return']:.2f}", row["length"]] for row in report["episodes"]]
    print(format_table(["Episode", "Return", "Length"], rows))
    print(
        f"\nMean return {report['mean_return']:.2f} ± {report['std_return']:.2f} (std), "
        f"mean length {report['mean_length']:.1f}"
    )
    if report["video"] is not None:
        print(f"Video: {relative_path(report['video'])} ({report['frames']} frames)")


@contextlib.contextmanager
def episode_bar(episodes: int, *, video: bool, shown: bool) -> Iterator[Callable[[int, int], object] | None]:
    """A progress bar on stderr while the episodes play (``shown``: on a terminal; elsewhere none, and the hook is
    None): the episode, the steps played so far and their pace (with a video, the rendering's). It appears at the
    first step (restoring the agent is not counted) and is gone when the episodes end, before the table."""
    if not shown:
        yield None
        return
    from tqdm import tqdm

    bars: list[Any] = []  # the bar, from the first step on
    current = [0]

    def on_step(episode: int, step: int) -> None:
        if not bars:
            postfix = "rendering every frame for the video" if video else None
            bars.append(
                tqdm(
                    desc=f"episode {episode}/{episodes}",
                    postfix=postfix,
                    unit="step",
                    file=sys.stderr,
                    dynamic_ncols=True,
                    leave=False,
                )
            )
            current[0] = episode
        if episode != current[0]:
            current[0] = episode
            bars[0].set_description_str(f"episode {episode}/{episodes}", refresh=False)
        bars[0].update()

    try:
        yield on_step
    finally:
        for bar in bars:
            bar.close()


@command("experiment", "export")
def experiment_export(args: argparse.Namespace) -> None:
    experiment = Experiment.load(Project.find(), args.experiment)
    path, checkpoint = export_experiment(experiment, format=args.format, output=args.output, checkpoint=args.checkpoint)
    print(f"Exported the acting policy of '{experiment.name}' from {checkpoint.describe()}: {relative_path(path)}")


def relative_path(path: str | Path) -> str:
    return relative(Path(path).resolve())
