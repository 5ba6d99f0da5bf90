"""Where the time goes: the profiles behind the benchmark report's notes on missed targets.

    python bench/profiles.py act     # act() on one CartPole state, stage by stage, against bare PyTorch
    python bench/profiles.py step [--task hopper_ppo]   # one training step of a MuJoCo PPO agent, stage by stage
    python bench/profiles.py dqn     # cProfile of DQN training on CartPole (the shipped config), top functions
    python bench/profiles.py collect [--environment HalfCheetah-v5]   # one vectorized step of collection
    python bench/profiles.py floors   # 16-env CartPole collection, layer by layer, against Gymnasium's rate
    python bench/profiles.py ppo-atari   # Breakout PPO: updates and collection, both libraries
    python bench/profiles.py dqn-atari   # Breakout DQN: one update, both libraries and bare torch
    python bench/profiles.py ppo-atari --mixed-precision   # the same with torchforce's networks in bfloat16
    python bench/profiles.py ddpg    # HalfCheetah DDPG: one update, both libraries and bare torch, two widths
    python bench/profiles.py compile --task halfcheetah_ppo   # torchforce's updates with and without compile
    python bench/profiles.py casts   # the Atari agents' act() in float32 and bfloat16, the weights' casts reused or not

``act`` times, call by call (median of many calls, one torch thread): the same MLP as plain torch functional calls
on the agent's own weights (the floor for eager PyTorch), the policy's forward and sampling (``Policy.act``), the same
pass in NumPy as the agent makes it (``Policy.on_host``), and the whole ``agent.act(state, deterministic=True,
independent=True)``; then SB3's ``predict`` on the same state when
stable-baselines3 is installed, and a cProfile of ``act`` (top functions by own time).

``step`` times one environment's training step of a shipped single-environment experiment's agent (default
``halfcheetah_ppo``), without the environment and with updates off: ``act`` + ``observe`` on states the environment
gave for random actions, then its stages (the states' preprocessing, the policy's pass and sample, the same MLP and
Gaussian sample as bare torch functional calls), each the median over many calls, and a cProfile of the step.

``collect`` splits one step of the collection benchmark (16 CartPole-v1 copies in one process and the shipped PPO
agent, updates off; or an environment of ``micro.HEAVY``) into the agent's ``act``, stepping the copies through
``VectorEnvironment`` and ``observe``, each the median over many steps, next to Gymnasium's ``SyncVectorEnv`` step of
as many copies with random actions; then a cProfile of the Runner over the same steps.

``floors`` takes the 16-copy CartPole collection of the benchmark apart, as rates beside Gymnasium's ``SyncVectorEnv``
stepping random actions, each the median of ``--rounds`` rounds of 20,000 steps, every figure taking its turn in each
round (so that a machine's drift touches them alike): the copies stepped through ``VectorEnvironment`` with fixed
actions (the environment's floor); the same with actions from the shipped ``ppo_cartpole`` MLP as bare torch
functional calls and Gumbel-max sampling (eager PyTorch's floor for this acting); from the agent's ``Policy`` pass and
sample in torch (``act_forward``), and as the agent acts, in NumPy (``Policy.on_host``, ``core/host_acting.py``); from
``agent.act(independent=True)`` (acting without recording); from ``act`` + ``observe`` as in training (recording,
updates off); and the Runner, what the benchmark measures. Each step down is what that layer costs.

``ppo-atari`` trains Breakout PPO for ``--timesteps`` steps with each library (torchforce's shipped ``breakout_ppo``,
SB3 with the zoo's entry, as ``bench/tasks.py`` runs them) and splits each run's seconds into its updates and the
rest (stepping the copies, acting, recording); then it times the same update (4 epochs of 4 minibatches of 256
frames through the Nature CNN and both heads: forward, backward, gradient clipping, fused Adam) as bare torch on
random frames, with the frames channels-first in memory (SB3's layout) and channels-last (torchforce's): the floor
of eager PyTorch for this arithmetic on one thread.

``dqn-atari`` times Breakout DQN's update call by call: torchforce's shipped ``breakout_dqn`` agent and SB3's DQN with
the zoo's entry, each on its own replay memory of the same ``atari_env`` frames, updating from 2,000 steps on for
``--timesteps`` more (one update every 4 steps: the retrieval of 32 rows, the Q-network over their states, the target
network over their next states, the Huber loss, backward, gradient clipping, Adam); then the same update as bare torch
modules on random frames, channels-first and channels-last. SB3's run writes nothing but its timing (no games).

``--mixed-precision`` runs both Atari profiles with torchforce's agent in bfloat16 (``mixed_precision``, the
``*_bfloat16`` variants of ``bench/tasks.py``) and the bare-torch updates under the same ``torch.autocast``; SB3
stays float32.

``ddpg`` times HalfCheetah DDPG's update call by call, updating from 2,000 steps on for ``--timesteps`` more (one
update a step: 256 rows, the critic's step, then the actor's, then the targets): torchforce's ``halfcheetah_ddpg``
(256x256, shipped) and ``halfcheetah_ddpg_400`` (400x300, the zoo's) agents, SB3's DDPG with the zoo's entry, then
the same update as bare torch modules at both widths: the floor of eager PyTorch for this arithmetic on one thread.

``compile`` trains the agent of a task of ``bench/tasks.py`` (its experiment's environments; a DQN agent updating
from 2,000 steps on, epsilon at its final value, as ``bench/devices.py`` measures it) for ``--timesteps`` steps
without and then with the agent's ``compile`` (torch.compile of its losses), one torch thread, and times each update
(``Agent._learn``): the first (which compiles), the median of the others, and the run's seconds outside updates.

``casts`` times ``act(states, independent=True)`` of the shipped ``breakout_dqn`` (one environment's frame, epsilon at
its final 0.01, so the Q-network runs) and ``breakout_ppo`` (a batch of its 8 environments' frames) agents, median of
many calls on one torch thread: in float32, in bfloat16 with autocast casting the layers' float32 weights on every
call (``Layer.weight_and_bias`` handing over the parameters themselves), and in bfloat16 as shipped, each layer's
casts reused until its weights change.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import cProfile
import json
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

CALLS = 20_000
PRECISION = {False: "", True: ", torchforce's networks and bare torch in bfloat16 (SB3 float32)"}


def median_us(call: Callable[[], object], calls: int = CALLS) -> float:
    from micro import timed

    sample = timed(call)
    sample(calls // 10)  # warm up
    return float(np.median(sample(calls)))


def cartpole_agent(name: str):
    from torchforce.agents import create_agent
    from torchforce.configs import shipped
    from torchforce.environments import make

    environment = make("CartPole-v1")
    spec = json.loads(shipped("agents", f"{name}_cartpole").read_text())
    agent = create_agent(spec, states=environment.states, actions=environment.actions, seed=0)
    return agent, np.asarray(environment.reset(), dtype=np.float32)


def bare_logits(agent) -> Callable[[np.ndarray], torch.Tensor]:
    """The agent's MLP and categorical head as bare torch functional calls, states to logits (call it without
    gradients): what eager PyTorch costs at least."""
    layers = [agent.policy.network.get_submodule(name) for name in agent.policy.network.layer_names]
    head = next(iter(agent.policy.heads.values())).logits
    weights = [(layer.weight, layer.bias, layer.act) for layer in layers] + [(head.weight, head.bias, None)]

    def logits(states: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(states)
        for weight, bias, activation in weights:
            x = F.linear(x, weight, bias)
            if activation is not None:
                x = activation(x)
        return x

    return logits


def floor_call(agent, state: np.ndarray) -> Callable[[], object]:
    """``bare_logits`` of one state and the greedy action."""
    logits = bare_logits(agent)

    def call() -> np.ndarray:
        with torch.inference_mode():
            return logits(state[None]).argmax(-1).numpy()

    return call


def profile_act() -> None:
    torch.set_num_threads(1)
    agent, state = cartpole_agent("ppo")
    tensors = {"state": torch.from_numpy(state[None])}

    def policy_act() -> object:
        with torch.inference_mode():
            return agent.policy.act(tensors, {}, True)

    host = agent.policy.on_host()
    stages = {
        "bare torch: the same MLP + argmax, functional calls": floor_call(agent, state),
        "Policy.act: network forward + head + argmax": policy_act,
        "the same in NumPy, as the agent acts (Policy.on_host)": lambda: host.act({"state": state[None]}, True),
        "agent.act(state, deterministic=True, independent=True)": lambda: agent.act(state, True, True),
    }
    try:
        from stable_baselines3 import PPO

        model = PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu")
        stages["SB3 PPO predict(obs, deterministic=True)"] = lambda: model.predict(state, deterministic=True)
    except ImportError:
        pass
    for name, call in stages.items():
        print(f"{median_us(call):8.1f} us  {name}")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(CALLS):
        agent.act(state, True, True)
    profiler.disable()
    print(f"\ncProfile of {CALLS:,} act() calls (own time):")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(12)


def profile_step(task: str) -> None:
    """One training step of the ``task``'s agent (updates off), stage by stage; see the module's docstring."""
    import tasks

    from torchforce.agents import create_agent
    from torchforce.client.experiment_build import worker_agent_spec
    from torchforce.environments import make

    torch.set_num_threads(1)
    spec = tasks.experiment(tasks.TASKS[task])
    environment = make(spec["environment"])
    agent_spec = worker_agent_spec(spec)
    # no update comes due within the profile, and the memory holds every step of it
    agent_spec["update_mode"] = {**agent_spec["update_mode"], "batch_size": 10**6, "frequency": 10**6}
    agent_spec["memory"] = {**agent_spec["memory"], "capacity": 2 * 10**6}
    agent = create_agent(agent_spec, states=environment.states, actions=environment.actions)
    rng = np.random.default_rng(0)
    states = [np.asarray(environment.reset(), dtype=np.float32)]
    while len(states) < 1_000:
        state, terminal, _ = environment.execute(rng.uniform(-1.0, 1.0, environment.actions["shape"]))
        states.append(np.asarray(environment.reset() if terminal else state, dtype=np.float32))
    step = iter(range(10**9))

    def train_step() -> None:
        agent.act(states[next(step) % len(states)])
        agent.observe(terminal=False, reward=1.0)

    name = next(iter(agent.preprocessing))
    batch = {name: states[0][None]}
    tensors = agent.as_tensors(agent._preprocess(batch))

    def policy_pass() -> object:
        with torch.inference_mode():
            return agent.policy.act_forward(tensors, {}, False)

    layers = [agent.policy.network.get_submodule(layer) for layer in agent.policy.network.layer_names]
    head = next(iter(agent.policy.heads.values()))

    def bare() -> np.ndarray:
        with torch.inference_mode():
            x = tensors[name]
            for layer in layers:
                x = F.linear(x, layer.weight, layer.bias)
                x = x if layer.act is None else layer.act(x)
            mean = F.linear(x, head.mean.weight, head.mean.bias)
            return (mean + head.log_stddev.exp() * torch.randn_like(mean)).clamp(-1.0, 1.0).numpy()

    stages = {
        "agent.act(state) + agent.observe(terminal, reward): one training step": train_step,
        "the state's preprocessing (its running statistics advance)": lambda: agent._preprocess(batch),
        "Policy.act_forward: the network, the Gaussian head, a sample": policy_pass,
        "bare torch: the same MLP, mean and Gaussian sample, functional calls": bare,
    }
    print(f"{task}: {spec['agent']['type']} on {environment.states['shape']} states, updates off")
    for label, call in stages.items():
        print(f"{median_us(call):8.1f} us  {label}")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(CALLS):
        train_step()
    profiler.disable()
    print(f"\ncProfile of {CALLS:,} steps (own time):")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(12)


def profile_dqn(timesteps: int) -> None:
    from torchforce.configs import shipped
    from torchforce.execution.training import train

    torch.set_num_threads(1)
    experiment = json.loads(shipped("experiments", "cartpole_dqn").read_text())
    profiler = cProfile.Profile()
    begin = time.perf_counter()
    profiler.enable()
    agent, result = train(
        str(shipped("agents", "dqn_cartpole")),
        "CartPole-v1",
        seed=0,
        num_timesteps=timesteps,
        num_environments=experiment["num_environments"],
        eval_every=10**9,
    )
    profiler.disable()
    seconds = time.perf_counter() - begin
    print(f"{result.timesteps:,} steps, {agent.updates:,} updates in {seconds:.1f} s (under cProfile)\n")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(15)


def profile_collect(environment: str, steps: int) -> None:
    import functools

    import gymnasium
    import micro

    from torchforce.environments import make_vector
    from torchforce.execution.runner import Runner

    torch.set_num_threads(1)
    if environment == micro.ENV_ID:
        factory, spec, config, count = functools.partial(gymnasium.make, micro.ENV_ID), micro.SPEC, "ppo_cartpole", 16
    else:
        heavy = {heavy.name: heavy for heavy in micro.HEAVY}[environment]
        factory, spec, config, count = heavy.factory, heavy.spec, heavy.config, heavy.envs
    environments = make_vector(spec, count, mode="sync", seed=0)
    agent = micro.recording_agent(config, environments.states, environments.actions)
    gym, close = micro._gymnasium_vector(factory, "sync", count)
    clock = time.perf_counter_ns
    calls = max(steps // count, 1)
    stages = {name: np.empty(calls) for name in ("act", "execute", "observe", "gymnasium step")}
    states = environments.reset()
    for index in range(-calls // 10, calls):  # the first tenth warms up
        begin = clock()
        actions = agent.act(states)
        acted = clock()
        step = environments.execute(actions)
        executed = clock()
        truncated = (step.terminal == 2).any()
        agent.observe(terminal=step.terminal, reward=step.reward, next_states=step.final_states if truncated else None)
        observed = clock()
        gym(count)
        states = step.states
        if index >= 0:
            times = (acted - begin, executed - acted, observed - executed, clock() - observed)
            for samples, value in zip(stages.values(), times, strict=True):
                samples[index] = value / 1_000.0
    print(f"{environment}, {count} copies in one process, {config} (updates off); medians of {calls:,} steps:")
    for name, samples in stages.items():
        print(f"{np.median(samples):9.1f} us  {name}")
    close()
    runner = Runner(agent, environments)
    profiler = cProfile.Profile()
    profiler.enable()
    runner.run(num_timesteps=steps)
    profiler.disable()
    environments.close()
    print(f"\ncProfile of the Runner over {steps:,} steps (own time):")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(20)


def profile_floors(rounds: int, steps: int = 20_000) -> None:
    import functools

    import gymnasium
    import micro

    from torchforce.environments import make_vector

    torch.set_num_threads(1)
    count, config = 16, "ppo_cartpole"

    def copies() -> Any:
        return make_vector(micro.SPEC, count, mode="sync", seed=0)

    spaces = copies()
    independent, recording = (micro.recording_agent(config, spaces.states, spaces.actions) for _ in range(2))
    logits = bare_logits(independent)

    @torch.inference_mode()
    def bare(states: np.ndarray) -> np.ndarray:
        values = logits(states)
        return (values - torch.rand_like(values).log_().neg_().log_()).argmax(dim=-1).numpy()

    @torch.inference_mode()
    def policy_pass(states: np.ndarray) -> np.ndarray:
        actions, *_ = independent.policy.act_forward({"state": torch.from_numpy(states)}, {}, False)
        return actions["action"].numpy()

    host = independent.policy.on_host()

    def host_pass(states: np.ndarray) -> np.ndarray:
        return host.act({"state": states}, False)["action"]

    def acting(act: Callable[[np.ndarray], np.ndarray] | None, observe: bool = False) -> Callable[[int], None]:
        """Steps of copies of their own, acted on by ``act`` (None: fixed actions), observed by ``recording``."""
        environments = copies()
        states = environments.reset()
        fixed = np.zeros(count, dtype=np.int64)

        def run(n: int) -> None:
            nonlocal states
            for _ in range(n // count):
                step = environments.execute(fixed if act is None else act(states))
                if observe:
                    truncated = (step.terminal == 2).any()
                    recording.observe(step.terminal, step.reward, step.final_states if truncated else None)
                states = step.states

        return run

    gymnasium_figure = "Gymnasium SyncVectorEnv, random actions"
    figures: dict[str, Callable[[int], None]] = {
        gymnasium_figure: micro._gymnasium_vector(functools.partial(gymnasium.make, micro.ENV_ID), "sync", count)[0],
        "VectorEnvironment, fixed actions": acting(None),
        "+ the MLP as bare torch calls": acting(bare),
        "+ the agent's Policy pass in torch": acting(policy_pass),
        "+ the agent's Policy pass in NumPy (on_host)": acting(host_pass),
        "+ act(independent=True)": acting(functools.partial(independent.act, independent=True)),
        "+ act and observe (recording)": acting(recording.act, observe=True),
        "the Runner (the benchmark's figure)": micro._runner(config, micro.SPEC, "sync", count)[0],
    }
    rates = micro._rates(figures, steps, rounds)
    floor = rates[gymnasium_figure]["steps_per_second"]
    print(f"CartPole-v1, {count} copies in one process, {config} (updates off); medians of {rounds} rounds:")
    for name, rate in rates.items():
        per_second = rate["steps_per_second"]
        print(f"{per_second:10,.0f} steps/s {per_second / floor:6.1%} {1e6 * count / per_second:7.1f} us a step {name}")


def profile_ppo_atari(timesteps: int, mixed_precision: bool = False) -> None:
    import tempfile
    from pathlib import Path

    import tasks
    from stable_baselines3 import PPO

    from torchforce.agents.ppo import PPOAgent

    torch.set_num_threads(1)
    spent: dict[str, list[float]] = {"torchforce": [], "sb3": []}
    PPOAgent._update = timing(PPOAgent._update, spent["torchforce"])
    PPO.train = timing(PPO.train, spent["sb3"])
    task = tasks.TASKS["breakout_ppo_bfloat16" if mixed_precision else "breakout_ppo"]
    spec = tasks.experiment(task)
    print(
        f"Breakout PPO, {timesteps:,} steps a library, one torch thread{PRECISION[mixed_precision]}; seconds per "
        "update of 1,024 steps:"
    )
    for library, train in (("torchforce", tasks.train_torchforce), ("sb3", tasks.train_sb3)):
        with tempfile.TemporaryDirectory() as folder:
            curve = tasks.Curve(Path(folder) / "curve.jsonl")
            result = train(task, spec, seed=0, steps=timesteps, device="cpu", curve=curve, games=Path(folder))
            curve.close()
        updates = spent[library]
        total, updating = result["train_seconds"], sum(updates)
        rest = (total - updating) * 1024 / result["steps"]  # collection, per 1,024 steps
        print(
            f"  {library:10s} {total:7.1f} s in all: {len(updates)} updates, {np.median(updates):.2f} s each "
            f"(median), {updating / total:.0%} of the run; the rest {rest:.2f} s per 1,024 steps"
        )
    print_floors(
        bare_ppo_update,
        lambda seconds: f"{np.median(seconds):.2f} s an update (median of {len(seconds)})",
        mixed_precision,
    )


def profile_dqn_atari(timesteps: int, mixed_precision: bool = False, fill: int = 2_000) -> None:
    import tempfile
    from pathlib import Path

    import sb3_tasks
    import tasks

    torch.set_num_threads(1)
    spent: dict[str, list[float]] = {"torchforce": [], "sb3": []}
    task = "breakout_dqn_bfloat16" if mixed_precision else "breakout_dqn"
    spent["torchforce"], _ = timed_updates(task, fill + timesteps, fill)  # updates from `fill` steps on
    entry = sb3_tasks.ZOO["dqn_atari"]
    entry = {**entry, "hyperparameters": {**entry["hyperparameters"], "learning_starts": fill}}
    game, options = tasks.atari_setup(tasks.experiment(tasks.TASKS["breakout_dqn"])["environment"])
    with tempfile.TemporaryDirectory() as folder:
        environments = sb3_tasks.atari_environments(entry, game, options, 0, Path(folder))
        model = sb3_tasks.build(entry, environments, seed=0, device="cpu")
        model.train = timing(model.train, spent["sb3"])
        try:
            model.learn(total_timesteps=fill + timesteps)
        finally:
            environments.close()
    print(
        f"Breakout DQN, one torch thread{PRECISION[mixed_precision]}: milliseconds an update of 32 rows (from "
        f"{fill:,} steps on):"
    )
    for library, seconds in spent.items():
        print(
            f"  {library:10s} {len(seconds):5d} updates: median {1e3 * np.median(seconds):.1f}, mean "
            f"{1e3 * np.mean(seconds):.1f}"
        )
    print_floors(
        bare_dqn_update,
        lambda seconds: f"median {1e3 * np.median(seconds):.1f} ({len(seconds)} updates)",
        mixed_precision,
    )


def profile_ddpg(timesteps: int, fill: int = 2_000) -> None:
    import sb3_tasks
    import tasks

    torch.set_num_threads(1)
    update_mode = tasks.experiment(tasks.TASKS["halfcheetah_ddpg"])["agent"]["update_mode"]
    options = {"update_mode": {**update_mode, "first_update": fill}, "random_timesteps": fill}
    spent = {
        f"torchforce {width}": timed_updates(task, fill + timesteps, fill, agent=options)[0]
        for task, width in (("halfcheetah_ddpg_400", "400x300"), ("halfcheetah_ddpg", "256x256"))
    }
    entry = sb3_tasks.ZOO["ddpg_halfcheetah"]
    entry = {**entry, "hyperparameters": {**entry["hyperparameters"], "learning_starts": fill}}
    environments = sb3_tasks.mujoco_environments(entry, "HalfCheetah-v5", 0)
    model = sb3_tasks.build(entry, environments, seed=0, device="cpu")
    spent["sb3 400x300"] = []
    model.train = timing(model.train, spent["sb3 400x300"])
    try:
        model.learn(total_timesteps=fill + timesteps)
    finally:
        environments.close()
    for widths in ((400, 300), (256, 256)):
        spent[f"bare torch {widths[0]}x{widths[1]}"] = bare_ddpg_update(widths)
    print(f"HalfCheetah DDPG, one torch thread: milliseconds an update of 256 rows (from {fill:,} steps on):")
    for name, seconds in spent.items():
        print(f"  {name:20s} {len(seconds):5d} updates: median {1e3 * np.median(seconds):.2f}")


def profile_compile(task: str, timesteps: int, warmup: int = 2_000) -> None:
    import tasks

    torch.set_num_threads(1)
    spec = tasks.experiment(tasks.TASKS[task])
    count, mode = spec["num_environments"], spec["vectorization"]
    plural = "s" if count != 1 else ""
    print(f"{task} ({count} environment{plural}, {mode}), {timesteps:,} steps each way, one torch thread:")
    for compiled in (False, True):
        seconds, total = timed_updates(task, timesteps, warmup, agent={"compile": compiled})
        later = seconds[1:] or seconds
        print(
            f"  compile {str(compiled).lower():5s}: {len(seconds)} updates, the first {seconds[0]:.2f} s, then "
            f"{1e3 * np.median(later):.1f} ms each (median); {total:.1f} s in all, {total - sum(seconds):.1f} s "
            "outside updates"
        )


def profile_casts() -> None:
    import devices

    from torchforce.core.networks.base import Layer

    torch.set_num_threads(1)
    reusing = Layer.weight_and_bias
    variants: dict[str, tuple[str | None, Callable[..., object]]] = {
        "float32": (None, reusing),
        "bfloat16, cast on every call": ("bfloat16", lambda layer: (layer.weight, layer.bias)),
        "bfloat16, casts reused (shipped)": ("bfloat16", reusing),
    }
    print("act(states, independent=True), one torch thread: microseconds a call (median)")
    for task, count in (("breakout_dqn", 1), ("breakout_ppo", 8)):
        for label, (precision, weights) in variants.items():
            Layer.weight_and_bias = weights  # type: ignore[method-assign]
            try:
                agent, vector = devices.build(task, "cpu", count, "sync", 10**9, agent={"mixed_precision": precision})
                states = vector.reset()
                vector.close()
                seconds = median_us(lambda agent=agent, states=states: agent.act(states, independent=True), calls=2_000)
            finally:
                Layer.weight_and_bias = reusing  # type: ignore[method-assign]
            print(f"  {task} ({count} row{'s' if count > 1 else ''}), {label:34s} {seconds:8.1f}")


def timed_updates(
    task: str, timesteps: int, warmup: int, agent: dict[str, object] | None = None
) -> tuple[list[float], float]:
    """Train ``task``'s agent on its experiment's environments for ``timesteps`` steps, one torch thread, as
    ``bench/devices.py`` builds it (a DQN agent updating from ``warmup`` steps on; ``agent``: options that replace
    the shipped agent's): the seconds of each update (``Agent._learn``) and of the whole run."""
    import devices
    import tasks

    from torchforce.execution import Runner

    spec = tasks.experiment(tasks.TASKS[task])
    built, vector = devices.build(task, "cpu", spec["num_environments"], spec["vectorization"], warmup, agent=agent)
    seconds: list[float] = []
    built._learn = timing(built._learn, seconds)
    runner = Runner(built, vector, torch_threads=1)
    begin = time.perf_counter()
    try:
        runner.run(num_timesteps=timesteps)
    finally:
        runner.close()
    return seconds, time.perf_counter() - begin


def timing(call: Callable[..., object], seconds: list[float]) -> Callable[..., object]:
    """``call`` wrapped to append the seconds each call takes to ``seconds``; set on a class, it wraps a method."""

    def wrapper(*args: object, **kwargs: object) -> object:
        begin = time.perf_counter()
        result = call(*args, **kwargs)
        seconds.append(time.perf_counter() - begin)
        return result

    return wrapper


def print_floors(
    update: Callable[[torch.memory_format], list[float]],
    line: Callable[[list[float]], str],
    mixed_precision: bool = False,
) -> None:
    """One line per layout of the frames in memory: ``line`` of the seconds a bare-torch ``update`` takes (under
    bfloat16 autocast with ``mixed_precision``)."""
    for layout, name in ((torch.contiguous_format, "channels-first"), (torch.channels_last, "channels-last")):
        precision = torch.autocast("cpu", dtype=torch.bfloat16) if mixed_precision else contextlib.nullcontext()
        with precision:
            seconds = update(layout)
        print(f"  bare torch, frames {name}: {line(seconds)}")


def nature_torso(layout: torch.memory_format) -> torch.nn.Module:
    """The Nature CNN (Mnih et al. 2015) up to its 512 features, as plain torch modules."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(4, 32, 8, 4),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 4, 2),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, 1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(3136, 512),
        torch.nn.ReLU(),
    ).to(memory_format=layout)


def bare_dqn_update(layout: torch.memory_format, updates: int = 300) -> list[float]:
    """Seconds of each of ``updates`` DQN updates (32 rows; Q and target networks; Huber loss, clipping at 10,
    fused Adam) as plain torch modules, after 20 that warm up."""
    generator = torch.Generator().manual_seed(0)
    online, target = (torch.nn.Sequential(nature_torso(layout), torch.nn.Linear(512, 4)) for _ in range(2))
    target.load_state_dict(online.state_dict())
    optimizer = torch.optim.Adam(online.parameters(), lr=1e-4, fused=True)
    frames = torch.randint(0, 256, (2, 4096, 84, 84, 4), dtype=torch.uint8, generator=generator)  # (rows, 84, 84, 4)

    def images(batch: torch.Tensor) -> torch.Tensor:
        batch = batch.permute(0, 3, 1, 2)  # channels-last in memory
        return (batch if layout is torch.channels_last else batch.contiguous()).float() / 255.0

    seconds = []
    for _ in range(updates + 20):
        begin = time.perf_counter()
        rows = torch.randint(0, 4096, (32,), generator=generator)
        states, next_states = images(frames[0, rows]), images(frames[1, rows])
        actions, rewards = torch.randint(0, 4, (32,), generator=generator), torch.randn(32, generator=generator)
        q = online(states).gather(1, actions[:, None]).squeeze(1)
        with torch.no_grad():
            targets = rewards + 0.99 * target(next_states).max(1).values
        loss = F.smooth_l1_loss(q, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(online.parameters(), 10.0)
        optimizer.step()
        seconds.append(time.perf_counter() - begin)
    return seconds[20:]


def bare_ppo_update(layout: torch.memory_format, repeats: int = 5) -> list[float]:
    """Seconds of one PPO update's arithmetic (16 minibatch steps of 256 frames) as plain torch modules."""
    generator = torch.Generator().manual_seed(0)
    torso = nature_torso(layout)
    policy, value = torch.nn.Linear(512, 4), torch.nn.Linear(512, 1)
    parameters = [*torso.parameters(), *policy.parameters(), *value.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=2.5e-4, eps=1e-5, fused=True)
    frames = torch.randint(0, 256, (1024, 4, 84, 84), dtype=torch.uint8, generator=generator)
    if layout is torch.channels_last:  # kept as torchforce's memory keeps them: index_select drops a memory format
        frames = frames.permute(0, 2, 3, 1).contiguous()
    actions = torch.randint(0, 4, (1024,), generator=generator)
    advantages, returns, old = torch.randn(1024), torch.randn(1024), torch.full((1024,), -1.386)
    seconds = []
    for _ in range(repeats + 1):  # the first warms up
        begin = time.perf_counter()
        for _ in range(4):
            order = torch.randperm(1024)
            for start in range(0, 1024, 256):
                rows = order[start : start + 256]
                batch = frames.index_select(0, rows)
                if layout is torch.channels_last:
                    batch = batch.permute(0, 3, 1, 2)  # (rows, 4, 84, 84), channels-last in memory
                embedding = torso(batch.float() / 255.0)
                log_probs = F.log_softmax(policy(embedding), dim=-1)
                ratio = torch.exp(log_probs.gather(1, actions[rows, None]).squeeze(1) - old[rows])
                surrogate = torch.min(ratio * advantages[rows], ratio.clamp(0.9, 1.1) * advantages[rows])
                entropy = -(log_probs.exp() * log_probs).sum(-1)
                value_loss = F.mse_loss(value(embedding).squeeze(1), returns[rows])
                loss = -surrogate.mean() - 0.01 * entropy.mean() + 0.5 * value_loss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, 0.5)
                optimizer.step()
        seconds.append(time.perf_counter() - begin)
    return seconds[1:]


