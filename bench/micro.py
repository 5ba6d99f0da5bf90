"""Micro figures: ``act()`` latency (one state, a batch of 16), ``observe()`` cost, and environment steps per second
of collection with 1, 8 and 16 CartPole-v1 copies, for torchforce, Stable-Baselines3 and Gymnasium itself; then
collection where stepping the environment costs more than acting (``HEAVY``: MuJoCo HalfCheetah, Atari Pong).

Agents are built from torchforce's shipped tuned configs and from the zoo's SB3 models, with learning updates
switched off (an update schedule longer than the measurement, or an update that makes no gradient steps), so the
figures are acting and recording costs alone. Every figure is one JSON-able record (see ``run``); collection records
name their ``environment``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

ENV_ID = "CartPole-v1"
SPEC = {"type": "gym", "gym_id": ENV_ID}
ENVIRONMENT_COUNTS = (1, 8, 16)
NEVER = 10**9  # an update schedule no measurement reaches


Sampler = Callable[[int], dict[str, np.ndarray]]  # n -> {name: n call durations in microseconds}


def timed(call: Callable[[], Any], between: Callable[[], Any] | None = None) -> Callable[[int], np.ndarray]:
    """Durations of ``n`` calls of ``call`` in microseconds; ``between`` runs untimed after each call."""

    def sample(n: int) -> np.ndarray:
        samples = np.empty(n)
        clock = time.perf_counter_ns
        for i in range(n):
            begin = clock()
            call()
            samples[i] = clock() - begin
            if between is not None:
                between()
        return samples / 1_000.0

    return sample


def interleaved(samplers: dict[str, Sampler], calls: int, rounds: int = 5, warmup: int = 200) -> dict[str, dict]:
    """Median, p95 and mean per measured call, sampled in ``rounds`` alternating rounds of ``calls / rounds``
    calls per library, so a noisy phase of a shared machine falls on every library alike."""
    for sampler in samplers.values():
        sampler(warmup)
    collected: dict[str, list[np.ndarray]] = {}
    for _ in range(rounds):
        for sampler in samplers.values():
            for name, samples in sampler(calls // rounds).items():
                collected.setdefault(name, []).append(samples)
    stats = {}
    for name, parts in collected.items():
        samples = np.concatenate(parts)
        stats[name] = {
            "median_us": float(np.median(samples)),
            "p95_us": float(np.percentile(samples, 95)),
            "mean_us": float(samples.mean()),
            "calls": len(samples),
        }
    return stats


# ---------------------------------------------------------------------------------------------- agents


def torchforce_agent(algorithm: str, seed: int = 0) -> Any:
    """An agent from the shipped tuned CartPole config (``recording_agent``)."""
    from torchforce.environments import make

    environment = make(SPEC)
    agent = recording_agent(f"{algorithm}_cartpole", environment.states, environment.actions, seed)
    environment.close()
    return agent


def recording_agent(config: str, states: Any, actions: Any, seed: int = 0) -> Any:
    """An agent from the shipped config ``config`` that acts and records as in training, without learning: DQN's
    updates never come due (an unreachable first update); PPO keeps its schedule, so it stages steps and writes
    them to its memory every batch as in training, but its update makes no gradient steps."""
    from torchforce.agents import create_agent
    from torchforce.configs import shipped

    spec = json.loads(shipped("agents", config).read_text())
    if spec["type"] == "dqn":
        spec["update_mode"] = {**spec["update_mode"], "first_update": NEVER}
    agent = create_agent(spec, states=states, actions=actions, seed=seed)
    if spec["type"] == "ppo":
        agent._update = lambda batch: {}
    return agent


def sb3_model(algorithm: str, n_envs: int = 1, mode: str = "sync", n_steps: int = 32) -> Any:
    from sb3_runs import DQN_ZOO, dqn_model, ppo_model
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    vector = SubprocVecEnv if mode == "subprocess" else DummyVecEnv
    env = make_vec_env(ENV_ID, n_envs=n_envs, seed=0, vec_env_cls=vector)
    if algorithm == "dqn":
        return dqn_model(env, 0, DQN_ZOO["n_timesteps"])
    if n_steps == 32:
        return ppo_model(env, 0, 100_000)
    return PPO("MlpPolicy", env, n_steps=n_steps, batch_size=n_steps * n_envs, seed=0, device="cpu")


def states(count: int | None, seed: int = 0) -> np.ndarray:
    """CartPole states from random play: one state, or a batch [count, 4]."""
    env = gymnasium.make(ENV_ID)
    observation, _ = env.reset(seed=seed)
    rows = []
    for _ in range(count or 1):
        rows.append(observation)
        observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            observation, _ = env.reset()
    env.close()
    return np.stack(rows).astype(np.float32) if count else rows[0].astype(np.float32)


def act_latencies(calls: int) -> Iterator[dict]:
    """Deterministic inference on one state and on 16: torchforce ``act(independent=True)``, SB3 ``predict``."""
    for algorithm in ("ppo", "dqn"):
        agent = torchforce_agent(algorithm)
        model = sb3_model(algorithm)
        for batch in (1, 16):
            x = states(None if batch == 1 else batch)
            act = timed(functools.partial(agent.act, x, deterministic=True, independent=True))
            predict = timed(functools.partial(model.predict, x, deterministic=True))
            stats = interleaved(
                {
                    "torchforce": lambda n, act=act: {"torchforce": act(n)},
                    "sb3": lambda n, predict=predict: {"sb3": predict(n)},
                },
                calls,
            )
            for library in ("torchforce", "sb3"):
                yield {"figure": "act", "library": library, "agent": algorithm, "batch": batch, **stats[library]}
        model.get_env().close()


def recording_costs(calls: int) -> Iterator[dict]:
    """The training-time path for one environment: torchforce ``act`` (recording) and ``observe``; SB3's
    collection forward pass (``policy(obs)``, as in ``collect_rollouts``) and its buffer ``add``."""
    x = states(None)
    for algorithm in ("ppo", "dqn"):
        agent = torchforce_agent(algorithm)
        model = sb3_model(algorithm)
        forward, add = timed(_collection_forward(model, x[None])), timed(_buffer_add(model, x[None]))
        samplers = {
            "torchforce": _act_observe_sampler(agent, x),
            "sb3": lambda n, forward=forward, add=add: {"sb3/act_recording": forward(n), "sb3/observe": add(n)},
        }
        stats = interleaved(samplers, calls)
        for name, values in stats.items():
            library, figure = name.split("/")
            yield {"figure": figure, "library": library, "agent": algorithm, "batch": 1, **values}
        model.get_env().close()


def _act_observe_sampler(agent: Any, state: np.ndarray) -> Sampler:
    """Alternating ``act`` (recording) and ``observe`` calls, each timed; an episode ends every 100 steps."""
    clock = time.perf_counter_ns

    def sample(n: int) -> dict[str, np.ndarray]:
        acting, observing = np.empty(n), np.empty(n)
        for i in range(n):
            begin = clock()
            agent.act(state)
            middle = clock()
            agent.observe(terminal=int(agent.timestep % 100 == 0), reward=1.0)
            acting[i], observing[i] = middle - begin, clock() - middle
        return {"torchforce/act_recording": acting / 1_000.0, "torchforce/observe": observing / 1_000.0}

    return sample


def _collection_forward(model: Any, batch: np.ndarray) -> Callable[[], Any]:
    """What SB3's collection loop runs per step to act: PPO's ``policy(obs)`` (actions, values, log-probabilities),
    DQN's ``predict`` (epsilon-greedy)."""
    import torch
    from stable_baselines3.common.utils import obs_as_tensor

    if not hasattr(model, "rollout_buffer"):
        return functools.partial(model.predict, batch, deterministic=False)

    def forward() -> Any:
        with torch.no_grad():
            output = model.policy(obs_as_tensor(batch, model.device))
        return output[0].cpu().numpy()

    return forward


