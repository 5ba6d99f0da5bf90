"""Learning benchmarks beyond CartPole: MuJoCo and Atari tasks, torchforce against Stable-Baselines3.

One learning run per process (``python bench/tasks.py --task hopper_ppo --library torchforce --seed 0 --steps
50000 --curve FILE``), as in ``learning.py``: imports, memory and caches of one run never touch another. The child
prints its result as one JSON line; the curve goes to ``--curve``, one JSON line per finished episode in the
format of torchforce's episode logs (``episode``, ``timesteps``, ``worker``, ``return``, ``length``,
``wall_time``: training seconds so far), so ``torchforce.plots`` reads it too.

torchforce trains the shipped experiment ``torchforce/configs/experiments/<task>.json`` as its worker builds it
(``resolve_experiment``, then the experiment's environment, number of environments, vectorization, agent and
network, on a ``Runner``), without checkpoints and summaries, which SB3 does not write either. SB3 trains the
zoo's entry (``sb3_tasks.py``) on the same environment. Both run on one torch thread, on ``--device`` (cpu by
default). No evaluation episodes: the figures come from the training episodes themselves (the exploring policy,
as both libraries log them).

Atari: an episode of the agent ends at every lost life (the episodic-life wrapper) and its rewards are clipped, so
the curve records real games instead, from the records ``atari_env``'s monitor writes below those wrappers (the
game's own score). A game is stamped with the steps and seconds at which the agent's episode that ended with it
ended.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from copy import deepcopy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

HERE = Path(__file__).resolve().parent
LIBRARIES = ("torchforce", "sb3")
SMOOTHING = 10  # time to the threshold: the first episode (game) at which the mean of the last 10 reaches it
QUICK_STEPS = 3_000  # --quick: environment steps per run


@dataclass(frozen=True)
class Task:
    """A benchmark task: the shipped torchforce experiment, the zoo entry SB3 trains, the return whose reaching
    is timed (``threshold``), and how many last episodes (Atari: games) the final return averages (``window``)."""

    experiment: str
    sb3: str
    threshold: float
    window: int
    atari: bool = False
    note: str = ""
    agent: dict[str, Any] = field(default_factory=dict)  # options that replace the shipped agent's (a variant)


def shipped_agent(name: str) -> dict[str, Any]:
    """The shipped agent config ``name`` (torchforce/configs/agents/<name>.json), for variants that change a part."""
    from torchforce.configs import shipped

    return json.loads(shipped("agents", name).read_text())


TASKS: dict[str, Task] = {
    "halfcheetah_ppo": Task("halfcheetah_ppo", "ppo_halfcheetah", 1500.0, 100),
    "hopper_ppo": Task("hopper_ppo", "ppo_hopper", 1000.0, 100),
    "halfcheetah_ddpg": Task("halfcheetah_ddpg", "ddpg_halfcheetah", 1500.0, 100),
    "halfcheetah_naf": Task(
        "halfcheetah_naf", "ddpg_halfcheetah", 1500.0, 100, note="SB3 has no NAF: compared with SB3's DDPG"
    ),
    "pong_dqn": Task("pong_dqn", "dqn_atari", -10.0, 20, atari=True),
    "breakout_dqn": Task("breakout_dqn", "dqn_atari", 10.0, 20, atari=True),
    "pong_ppo": Task("pong_ppo", "ppo_atari", -10.0, 20, atari=True),
    "breakout_ppo": Task("breakout_ppo", "ppo_atari", 10.0, 20, atari=True),
}
# every Atari task with torchforce's networks in bfloat16 and in float32 whatever the CPU (the shipped configs'
# mixed_precision "auto" is bfloat16 only where the CPU has its instructions), SB3 as it is: run by name
ATARI_PRECISIONS = {  # variant suffix: (the agent's mixed_precision, the note)
    "bfloat16": ("bfloat16", "torchforce's networks in bfloat16 (mixed_precision), SB3 in float32"),
    "float32": (None, "torchforce's networks in float32 (mixed_precision null, the shipped config until 2026-12-02)"),
}
TASKS |= {
    f"{name}_{suffix}": replace(task, note=note, agent={"mixed_precision": precision})
    for name, task in TASKS.items()
    if task.atari
    for suffix, (precision, note) in ATARI_PRECISIONS.items()
}
# the MuJoCo tasks with torchforce's losses compiled (the agent's compile: torch.compile), SB3 as it is: run by name
TASKS |= {
    f"{name}_compiled": replace(
        TASKS[name],
        note="torchforce's losses compiled (compile: torch.compile), SB3 uncompiled",
        agent={"compile": True},
    )
    for name in ("halfcheetah_ppo", "hopper_ppo", "halfcheetah_ddpg")
}
# NAF with a faster optimizer and noise that narrows over the run (tried 2026-11-29, bench/README.md): run by name
TASKS["halfcheetah_naf_narrowing"] = replace(
    TASKS["halfcheetah_naf"],
    note="SB3 has no NAF: compared with SB3's DDPG. torchforce's NAF with Adam 1e-3 and a gradient-norm clip of 1, "
    "its Gaussian noise narrowing from 0.3 to 0.1 over 300k steps",
    agent={
        "optimizer": {"type": "adam", "learning_rate": 1e-3, "clip_grad_norm": 1.0},
        "actions_exploration": {
            "type": "gaussian_noise",
            "sigma": {"type": "linear", "initial": 0.3, "final": 0.1, "timesteps": 300_000},
        },
    },
)


# NAF with two updates per step, each on a fresh batch (update_mode.updates, NAF's I = 2), its target moving 0.01 a
# step: about the 0.005 per update of the shipped config (tried 2026-11-30, bench/README.md): run by name
TASKS["halfcheetah_naf_updates2"] = replace(
    TASKS["halfcheetah_naf"],
    note="SB3 has no NAF: compared with SB3's DDPG. torchforce's NAF with two updates per environment step "
    "(update_mode.updates 2) and target_update_weight 0.01",
    agent={
        "update_mode": {**shipped_agent("naf_halfcheetah")["update_mode"], "updates": 2},
        "target_update_weight": 0.01,
    },
)


# DDPG with the zoo's 400x300 actor and critic, which SB3 trains, in place of the shipped 256x256 (the shipped width
# until 2026-12-01, bench/README.md): run by name
ZOO_DDPG_LAYERS = [{"type": "dense", "size": size, "activation": "relu"} for size in (400, 300)]
TASKS["halfcheetah_ddpg_400"] = replace(
    TASKS["halfcheetah_ddpg"],
    note="torchforce's actor and critic 400x300, as SB3's (the shipped config's: 256x256)",
    agent={"network": ZOO_DDPG_LAYERS, "critic_network": ZOO_DDPG_LAYERS},
)


# Breakout DQN with one update every 8 steps from the 20k-th on (22,500 updates in the bench's 200k steps, SB3's
# 25,000 from its 100k-th step on), where the shipped config updates every 4 steps (45,000): the 0.7x wall-clock
# target needs SB3's number of updates (tried 2026-12-06, bench/README.md): run by name
TASKS["breakout_dqn_every8"] = replace(
    TASKS["breakout_dqn"],
    note="torchforce's DQN updates every 8 steps (update_mode.frequency 8; the shipped config: every 4)",
    agent={"update_mode": {**shipped_agent("dqn_atari")["update_mode"], "frequency": 8}},
)


class TaskUnavailable(Exception):
    """The task cannot run here: its experiment config or its environment is missing."""


def experiment(task: Task) -> dict[str, Any]:
    """The shipped experiment of ``task``, resolved as ``tfcli experiment new`` resolves it (configs inline,
    defaults filled in), in a throwaway project whose configs are the shipped ones; a variant's agent options
    replace the shipped agent's."""
    from torchforce.client.experiment_file import resolve_experiment
    from torchforce.client.project import Project
    from torchforce.configs import folder

    path = folder("experiments") / f"{task.experiment}.json"
    if not path.is_file():
        raise TaskUnavailable(f"no experiment config torchforce/configs/experiments/{path.name}")
    with tempfile.TemporaryDirectory() as root:
        project, _ = Project.init(root)
        spec = resolve_experiment(project, json.loads(path.read_text()), build=False)
    return {**spec, "agent": {**spec["agent"], **deepcopy(task.agent)}} if task.agent else spec  # not shared


