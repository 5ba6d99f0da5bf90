"""Stable-Baselines3 on the MuJoCo and Atari tasks of ``bench/tasks.py``, with the rl-baselines3-zoo's
hyperparameters, and its episodes written to the same curve as torchforce's (``tasks.Curve``).

The hyperparameters are the zoo's entries as they stand in its repository (``source`` and ``key`` of each entry
below). Schedules (``lin_X``: falling linearly from X to 0) and ``exploration_fraction`` run over the budget of the
run, as the zoo's ``train.py -n BUDGET`` runs them. ``normalize: true`` is ``VecNormalize`` with the algorithm's
discount, as the zoo's ``ExperimentManager`` builds it; returns are recorded below it (SB3's ``Monitor``), so they
are the environment's own. Atari: both libraries step ``torchforce.environments.atari.atari_env`` with the options
of the torchforce experiment (it stacks 4 frames itself, the zoo's ``frame_stack: 4``), SB3 with rewards clipped as
the zoo's ``AtariWrapper`` clips them (``atari_env``'s other defaults are that wrapper's: 30 no-ops at most, 4
frames a step, 84x84, a lost life ends the episode, FIRE on reset); the games come from its monitor records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

# Each entry: what the zoo says, and where. ``policy_kwargs`` names its activation ("relu") instead of the class.
ZOO: dict[str, dict[str, Any]] = {
    "ppo_halfcheetah": {
        "algorithm": "ppo",
        "source": "DLR-RM/rl-baselines3-zoo hyperparams/ppo.yml (commit 208b6fd)",
        "key": "HalfCheetah-v4",
        "n_envs": 1,
        "n_timesteps": 1_000_000,
        "normalize": True,
        "policy": "MlpPolicy",
        "hyperparameters": {
            "batch_size": 64,
            "n_steps": 512,
            "gamma": 0.98,
            "learning_rate": 2.0633e-05,
            "ent_coef": 0.000401762,
            "clip_range": 0.1,
            "n_epochs": 20,
            "gae_lambda": 0.92,
            "max_grad_norm": 0.8,
            "vf_coef": 0.58096,
        },
        "policy_kwargs": {
            "log_std_init": -2,
            "ortho_init": False,
            "activation_fn": "relu",
            "net_arch": {"pi": [256, 256], "vf": [256, 256]},
        },
    },
    "ppo_hopper": {
        "algorithm": "ppo",
        "source": "DLR-RM/rl-baselines3-zoo hyperparams/ppo.yml (commit 208b6fd)",
        "key": "Hopper-v4",
        "n_envs": 1,
        "n_timesteps": 1_000_000,
        "normalize": True,
        "policy": "MlpPolicy",
        "hyperparameters": {
            "batch_size": 32,
            "n_steps": 512,
            "gamma": 0.999,
            "learning_rate": 9.80828e-05,
            "ent_coef": 0.00229519,
            "clip_range": 0.2,
            "n_epochs": 5,
            "gae_lambda": 0.99,
            "max_grad_norm": 0.7,
            "vf_coef": 0.835671,
        },
        "policy_kwargs": {
            "log_std_init": -2,
            "ortho_init": False,
            "activation_fn": "relu",
            "net_arch": {"pi": [256, 256], "vf": [256, 256]},
        },
    },
    # The zoo's ddpg.yml holds no MuJoCo HalfCheetah entry; its Python hyperparameter file has the HalfCheetah of
    # the seals package (the same robot with fixed observations). Everything it leaves out is SB3's DDPG default:
    # learning rate 1e-3, buffer 1e6, batch 256, tau 0.005, gamma 0.99, one gradient step per step, [400, 300].
    "ddpg_halfcheetah": {
        "algorithm": "ddpg",
        "source": "DLR-RM/rl-baselines3-zoo hyperparams/python/ddpg.py (commit ebe92e7)",
        "key": "seals/HalfCheetah-v0",
        "n_envs": 1,
        "n_timesteps": 1_000_000,
        "normalize": False,
        "policy": "MlpPolicy",
        "hyperparameters": {"learning_starts": 10_000},
        "noise": {"type": "normal", "std": 0.1},
    },
    "dqn_atari": {
        "algorithm": "dqn",
        "source": "DLR-RM/rl-baselines3-zoo hyperparams/dqn.yml (commit ce95481)",
        "key": "atari",
        "n_envs": 1,
        "n_timesteps": 10_000_000,
        "normalize": False,
        "policy": "CnnPolicy",
        "atari_env": {"clip_rewards": True, "frame_stack": 4},
        "hyperparameters": {
            "buffer_size": 10_000,
            "learning_rate": 1e-4,
            "batch_size": 32,
            "learning_starts": 100_000,
            "target_update_interval": 1000,
            "train_freq": 4,
            "gradient_steps": 1,
            "exploration_fraction": 0.1,
            "exploration_final_eps": 0.01,
            "optimize_memory_usage": True,
            # SB3 refuses optimize_memory_usage with the default timeout handling; the zoo turns it off likewise
            "replay_buffer_kwargs": {"handle_timeout_termination": False},
        },
    },
    "ppo_atari": {
        "algorithm": "ppo",
        "source": "DLR-RM/rl-baselines3-zoo hyperparams/ppo.yml (commit 208b6fd)",
        "key": "atari",
        "n_envs": 8,
        "n_timesteps": 10_000_000,
        "normalize": False,
        "policy": "CnnPolicy",
        "atari_env": {"clip_rewards": True, "frame_stack": 4},
        "hyperparameters": {
            "n_steps": 128,
            "n_epochs": 4,
            "batch_size": 256,
            "learning_rate": "lin_2.5e-4",
            "clip_range": "lin_0.1",
            "vf_coef": 0.5,
            "ent_coef": 0.01,
        },
    },
}


def linear(initial: float):
    """The zoo's ``lin_<initial>``: SB3 calls it with the fraction of the run left (1 -> 0)."""
    return lambda progress_remaining: progress_remaining * initial


