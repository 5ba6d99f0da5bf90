"""``tfcli experiment ...``: the commands' arguments and help. What each command does is in ``experiment_runs``
(new, start, pause, stop, download, delete: thin wrappers over ``Experiment``) and ``experiment_results`` (watch,
list, show, logs, plot, compare); importing this module registers their handlers."""

from __future__ import annotations

import argparse

import torchforce.client.commands.experiment_results  # noqa: F401 (its handlers register)
import torchforce.client.commands.experiment_runs  # noqa: F401 (its handlers register)
from torchforce.client.aggregate import WINDOW
from torchforce.client.commands import add_command, evaluate, finite_float, positive_int
from torchforce.client.groups import parse_seeds


def add_parser(groups: argparse._SubParsersAction) -> None:
    group = add_command(
        groups,
        "experiment",
        help="create, run and inspect experiments",
        description="Experiments: an agent on an environment with a budget, validated completely when created,\n"
        "run by a background worker (on this machine, or as a Ray job on a cluster of the project), paused,\n"
        "resumed and compared.",
        examples=[
            "tfcli experiment new -n cp -A ppo_cartpole -E cartpole -t 50000",
            "tfcli experiment start -e cp --follow",
            "tfcli experiment list",
        ],
    )
    experiments = group.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    _add_new(experiments)
    _add_running(experiments)
    _add_inspecting(experiments)
    _add_results(experiments)
    evaluate.add_parsers(experiments)


def _add_new(experiments: argparse._SubParsersAction) -> None:
    new = add_command(
        experiments,
        "new",
        help="create an experiment",
        description="Create experiments/NAME/experiment.json from a spec file and/or flags (flags override the "
        "file).\nBare names resolve to configs/<kind>/NAME.json. --set KEY=VALUE changes any value of the result, "
        "also\ninside the agent, network, environment and cluster configs (a named config is loaded, then changed): "
        "KEY\nis a dotted path (agent.network[0].size), VALUE is JSON (8, 3e-4, true, [64, 64]) or else plain text. "
        "The\nwhole experiment is validated (the environment and the agent are built once) before anything is "
        "written,\nand experiment.json shows every value as set. --seeds makes a group: one run per seed, named "
        "NAME-s<seed>,\nall validated before any is written; 'show', 'compare' and 'plot' take the group's name "
        "for its runs.",
        examples=[
            "tfcli experiment new -n cp -A ppo_cartpole -E cartpole -t 50000 --start",
            "tfcli experiment new -n cp -A ppo_cartpole -E cartpole -t 50000 --seeds 0-4 --start",
            "tfcli experiment new -f cartpole_ppo -n cp-seed3 --seed 3",
            "tfcli experiment new -n dqn-acro -A dqn_cartpole -E cartpole --episodes 500 \\\n"
            "      --set agent.optimizer.learning_rate=3e-4 --set environment.gym_id=Acrobot-v1 "
            "--set num_environments=8",
            "tfcli experiment new -n cp4 -A ppo_cartpole -E cartpole --run-mode multi-threaded --num-workers 4",
            "tfcli experiment new -f cartpole_ppo -n cp-tuned --warm-start cp --seed 1",
        ],
    )
    new.add_argument("-f", "--file", help="an experiment spec file, or a name in configs/experiments/")
    new.add_argument("-n", "--name", help="the experiment's name (lower-case letters, digits, '-', '_')")
    new.add_argument("-A", "--agent", help="agent config (file or name in configs/agents/)")
    new.add_argument("-M", "--network", help="network config (file or name in configs/networks/)")
    new.add_argument(
        "-E",
        "--environment",
        help="environment: a config (file or name in configs/environments/), a Gymnasium id such as "
        "HalfCheetah-v5, or module:Class",
    )
    new.add_argument(
        "--cluster", help="cluster config (file or name in configs/clusters/); -c at 'start' picks one to run on"
    )
    new.add_argument("--episodes", type=int, help="stop after this many episodes in all")
    new.add_argument("-t", "--total-timesteps", type=int, help="stop after this many timesteps in all")
    new.add_argument("--max-timesteps-per-episode", type=int, help="cut episodes at this many timesteps")
    new.add_argument("--deterministic", action="store_true", default=None, help="act without exploration")
    new.add_argument("--num-workers", type=int, help="workers (multi-threaded and distributed run modes)")
    new.add_argument("--num-parameter-servers", type=int, help="parameter servers (distributed run mode)")
    new.add_argument("--run-mode", choices=("single", "multi-threaded", "distributed"), help="how the workers run")
    new.add_argument(
        "-N",
        "--num-environments",
        type=int,
        help="vectorized environment copies (default 1; single and distributed run modes)",
    )
    new.add_argument(
        "--torch-threads",
        type=int,
        help="torch threads of whatever runs the agent (default 1, fastest for small networks; CNN agents "
        "gain from more where cores are free)",
    )
    new.add_argument("--seed", type=int, help="random seed (default 0)")
    new.add_argument(
        "--seeds",
        type=seeds_argument,
        metavar="SEEDS",
        help="make a group of runs NAME-s<seed>, one per seed: 0-4, 0,3,7 or 0-2,5",
    )
    new.add_argument("--description", help="a line saying what the experiment is for")
    new.add_argument(
        "--warm-start",
        metavar="EXP[:CHECKPOINT]",
        help="begin from the networks (and preprocessing statistics) of experiment EXP's checkpoint here: latest "
        "(default), best or a timestep; copied into the new experiment",
    )
    new.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="set one value of the spec, after the file and the flags (repeatable; see above); not a whole field "
        "that a flag gives another value",
    )
    new.add_argument("--start", action="store_true", help="start it (or each run of the group) right away")