def _buffer_add(model: Any, batch: np.ndarray) -> Callable[[], None]:
    """One SB3 buffer ``add`` per call, as its collection loop does (the rollout buffer restarts when full)."""
    import torch

    action, reward, done = np.zeros((1, 1), dtype=np.int64), np.ones(1, dtype=np.float32), np.zeros(1)
    if hasattr(model, "rollout_buffer"):
        buffer = model.rollout_buffer
        value, log_prob = torch.zeros(1), torch.zeros(1)

        def add() -> None:
            if buffer.full:
                buffer.reset()
            buffer.add(batch, action, reward, done, value, log_prob)

        return add
    return lambda: model.replay_buffer.add(batch, batch, action, reward, done, [{}])


# ---------------------------------------------------------------------------------------------- collection


Stepper = tuple[Callable[[int], Any], Callable[[], Any]]  # (run n environment steps, close)


def collection_rates(steps: int, repeats: int) -> Iterator[dict]:
    """Environment steps per second on CartPole, the median of ``repeats`` timed runs of ``steps`` steps. For each
    number of environments and mode, the libraries take turns run by run, so a noisy phase falls on every library
    alike."""
    loop, close = _gymnasium_loop()
    yield {
        "figure": "collection",
        "environment": ENV_ID,
        "library": "gymnasium",
        "what": "random actions",
        "mode": "loop",
        "envs": 1,
        **_rates({"loop": loop}, steps, repeats)["loop"],
    }
    close()
    factory = functools.partial(gymnasium.make, ENV_ID)
    for mode in ("sync", "subprocess"):
        for count in ENVIRONMENT_COUNTS:
            steppers = {
                ("gymnasium", "random actions"): _gymnasium_vector(factory, mode, count),
                ("torchforce", "runner + ppo"): _runner("ppo_cartpole", SPEC, mode, count),
                ("sb3", "collect_rollouts (ppo)"): _sb3_collection(mode, count, steps),
            }
            if mode == "sync":
                steppers["torchforce", "runner + random"] = _runner("random", SPEC, mode, count)
            yield from _collection_records(ENV_ID, mode, count, steppers, steps, repeats)