def hyperparameters(entry: dict[str, Any], action_size: int) -> dict[str, Any]:
    """The keyword arguments of the SB3 algorithm for a zoo ``entry``: schedules as functions, the policy's
    activation as its class, the action noise built for ``action_size`` actions."""
    import torch

    arguments: dict[str, Any] = {}
    for name, value in entry["hyperparameters"].items():
        arguments[name] = linear(float(value[4:])) if isinstance(value, str) and value.startswith("lin_") else value
    if "policy_kwargs" in entry:
        policy = dict(entry["policy_kwargs"])
        policy["activation_fn"] = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[policy["activation_fn"]]
        arguments["policy_kwargs"] = policy
    if "noise" in entry:
        from stable_baselines3.common.noise import NormalActionNoise

        std = entry["noise"]["std"]
        arguments["action_noise"] = NormalActionNoise(np.zeros(action_size), std * np.ones(action_size))
    return arguments


def mujoco_environments(entry: dict[str, Any], gym_id: str, seed: int) -> Any:
    """``n_envs`` copies of ``gym_id`` (seeded ``seed + i``) under SB3's ``Monitor``, with ``VecNormalize``
    (discounting as the algorithm) where the zoo says ``normalize``."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    environments = make_vec_env(gym_id, n_envs=entry["n_envs"], seed=seed)
    if entry["normalize"]:
        environments = VecNormalize(environments, gamma=entry["hyperparameters"].get("gamma", 0.99))
    return environments


def atari_environments(entry: dict[str, Any], game: str, options: dict[str, Any], seed: int, games: Path) -> Any:
    """``n_envs`` copies of ``atari_env(game, **options)`` with the zoo's settings over ``options``, seeded
    ``seed + i``, each writing its games to ``games/<i>/``."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from torchforce.environments.atari import atari_env

    options = {**options, **entry["atari_env"]}

    def one(index: int):
        return lambda: atari_env(game, **options, monitor=str(games / str(index)))

    environments = DummyVecEnv([one(index) for index in range(entry["n_envs"])])
    environments.seed(seed)
    return environments


def without_log_folder(model: Any) -> Any:
    """``model`` with a logger that writes nowhere. SB3's default one, even at ``verbose=0``, makes a folder
    ``SB3-<date>`` in the temp directory on every ``learn`` and leaves it there."""
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def build(entry: dict[str, Any], environments: Any, *, seed: int, device: str) -> Any:
    from stable_baselines3 import DDPG, DQN, PPO

    algorithm = {"ppo": PPO, "ddpg": DDPG, "dqn": DQN}[entry["algorithm"]]
    action_size = int(np.prod(environments.action_space.shape or (1,)))
    model = algorithm(
        entry["policy"],
        environments,
        seed=seed,
        device=device,
        verbose=0,
        **hyperparameters(entry, action_size),
    )
    return without_log_folder(model)


def train(
    name: str, environments: Any, *, seed: int, steps: int, device: str, on_step: Any, on_start: Any
) -> dict[str, Any]:
    """Train the zoo entry ``name`` on ``environments`` for ``steps`` environment steps (all copies together).
    ``on_start()`` when training starts (after SB3's setup), ``on_step(num_timesteps, dones, infos)`` after every
    vectorized step. Returns the steps done and the settings used."""
    from stable_baselines3.common.callbacks import BaseCallback

    entry = ZOO[name]

    class Hooks(BaseCallback):
        def _on_training_start(self) -> None:
            on_start()

        def _on_step(self) -> bool:
            on_step(self.num_timesteps, self.locals["dones"], self.locals["infos"])
            return True

    model = build(entry, environments, seed=seed, device=device)
    try:
        model.learn(total_timesteps=steps, callback=Hooks())
    finally:
        environments.close()
    return {
        "steps": int(model.num_timesteps),
        "environments": entry["n_envs"],
        "settings": f"{entry['source']}, key {entry['key']} ({entry['n_envs']} environment"
        f"{'s' if entry['n_envs'] != 1 else ''})",
    }