def seeds_argument(text: str) -> list[int]:
    """An argparse type: the seeds of ``--seeds`` (``groups.parse_seeds``)."""
    try:
        return parse_seeds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _window_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--window",
        type=positive_int,
        default=WINDOW,
        metavar="N",
        help=f"average returns over the last N episodes (default {WINDOW}, in every table and plot)",
    )


def _add_running(experiments: argparse._SubParsersAction) -> None:
    listing = add_command(
        experiments,
        "list",
        help="a table of the project's experiments and groups",
        description="A table of the project's experiments: agent, environment, where it runs, status, progress and "
        "the\nmean return of the last 100 episodes (--window). A group of runs (--seeds) is one row: its runs' "
        "statuses\ncounted, their mean progress, and the mean return across seeds with a 95% confidence interval; "
        "--runs\nlists every run instead. --json gives every run's row, then every group's.",
        examples=["tfcli experiment list", "tfcli experiment list --runs --window 20", "tfcli experiment list --json"],
    )
    listing.add_argument("--runs", action="store_true", help="a row for every run, also those of groups")
    _window_argument(listing)
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    start = add_command(
        experiments,
        "start",
        help="start (or resume) an experiment",
        description="Start the experiment's worker in the background: on this machine, or with -c CLUSTER as a "
        "Ray job\non a Ray cluster or a RayJob on a GKE cluster made with 'tfcli cluster create'. Without -c, the "
        "spec's\ncluster is used when it names one: a GKE cluster it names that does not exist yet is created for "
        "it\n(its cost shown, confirmed or --yes) and deleted when the experiment ends, as tensorforce-client did."
        "\n--resume continues a paused, stopped or crashed run from its latest checkpoint (where it ran last,\n"
        "unless -c says otherwise; its own GKE cluster, deleted as the run ended, is created again, in the same\n"
        "zone); with -t N (or --episodes N) it continues to that new total, a finished run too (-t sets the\n"
        "budget of any start: it is written to experiments/NAME/experiment.json when the run takes its slot;\n"
        "the agent's own schedules keep theirs). -e may name a group: each of its runs.\n"
        "--fresh discards earlier results and starts over. --max-restarts N resumes from the last checkpoint\n"
        "by itself after a crash or a killed worker process, up to N times.\n"
        "On this machine, a start beyond the runs it takes at once ('tfcli project config') is queued: it starts\n"
        "by itself, first come first served, when a run ends (--follow waits for it).",
        examples=[
            "tfcli experiment start -e cp --follow",
            "tfcli experiment start -e cp --resume",
            "tfcli experiment start -e cp --resume -t 200000",
            "tfcli experiment start -e a3c -c ray_local --max-restarts 3",
            "tfcli experiment start -e a3c -c gke-small --max-restarts 3",
        ],
    )
    _experiment_argument(start, group=True)
    start.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    start.add_argument("--fresh", action="store_true", help="discard earlier results and start over")
    start.add_argument("-c", "--cluster", help="a Ray or GKE cluster of the project, or 'local' (this machine)")
    start.add_argument(
        "-y", "--yes", action="store_true", help="create the spec's GKE cluster without asking (its cost is shown)"
    )
    start.add_argument(
        "--dry-run", action="store_true", help="GKE: print the gcloud/kubectl calls and the RayJob, change nothing"
    )
    start.add_argument(
        "--max-restarts", type=int, default=0, metavar="N", help="resume by itself after a crash, up to N times"
    )
    start.add_argument(
        "--trust-pickle",
        action="store_true",
        help="resuming results from someone else: unpickle their environments' state anyway (it runs their code; "
        "without it such a run goes on in fresh environments)",
    )
    start.add_argument(
        "-t",
        "--total-timesteps",
        type=int,
        metavar="N",
        help="the run's budget in timesteps, all told: with --resume, train longer (a finished run too)",
    )
    start.add_argument("--episodes", type=int, metavar="N", help="the run's budget in episodes, all told")
    start.add_argument("-F", "--follow", action="store_true", help="show progress until the experiment ends")
    pause = add_command(
        experiments,
        "pause",
        help="checkpoint a running experiment and stop its worker",
        description="Ask the worker to checkpoint and end; 'start --resume' continues exactly where it paused.\n"
        "On GKE the RayJob is then suspended (its pods go; the cluster's nodes stay until it is deleted).",
        examples=["tfcli experiment pause -e cp"],
    )
    _experiment_argument(pause, group=True)
    stop = add_command(
        experiments,
        "stop",
        help="end an experiment for good (checkpointing first)",
        description="End the experiment: a running worker checkpoints first. Its results stay in "
        "experiments/NAME/results/.\nA queued experiment leaves the queue instead, back to the status it had.",
        examples=["tfcli experiment stop -e cp"],
    )
    _experiment_argument(stop, group=True)
    stop.add_argument("--no-download", action="store_true", help="do not fetch the results first")