def unavailable(name: str, device: str = "cpu") -> str | None:
    """Why the task ``name`` cannot run here on the torch ``device``, or None when it can."""
    from torchforce.agents.compute import cpp_compiler_found
    from torchforce.core.networks import cpu_bfloat16_native

    task = TASKS[name]
    if task.agent.get("mixed_precision") == "bfloat16" and device == "cpu" and cpu_bfloat16_native() is False:
        return (
            "its networks compute in bfloat16, which this CPU (no AVX512-BF16 or AMX instructions) does in software, "
            "several times slower than float32; run it on a CPU with them, or with --device cuda"
        )
    if task.agent.get("compile") and device == "cpu" and not cpp_compiler_found():
        return "its losses compile to C++, and TorchInductor finds no C++ compiler here (g++, or the one $CXX names)"
    try:
        spec = experiment(task)
        if task.atari:
            import torchforce.environments.atari  # noqa: F401

            atari_setup(spec["environment"])
        else:
            gym_id(spec["environment"])
    except TaskUnavailable as error:
        return str(error)
    except ImportError as error:
        return f"cannot import what it needs: {error}"
    return None


def gym_id(environment: dict[str, Any]) -> str:
    """The Gymnasium id of a MuJoCo task's environment spec: both libraries make it with its defaults."""
    if environment.get("type") not in ("gym", "gymnasium", "openai_gym") or set(environment) - {"type", "gym_id"}:
        raise TaskUnavailable(f"its environment is no plain Gymnasium id, which SB3 could make alike: {environment}")
    return str(environment["gym_id"])


