"""Deep Deterministic Policy Gradient (Lillicrap et al. 2016, "Continuous control with deep reinforcement learning").

An actor mu(s) (``network`` with a deterministic head per float action) and a critic Q(s, a) (``critic_network``),
each with a target copy that follows it slowly (``target_update_weight`` every ``target_sync_frequency`` steps).
From a replay batch, the critic regresses onto
    y = r + gamma * (1 - done) * Q'(s', mu'(s'))
(``critic_optimizer``), then the actor ascends the critic, minimizing -Q(s, mu(s)) (``optimizer``). Exploration
is the ``actions_exploration`` noise (Ornstein-Uhlenbeck or Gaussian). The 2018 quirks are fixed: the critic is an
ordinary unbounded Q network built from a layer list, for any states and float actions (see ``core.critics``), and
time-limit truncations (terminal 2) bootstrap.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from torchforce.agents.agent import Agent, LearningAgent
from torchforce.agents.config import DDPGConfig, NAFConfig
from torchforce.agents.q_learning import target_synchronization
from torchforce.agents.transitions import Transitions, group
from torchforce.core.critics import Critic
from torchforce.core.optimizers import build_optimizer
from torchforce.spec import SpecError, expect_dict


class DDPGAgent(LearningAgent):
    """Deep Deterministic Policy Gradient (Lillicrap et al. 2016, "Continuous control with deep reinforcement
    learning"): for float actions, a deterministic actor mu(s) that ascends a critic Q(s, a), the critic regressed
    onto TD targets of target copies of both, which follow slowly, on transitions sampled from a replay memory;
    exploration is the ``actions_exploration`` noise.

    Options: see ``DDPGConfig``.
    """

    name = "ddpg"

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: DDPGConfig | None = None, **options: Any
    ) -> None:
        config = DDPGConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        setup_deterministic_policy(self, network=network, config=config, default_batch_size=10)
        self.discount = config.discount
        self.optimizer = build_optimizer(config.optimizer or {"type": "adam", "learning_rate": 1e-3},
                                         list(self.policy.parameters()), path="optimizer",
                                         without_kl="the ddpg agent")  # fmt: skip
        critic_network = network if config.critic_network is None else config.critic_network
        self.critic = Critic(critic_network, self.processed_states, self.actions_spec,
                             path="critic_network").to(self.device)  # fmt: skip
        self.critic_optimizer = build_optimizer(config.critic_optimizer or {"type": "adam", "learning_rate": 1e-3},
                                                list(self.critic.parameters()), path="critic_optimizer",
                                                without_kl="the ddpg critic")  # fmt: skip
        self.target = copy.deepcopy(self.policy).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.target_sync = target_synchronization(
            [*self.policy.parameters(), *self.critic.parameters()],
            [*self.target.parameters(), *self.target_critic.parameters()],
            config.target_sync_frequency,
            config.target_update_weight,
        )
        self._record_spec(network=network)
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return {
            "policy": self.policy,
            "critic": self.critic,
            "target": self.target,
            "target_critic": self.target_critic,
        }

    def optimizers(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer, "critic_optimizer": self.critic_optimizer, "target_sync": self.target_sync}

    def _update(self, batch: Transitions) -> dict[str, float]:
        data = batch.flat()
        critic = self.critic_optimizer.step(self._critic_loss, data)
        actor = self.optimizer.step(self._actor_loss, data)
        self.target_sync.sync(self.timestep)
        return {"critic_loss": float(critic.get("loss", 0.0)), "actor_loss": float(actor.get("loss", 0.0))}

    def _critic_loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        states, internals, actions = group(data, "states"), group(data, "internals"), group(data, "actions")
        next_states = group(data, "next_states")
        # TD target y = r + gamma [terminal != 1] Q'(s', mu'(s'))
        with torch.no_grad():
            next_params, _, _ = self.target(next_states, internals)
            next_value = self.target_critic(next_states, self.target.sample(next_params, deterministic=True))
            y = data["reward"] + self.discount * (data["terminal"] != 1).float() * next_value
        q = self.critic(states, actions)
        return 0.5 * (q - y).pow(2).mean() + self.critic.regularization_loss()

    def _actor_loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        # the deterministic policy gradient: ascend Q(s, mu(s))
        states, internals = group(data, "states"), group(data, "internals")
        params, _, _ = self.policy(states, internals)
        mu = self.policy.sample(params, deterministic=True)
        return -self.critic(states, mu).mean() + self.policy.regularization_loss()


def setup_deterministic_policy(
    agent: Agent, *, network: Any, config: DDPGConfig | NAFConfig, default_batch_size: int
) -> None:
    """What the deterministic-policy agents (DDPG, NAF) share: float actions only, a ``deterministic`` head for
    each unless ``config.distributions`` says otherwise, a replay memory of 1000 batches and timestep updates."""
    for name, action in agent.actions_spec.items():
        if action.type != "float":
            raise SpecError(f"actions.{name}.type", f"{agent.name.upper()} acts with a deterministic policy over "
                            "float actions", got=action.type, expected='"float"',
                            hint="Use dqn for bool and int actions, or ppo.")  # fmt: skip
    heads = {name: "deterministic" for name in agent.actions_spec}
    distributions = {} if config.distributions is None else expect_dict(config.distributions, "distributions")
    update_mode = config.update_mode
    size = update_mode.get("batch_size", default_batch_size) if isinstance(update_mode, dict) else default_batch_size
    agent._setup_learning(
        network=network, config=dataclasses.replace(config, distributions={**heads, **distributions}),
        on_policy=False, default_update_mode={"unit": "timesteps", "batch_size": default_batch_size},
        default_memory={"type": "replay", "capacity": 1000 * size if isinstance(size, int) and size > 0 else 10_000},
    )  # fmt: skip
    if agent.update_mode.unit != "timesteps":
        raise SpecError("update_mode.unit", f"{agent.name.upper()} learns from single transitions sampled from its "
                        "replay memory", got=agent.update_mode.unit, expected='"timesteps"')  # fmt: skip