def _add_inspecting(experiments: argparse._SubParsersAction) -> None:
    show = add_command(
        experiments,
        "show",
        help="an experiment's (or a group's) spec, status, counters and recent returns",
        description="Everything about one experiment: status, agent, environment, budget, progress, speed, recent "
        "returns,\ncheckpoint and where its results are. For a group: what its runs share, their statuses, the "
        "mean return\nacross seeds (95% confidence interval, IQM), and a row per run.",
        examples=["tfcli experiment show -e cp", "tfcli experiment show -e cp --json"],
    )
    show.add_argument("-e", "--experiment", required=True, metavar="NAME", help="the experiment's or group's name")
    _window_argument(show)
    show.add_argument(
        "--json",
        action="store_true",
        help="machine-readable output (a run's with its whole spec; a group's with its runs' rows)",
    )
    logs = add_command(
        experiments,
        "logs",
        help="print an experiment's worker log",
        description="Print the worker's log (progress lines, checkpoints, errors); on a Ray cluster, the job's log; "
        "on GKE,\nthe RayJob's (kubectl logs, streamed with --follow).",
        examples=["tfcli experiment logs -e cp", "tfcli experiment logs -e cp --follow"],
    )
    _experiment_argument(logs)
    logs.add_argument("-F", "--follow", action="store_true", help="keep printing until the worker ends")
    watch = add_command(
        experiments,
        "watch",
        help="show a progress bar until the experiment ends",
        description="A progress bar (timesteps, steps/s, episodes, mean return) until the experiment stops running.",
        examples=["tfcli experiment watch -e cp"],
    )
    _experiment_argument(watch)


def _add_results(experiments: argparse._SubParsersAction) -> None:
    plot = add_command(
        experiments,
        "plot",
        help="learning curves of one or more experiments (PNG)",
        description="Plot the episode return, smoothed over the last --window episodes, against timesteps and "
        "against\nwall-clock time: one line per experiment; for a group, the mean across its seeds in a 95% "
        "bootstrap\nconfidence band.",
        examples=["tfcli experiment plot -e cp", "tfcli experiment plot -e cp cp-seed3 -o curves.png --window 50"],
    )
    plot.add_argument(
        "-e", "--experiment", nargs="+", required=True, metavar="NAME", help="the experiments and groups to plot"
    )
    plot.add_argument(
        "-o",
        "--output",
        help="the PNG to write (default: learning_curve.png in the first experiment's results folder, "
        "group_learning_curve.png for a group)",
    )
    _window_argument(plot)
    compare = add_command(
        experiments,
        "compare",
        help="a table comparing experiments",
        description="Compare experiments and groups: episodes, timesteps, time, best and final mean return (of "
        "the last\n--window episodes), speed; with --threshold also the steps and time each took to reach that mean "
        "return.\nA group shows its runs' figures together: the final mean return across seeds with a 95% "
        "bootstrap\nconfidence interval and the interquartile mean (IQM), and how many seeds reached the threshold, "
        "how\nfast (median, min-max).",
        examples=[
            "tfcli experiment compare -e cp cp-seed3 --threshold 475",
            "tfcli experiment compare cp-group other   # -e may be left out",
        ],
    )
    compare.add_argument(
        "-e", "--experiment", nargs="+", default=[], metavar="NAME", help="the experiments and groups to compare"
    )
    compare.add_argument("experiments", nargs="*", metavar="NAME", help="the same, without -e")
    compare.add_argument(
        "--threshold", type=finite_float, help="report steps and time until the mean return (last --window) reaches it"
    )
    _window_argument(compare)
    compare.add_argument("--json", action="store_true", help="machine-readable output")
    download = add_command(
        experiments,
        "download",
        help="fetch an experiment's results into experiments/NAME/results",
        description="Bring the results (checkpoints, TensorBoard summaries, episode log) to "
        "experiments/NAME/results/.\nOn this machine they are there already.",
        examples=["tfcli experiment download -e cp"],
    )
    _experiment_argument(download, group=True)
    delete = add_command(
        experiments,
        "delete",
        help="remove an experiment that is not running, with its results",
        description="Remove the experiment's folder (spec and results) and its row in the state database. It "
        "also\nremoves an experiment whose folder was deleted by hand or whose spec is damaged.",
        examples=["tfcli experiment delete -e cp"],
    )
    _experiment_argument(delete, group=True)


def _experiment_argument(parser: argparse.ArgumentParser, group: bool = False) -> None:
    """``-e NAME``; with ``group``, NAME may also be a group (``new --seeds``): the command acts on each of its
    runs for which it makes sense (``on_group``)."""
    parser.add_argument(
        "-e",
        "--experiment",
        required=True,
        metavar="NAME",
        help="the experiment's name, or a group's: each of its runs" if group else "the experiment's name",
    )
