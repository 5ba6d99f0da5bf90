"""Stable-Baselines3 on CartPole-v1 with the rl-baselines3-zoo tuned hyperparameters, trained under the same
protocol as ``torchforce.execution.training.train``: every ``eval_every`` steps (checked when an episode ends) the
deterministic policy plays ``eval_episodes`` episodes on a separate environment; evaluation time is measured apart
from training time, and training stops once the evaluation mean reaches the threshold.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, TextIO

import gymnasium
import numpy as np
from sb3_tasks import without_log_folder
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

ENV_ID = "CartPole-v1"

# rl-baselines3-zoo, hyperparams/ppo.yml, "CartPole-v1" (tuned): n_envs 8, n_timesteps 1e5, MlpPolicy.
# ``lin_X`` is a schedule falling linearly from X to 0 over ``total_timesteps`` (the zoo's ``linear_schedule``).
PPO_ZOO = {
    "n_envs": 8,
    "n_timesteps": 100_000,
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": "lin_0.001",
    "clip_range": "lin_0.2",
}

# rl-baselines3-zoo, hyperparams/dqn.yml, "CartPole-v1" (almost tuned): n_envs 1, n_timesteps 5e4, MlpPolicy.
DQN_ZOO = {
    "n_envs": 1,
    "n_timesteps": 50_000,
    "learning_rate": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_fraction": 0.16,
    "exploration_final_eps": 0.04,
    "policy_kwargs": {"net_arch": [256, 256]},
}


def linear(initial: float):
    """The zoo's ``lin_<initial>``: SB3 calls it with the fraction of training left (1 -> 0)."""
    return lambda progress_remaining: progress_remaining * initial


def ppo_model(env: Any, seed: int, total_timesteps: int) -> PPO:
    """PPO with the zoo's hyperparameters. The linear schedules run over ``total_timesteps``; with the zoo's
    budget (1e5) they are exactly the zoo's."""
    hp = PPO_ZOO
    scale = total_timesteps / hp["n_timesteps"]  # keep the zoo's decay per step under another budget

    def schedule(initial: float):
        return lambda remaining: initial * max(0.0, 1.0 - (1.0 - remaining) * scale)

    return PPO(
        "MlpPolicy",
        env,
        n_steps=hp["n_steps"],
        batch_size=hp["batch_size"],
        gae_lambda=hp["gae_lambda"],
        gamma=hp["gamma"],
        n_epochs=hp["n_epochs"],
        ent_coef=hp["ent_coef"],
        learning_rate=schedule(1e-3),
        clip_range=schedule(0.2),
        seed=seed,
        device="cpu",
        verbose=0,
    )


def dqn_model(env: Any, seed: int, total_timesteps: int) -> DQN:
    """DQN with the zoo's hyperparameters. epsilon anneals over the zoo's 16% of 5e4 = 8,000 steps whatever the
    budget (``exploration_fraction`` is a fraction of ``total_timesteps`` in SB3)."""
    hp = {key: value for key, value in DQN_ZOO.items() if key not in ("n_envs", "n_timesteps")}
    hp["exploration_fraction"] = DQN_ZOO["exploration_fraction"] * DQN_ZOO["n_timesteps"] / total_timesteps
    return DQN("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **hp)


def evaluate(model: Any, env: gymnasium.Env, episodes: int) -> list[float]:
    """Deterministic returns of ``episodes`` episodes (the same protocol as ``torchforce.execution.evaluate``)."""
    returns = []
    for _ in range(episodes):
        observation, _ = env.reset()
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(observation, deterministic=True)
            observation, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


class ThresholdEvaluation(BaseCallback):
    """Evaluates every ``eval_every`` steps at the end of an episode, logs episodes, stops at the threshold."""

    def __init__(
        self,
        eval_env: gymnasium.Env,
        *,
        threshold: float | None,
        eval_every: int,
        eval_episodes: int,
        episode_log: TextIO | None,
    ) -> None:
        super().__init__()
        self.eval_env, self.threshold = eval_env, threshold
        self.eval_every, self.eval_episodes, self.log = eval_every, eval_episodes, episode_log
        self.next = eval_every
        self.evaluations: list[dict[str, float]] = []
        self.evaluation_seconds = 0.0
        self.episodes = 0
        self.start = 0.0

    def train_seconds(self) -> float:
        return time.perf_counter() - self.start - self.evaluation_seconds

    def _on_training_start(self) -> None:
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        dones = self.locals["dones"]
        if not dones.any():
            return True
        for worker in np.flatnonzero(dones):
            self.episodes += 1
            episode = self.locals["infos"][worker].get("episode")
            if self.log is not None and episode is not None:
                self.log.write(
                    json.dumps(
                        {
                            "episode": self.episodes,
                            "timesteps": self.num_timesteps,
                            "worker": int(worker),
                            "return": float(episode["r"]),
                            "length": int(episode["l"]),
                            "wall_time": round(self.train_seconds(), 4),
                        }
                    )
                    + "\n"
                )
        if self.num_timesteps < self.next:
            return True
        self.next += self.eval_every
        begin = time.perf_counter()
        returns = evaluate(self.model, self.eval_env, self.eval_episodes)
        self.evaluation_seconds += time.perf_counter() - begin
        self.evaluations.append(
            {
                "timesteps": self.num_timesteps,
                "mean_return": float(np.mean(returns)),
                "train_seconds": self.train_seconds(),
            }
        )
        return self.threshold is None or self.evaluations[-1]["mean_return"] < self.threshold


def train_sb3(
    algorithm: str,
    *,
    seed: int,
    num_timesteps: int,
    threshold: float | None,
    eval_every: int,
    eval_episodes: int = 20,
    episode_log: str | Path | None = None,
) -> dict[str, Any]:
    """Train SB3 ``ppo`` or ``dqn``; returns the fields of torchforce's ``TrainingResult.to_dict()``."""
    n_envs = PPO_ZOO["n_envs"] if algorithm == "ppo" else DQN_ZOO["n_envs"]
    env = make_vec_env(ENV_ID, n_envs=n_envs, seed=seed)
    eval_env = gymnasium.make(ENV_ID)
    eval_env.reset(seed=seed + 100_000)
    model = without_log_folder((ppo_model if algorithm == "ppo" else dqn_model)(env, seed, num_timesteps))
    log = open(episode_log, "w") if episode_log else None  # noqa: SIM115
    callback = ThresholdEvaluation(
        eval_env, threshold=threshold, eval_every=eval_every, eval_episodes=eval_episodes, episode_log=log
    )
    try:
        model.learn(total_timesteps=num_timesteps, callback=callback)
    finally:
        if log is not None:
            log.close()
        env.close()
        eval_env.close()
    solved = next((e for e in callback.evaluations if threshold is not None and e["mean_return"] >= threshold), None)
    return {
        "timesteps": int(model.num_timesteps),
        "episodes": callback.episodes,
        "train_seconds": callback.train_seconds(),
        "evaluation_seconds": callback.evaluation_seconds,
        "threshold": threshold,
        "timesteps_to_threshold": None if solved is None else int(solved["timesteps"]),
        "seconds_to_threshold": None if solved is None else solved["train_seconds"],
        "evaluations": callback.evaluations,
        "solved": solved is not None,
    }