def atari_setup(environment: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The game and the ``atari_env`` options of an Atari task's environment spec."""
    options = {key: value for key, value in environment.items() if key not in ("type", "game", "monitor", "seed")}
    if "game" not in environment:
        raise TaskUnavailable(f"its environment names no Atari game: {environment}")
    return str(environment["game"]), options


# ---------------------------------------------------------------------------------------------- recording


class Curve:
    """The run's episodes (Atari: games) as JSON lines, with the training clock."""

    def __init__(self, path: Path) -> None:
        self.handle: TextIO = open(path, "w")  # noqa: SIM115
        self.returns: list[float] = []
        self.points: list[tuple[int, float, float]] = []  # steps, seconds, return
        self.started = 0.0

    def start(self) -> None:
        self.started = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def add(self, steps: int, worker: int, value: float, length: int, **extra: Any) -> None:
        seconds = self.seconds()
        self.returns.append(value)
        self.points.append((steps, seconds, value))
        record = {
            "episode": len(self.returns),
            "timesteps": steps,
            "worker": worker,
            "return": value,
            "length": length,
            "wall_time": round(seconds, 4),
            **extra,
        }
        self.handle.write(json.dumps(record) + "\n")
        self.handle.flush()  # a run stopped from outside keeps its curve so far

    def close(self) -> None:
        self.handle.close()


class Games:
    """The games the Atari monitors append to ``<folder>/<copy>/episodes.jsonl``, read as they come."""

    def __init__(self, folder: Path, copies: int) -> None:
        self.folder, self.copies = folder, copies
        self.files: dict[Path, TextIO] = {}
        self.pending: dict[Path, str] = {}

    def new(self) -> list[tuple[int, dict[str, Any]]]:
        """``(copy, record)`` of every game recorded since the last call (whole lines only)."""
        if len(self.files) < self.copies:
            for path in sorted(self.folder.glob("*/episodes.jsonl")):
                if path not in self.files:
                    self.files[path] = open(path)  # noqa: SIM115
        games = []
        for copy, (path, handle) in enumerate(self.files.items()):
            text = self.pending.pop(path, "") + handle.read()
            *lines, rest = text.split("\n")
            if rest:
                self.pending[path] = rest
            games += [(copy, json.loads(line)) for line in lines if line.strip()]
        return games

    def close(self) -> None:
        for handle in self.files.values():
            handle.close()


def record_games(curve: Curve, games: Games, steps: int) -> None:
    for copy, game in games.new():
        curve.add(steps, copy, float(game["reward"]), int(game["length"]), frames=game.get("frames"))


# ---------------------------------------------------------------------------------------------- the two libraries


def train_torchforce(
    task: Task, spec: dict[str, Any], *, seed: int, steps: int, device: str, curve: Curve, games: Path | None
) -> dict[str, Any]:
    """The experiment's agent on the experiment's environments, as its worker builds them (seeded ``seed``)."""
    from torchforce.agents import create_agent
    from torchforce.client.experiment_build import acted_environment, worker_agent_spec
    from torchforce.environments import VectorEnvironment, make
    from torchforce.execution import Runner

    spec = {**spec, "seed": seed}
    count = spec["num_environments"]
    environment = spec["environment"]
    if games is not None:  # each copy writes its games to a folder of its own (copies may live in worker processes)
        folder = str(games)

        def build() -> Any:
            return make(acted_environment(spec, {**environment, "monitor": tempfile.mkdtemp(dir=folder)}))

    else:

        def build() -> Any:
            return make(acted_environment(spec, environment))

    vector = VectorEnvironment(factory=build, num_environments=count, mode=spec["vectorization"])
    vector.seed(seed)
    agent_spec = {**worker_agent_spec(spec), "device": device}
    network = {} if spec["network"] is None else {"network": spec["network"]}
    agent = create_agent(agent_spec, states=vector.states, actions=vector.actions, **network)
    reader = None if games is None else Games(games, count)

    def episode_finished(runner: Runner, worker: int) -> bool:
        if reader is None:
            curve.add(runner.global_timestep, worker, runner.episode_rewards[-1], runner.episode_timesteps[-1])
        else:
            record_games(curve, reader, runner.global_timestep)
        return True

    runner = Runner(agent, vector, torch_threads=1)
    curve.start()
    try:
        runner.run(
            num_timesteps=steps,
            max_episode_timesteps=spec["max_timesteps_per_episode"],
            deterministic=spec["deterministic"],
            episode_finished=episode_finished,
        )
        seconds = curve.seconds()
        if reader is not None:
            record_games(curve, reader, runner.global_timestep)  # games the last steps finished
    finally:
        if reader is not None:
            reader.close()
        runner.close()
    return {
        "steps": runner.global_timestep,
        "train_seconds": seconds,
        "environments": count,
        "settings": f"torchforce/configs/experiments/{task.experiment}.json ({count} environment"
        f"{'s' if count != 1 else ''}, {spec['vectorization']})",
    }


def train_sb3(
    task: Task, spec: dict[str, Any], *, seed: int, steps: int, device: str, curve: Curve, games: Path | None
) -> dict[str, Any]:
    """SB3 with the zoo's hyperparameters (``sb3_tasks.ZOO``) on the experiment's environment."""
    import numpy as np
    import sb3_tasks

    entry = sb3_tasks.ZOO[task.sb3]
    reader = None
    if games is None:
        environments = sb3_tasks.mujoco_environments(entry, gym_id(spec["environment"]), seed)
    else:
        game, options = atari_setup(spec["environment"])
        environments = sb3_tasks.atari_environments(entry, game, options, seed, games)
        reader = Games(games, entry["n_envs"])

    def on_step(num_timesteps: int, dones: Any, infos: list[dict]) -> None:
        if not dones.any():
            return
        if reader is not None:
            record_games(curve, reader, num_timesteps)
            return
        for worker in np.flatnonzero(dones):
            episode = infos[worker].get("episode")
            if episode is not None:
                curve.add(num_timesteps, int(worker), float(episode["r"]), int(episode["l"]))

    try:
        result = sb3_tasks.train(
            task.sb3, environments, seed=seed, steps=steps, device=device, on_step=on_step, on_start=curve.start
        )
        seconds = curve.seconds()
        if reader is not None:
            record_games(curve, reader, result["steps"])  # games the last steps finished
    finally:
        if reader is not None:
            reader.close()
    return {**result, "train_seconds": seconds}


# ---------------------------------------------------------------------------------------------- one run


def child(arguments: argparse.Namespace) -> None:
    import torch
    from learning import peak_rss_mb
    from report import time_to_threshold

    torch.set_num_threads(1)
    started = time.perf_counter()
    task = TASKS[arguments.task]
    spec = experiment(task)
    if arguments.environments is not None:  # torchforce's environments otherwise than the experiment's
        spec = {**spec, "num_environments": arguments.environments, "vectorization": arguments.vectorization}
    curve = Curve(Path(arguments.curve))
    games = Path(arguments.games) if task.atari else None
    if games is not None:
        games.mkdir(parents=True, exist_ok=True)
    train = train_torchforce if arguments.library == "torchforce" else train_sb3
    try:
        result = train(
            task, spec, seed=arguments.seed, steps=arguments.steps, device=arguments.device, curve=curve, games=games
        )
    finally:
        curve.close()
    reached = time_to_threshold(curve.points, task.threshold, SMOOTHING)
    last = curve.returns[-task.window :]
    result.update(
        episodes=len(curve.returns),
        final_return=sum(last) / len(last) if last else None,
        final_episodes=len(last),
        steps_to_threshold=None if reached is None else reached[0],
        seconds_to_threshold=None if reached is None else reached[1],
        steps_per_second=result["steps"] / result["train_seconds"],
        process_seconds=time.perf_counter() - started,
        peak_rss_mb=peak_rss_mb(),
    )
    print(json.dumps(result))


def run_in_subprocess(
    name: str, library: str, *, seed: int, steps: int, device: str, curve: Path, games: Path
) -> dict[str, Any]:
    """One learning run in a fresh process; its result (see ``child``)."""
    from learning import run_child

    command = [sys.executable, str(HERE / "tasks.py"), "--task", name, "--library", library, "--seed", str(seed)]
    command += ["--steps", str(steps), "--device", device, "--curve", str(curve), "--games", str(games)]
    return run_child(command, f"{name} {library} seed {seed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--library", choices=LIBRARIES, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, required=True, help="environment steps, all copies together")
    parser.add_argument("--device", default="cpu", help="the torch device of both libraries (cpu, cuda)")
    parser.add_argument("--curve", required=True, help="the episode curve's JSON-lines file")
    parser.add_argument("--games", default=None, help="Atari: the folder of the monitors' game records")
    parser.add_argument("--environments", type=int, help="torchforce: this many environments, not the experiment's")
    parser.add_argument("--vectorization", default="sync", choices=("sync", "subprocess"), help="with --environments")
    arguments = parser.parse_args()
    if arguments.environments is not None and arguments.library != "torchforce":
        parser.error("--environments is torchforce's: SB3 runs the zoo's number of environments")
    child(arguments)


if __name__ == "__main__":
    main()