def bare_ddpg_update(widths: tuple[int, int], updates: int = 500) -> list[float]:
    """Seconds of each of ``updates`` DDPG updates on HalfCheetah's shapes (256 rows, 17 state and 6 action
    dimensions; actor and critic of two ReLU layers of ``widths``) as plain torch modules, after 20 that warm up:
    the critic's step on half the squared TD error, the actor's on -Q(s, mu(s)) with gradients for the actor's
    parameters only, fused Adam for each, the targets moved 0.005 toward the networks."""
    generator = torch.Generator().manual_seed(0)

    def mlp(inputs: int, outputs: int) -> torch.nn.Sequential:
        return torch.nn.Sequential(
            torch.nn.Linear(inputs, widths[0]),
            torch.nn.ReLU(),
            torch.nn.Linear(widths[0], widths[1]),
            torch.nn.ReLU(),
            torch.nn.Linear(widths[1], outputs),
        )

    actor, critic = mlp(17, 6), mlp(23, 1)
    target_actor, target_critic = (copy.deepcopy(network).requires_grad_(False) for network in (actor, critic))
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3, fused=True)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3, fused=True)
    policy: list[torch.Tensor] = list(actor.parameters())
    networks: list[torch.Tensor] = [*policy, *critic.parameters()]
    targets: list[torch.Tensor] = [*target_actor.parameters(), *target_critic.parameters()]
    states, next_states = torch.randn(2, 4096, 17, generator=generator)
    actions, rewards = torch.rand(4096, 6, generator=generator) * 2 - 1, torch.randn(4096, generator=generator)
    seconds = []
    for _ in range(updates + 20):
        begin = time.perf_counter()
        rows = torch.randint(0, 4096, (256,), generator=generator)
        with torch.no_grad():
            next_actions = torch.tanh(target_actor(next_states[rows]))
            y = rewards[rows] + 0.99 * target_critic(torch.cat([next_states[rows], next_actions], 1)).squeeze(1)
        q = critic(torch.cat([states[rows], actions[rows]], 1)).squeeze(1)
        critic_optimizer.zero_grad(set_to_none=True)
        (0.5 * (y - q).square().mean()).backward()
        critic_optimizer.step()
        mu = torch.tanh(actor(states[rows]))
        actor_loss = -critic(torch.cat([states[rows], mu], 1)).mean()
        for parameter, gradient in zip(policy, torch.autograd.grad(actor_loss, policy), strict=True):
            parameter.grad = gradient
        actor_optimizer.step()
        with torch.no_grad():
            torch._foreach_lerp_(targets, networks, 0.005)
        seconds.append(time.perf_counter() - begin)
    return seconds[20:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "what",
        choices=("act", "step", "dqn", "collect", "floors", "ppo-atari", "dqn-atari", "ddpg", "compile", "casts"),
    )
    parser.add_argument("--timesteps", type=int, default=20_000, help="environment steps to profile (all but act)")
    parser.add_argument("--rounds", type=int, default=5, help="floors: rounds of 20,000 steps per figure")
    parser.add_argument("--environment", default="CartPole-v1", help="collect: CartPole-v1 or one of micro.HEAVY")
    parser.add_argument(
        "--task",
        default="halfcheetah_ppo",
        help="step: a single-environment MuJoCo task of tasks.py; compile: any task of tasks.py",
    )
    parser.add_argument(
        "--mixed-precision", action="store_true", help="ppo-atari, dqn-atari: torchforce's networks in bfloat16"
    )
    arguments = parser.parse_args()
    if arguments.what == "act":
        profile_act()
    elif arguments.what == "step":
        profile_step(arguments.task)
    elif arguments.what == "collect":
        profile_collect(arguments.environment, arguments.timesteps)
    elif arguments.what == "floors":
        profile_floors(arguments.rounds)
    elif arguments.what == "ppo-atari":
        profile_ppo_atari(arguments.timesteps, arguments.mixed_precision)
    elif arguments.what == "compile":
        profile_compile(arguments.task, arguments.timesteps)
    elif arguments.what == "ddpg":
        profile_ddpg(arguments.timesteps)
    elif arguments.what == "casts":
        profile_casts()
    elif arguments.what == "dqn-atari":
        profile_dqn_atari(arguments.timesteps, arguments.mixed_precision)
    else:
        profile_dqn(arguments.timesteps)


if __name__ == "__main__":
    main()