@dataclass(frozen=True)
class Heavy:
    """Collection on an environment whose own step costs more than acting on it: ``name`` (the records'
    ``environment``), the package it needs, Gymnasium's factory of one copy and torchforce's spec of the same
    environment, the shipped PPO config that acts on it, the number of copies, and the steps of a timed run (full,
    quick)."""

    name: str
    package: str
    factory: Callable[[], gymnasium.Env]
    spec: dict[str, Any]
    config: str
    envs: int
    steps: tuple[int, int]


def _atari(game: str) -> gymnasium.Env:
    from torchforce.environments.atari import atari_env

    return atari_env(game)


HEAVY = (
    Heavy(
        "HalfCheetah-v5",
        "mujoco",
        functools.partial(gymnasium.make, "HalfCheetah-v5"),
        {"type": "gym", "gym_id": "HalfCheetah-v5"},
        "ppo_halfcheetah",
        16,
        (20_000, 4_000),
    ),
    # the standard Atari preprocessing (torchforce.environments.atari) on both sides; 8 copies, as the zoo's PPO
    Heavy(
        "Pong",
        "ale_py",
        functools.partial(_atari, "Pong"),
        {"type": "atari", "game": "Pong"},
        "ppo_atari",
        8,
        (8_000, 800),
    ),
)


def heavy_collection_rates(quick: bool, repeats: int) -> Iterator[dict]:
    """Environment steps per second on the ``HEAVY`` environments, in one process and in worker processes:
    Gymnasium's vector environments stepping random actions, and the torchforce Runner with the random agent and
    with the PPO agent acting and recording. An environment whose package is not installed is left out."""
    for heavy in HEAVY:
        if importlib.util.find_spec(heavy.package) is None:
            print(f"  collection on {heavy.name} left out: {heavy.package} is not installed", flush=True)
            continue
        steps = heavy.steps[quick]
        for mode in ("sync", "subprocess"):
            steppers = {
                ("gymnasium", "random actions"): _gymnasium_vector(heavy.factory, mode, heavy.envs),
                ("torchforce", "runner + random"): _runner("random", heavy.spec, mode, heavy.envs),
                # past the first batch: its memory pages are touched, as they are in a longer run
                ("torchforce", "runner + ppo"): _runner(heavy.config, heavy.spec, mode, heavy.envs, warmup=2_048),
            }
            yield from _collection_records(heavy.name, mode, heavy.envs, steppers, steps, repeats)


