"""Where the time goes: the profiles behind the benchmark report's notes on missed targets.

    python bench/profiles.py act     # act() on one CartPole state, stage by stage, against bare PyTorch
    python bench/profiles.py dqn     # cProfile of DQN training on CartPole (the shipped config), top functions

``act`` times, call by call (median of many calls, one torch thread): the same MLP as plain torch functional calls
on the agent's own weights (the floor for eager PyTorch), the policy's forward and sampling (``Policy.act``), and the
whole ``agent.act(state, deterministic=True, independent=True)``; then SB3's ``predict`` on the same state when
stable-baselines3 is installed, and a cProfile of ``act`` (top functions by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

CALLS = 20_000


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


def floor_call(agent, state: np.ndarray) -> Callable[[], object]:
    """The agent's MLP and categorical head as bare torch functional calls: what eager PyTorch costs at least."""
    layers = [agent.policy.network.get_submodule(name) for name in agent.policy.network.layer_names]
    head = next(iter(agent.policy.heads.values())).logits
    weights = [(layer.weight, layer.bias, layer.act) for layer in layers] + [(head.weight, head.bias, None)]

    def call() -> np.ndarray:
        with torch.inference_mode():
            x = torch.from_numpy(state[None])
            for weight, bias, activation in weights:
                x = F.linear(x, weight, bias)
                if activation is not None:
                    x = activation(x)
            return x.argmax(-1).numpy()

    return call


def profile_act() -> None:
    torch.set_num_threads(1)
    agent, state = cartpole_agent("ppo")
    tensors = {"state": torch.from_numpy(state[None])}

    def policy_act() -> object:
        with torch.inference_mode():
            return agent.policy.act(tensors, {}, True)

    stages = {
        "bare torch: the same MLP + argmax, functional calls": floor_call(agent, state),
        "Policy.act: network forward + head + argmax": policy_act,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("act", "dqn"))
    parser.add_argument("--timesteps", type=int, default=20_000, help="dqn: training steps to profile")
    arguments = parser.parse_args()
    if arguments.what == "act":
        profile_act()
    else:
        profile_dqn(arguments.timesteps)


if __name__ == "__main__":
    main()