def _collection_records(
    environment: str, mode: str, count: int, steppers: dict[tuple[str, str], Stepper], steps: int, repeats: int
) -> Iterator[dict]:
    rates = _rates({key: run for key, (run, _) in steppers.items()}, steps, repeats)
    for (library, what), (_, close) in steppers.items():
        close()
        yield {
            "figure": "collection",
            "environment": environment,
            "library": library,
            "what": what,
            "mode": mode,
            "envs": count,
            **rates[library, what],
        }


def _rates(runs: dict[Any, Callable[[int], Any]], steps: int, repeats: int) -> dict[Any, dict]:
    measured: dict[Any, list[float]] = {key: [] for key in runs}
    for _ in range(repeats):
        for key, run in runs.items():
            begin = time.perf_counter()
            run(steps)
            measured[key].append(steps / (time.perf_counter() - begin))
    return {
        key: {"steps_per_second": float(np.median(values)), "steps": steps, "repeats": repeats}
        for key, values in measured.items()
    }


def _gymnasium_loop() -> Stepper:
    """One Gymnasium environment stepping random actions in a bare loop."""
    env = gymnasium.make(ENV_ID)
    env.reset(seed=0)
    env.action_space.seed(0)

    def loop(n: int) -> None:
        for _ in range(n):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()

    return loop, env.close


def _gymnasium_vector(factory: Callable[[], gymnasium.Env], mode: str, count: int) -> Stepper:
    """Gymnasium's SyncVectorEnv (sync) or AsyncVectorEnv (subprocess) of ``count`` copies from ``factory``
    stepping random actions."""
    vector = gymnasium.vector.SyncVectorEnv if mode == "sync" else gymnasium.vector.AsyncVectorEnv
    envs = vector([factory] * count)
    envs.reset(seed=0)
    envs.action_space.seed(0)

    def step(n: int) -> None:
        for _ in range(n // count):
            envs.step(envs.action_space.sample())

    return step, envs.close


def _runner(config: str, spec: dict[str, Any], mode: str, count: int, warmup: int | None = None) -> Stepper:
    """The torchforce Runner on ``count`` copies of ``spec`` with the agent of a shipped ``config`` acting and
    recording (``recording_agent``), or with the random agent (``config`` "random"), after ``warmup`` steps (64 per
    copy by default)."""
    from torchforce.agents import create_agent
    from torchforce.environments import make_vector
    from torchforce.execution.runner import Runner

    environments = make_vector(spec, count, mode=mode, seed=0)
    states, actions = environments.states, environments.actions
    if config == "random":
        agent = create_agent("random", states=states, actions=actions, seed=0)
    else:
        agent = recording_agent(config, states, actions)
    runner = Runner(agent, environments)
    runner.run(num_timesteps=64 * count if warmup is None else warmup)
    return (lambda n: runner.run(num_timesteps=n)), environments.close


def _sb3_collection(mode: str, count: int, steps: int) -> Stepper:
    """SB3 PPO's ``collect_rollouts`` (policy forward, env step, rollout buffer) on DummyVecEnv/SubprocVecEnv."""
    model = sb3_model("ppo", count, mode, n_steps=max(1, steps // count))
    _, callback = model._setup_learn(10**9, None)
    callback.on_training_start(locals(), globals())
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=64)  # warm up

    def collect(n: int) -> None:
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=n // count)

    return collect, model.env.close


def run(*, quick: bool) -> Iterator[dict]:
    """Every micro figure, one record at a time."""
    import torch

    torch.set_num_threads(1)
    # SB3 advises a batch size dividing n_steps * n_envs; the latency models never train, so the advice is moot
    warnings.filterwarnings("ignore", message="You have specified a mini-batch size")
    calls, steps, repeats = (1_000, 4_000, 1) if quick else (5_000, 20_000, 3)
    yield from act_latencies(calls)
    yield from recording_costs(calls)
    yield from collection_rates(steps, repeats)
    yield from heavy_collection_rates(quick, repeats)
