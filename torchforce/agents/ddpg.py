"""Deep Deterministic Policy Gradient (Lillicrap et al. 2016, "Continuous control with deep reinforcement learning").

An actor mu(s | theta^mu) (``network`` with a deterministic head per float action) and a critic Q(s, a | theta^Q)
(``critic_network``), each with a target copy, mu' and Q', that follows it slowly: theta' <- tau theta +
(1 - tau) theta' with tau = ``target_update_weight``, every ``target_sync_frequency`` timesteps. From a batch of
transitions sampled from the replay memory (Algorithm 1):
    y = r + gamma * [terminal != 1] * Q'(s', mu'(s'))                  the critic's target
    L = 1/N sum (y - Q(s, a))^2                                         the critic's loss (halved; ``critic_optimizer``)
    grad J = 1/N sum grad_a Q(s, a)|a=mu(s) grad mu(s)                  the actor's step: minimize -Q(s, mu(s))
(``optimizer``). Exploration is the ``actions_exploration`` noise (Ornstein-Uhlenbeck or Gaussian). The 2018 quirks
are fixed: the critic is an ordinary unbounded Q network built from a layer list, for any states and float actions
(see ``core.critics``), and time-limit truncations (terminal 2) bootstrap.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import DDPGConfig
from torchforce.agents.td_errors import TDErrors, prioritize, weighted
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.value_specs import deterministic_heads, replay_capacity
from torchforce.core.critics import Critic
from torchforce.core.explorations import check_random_timesteps
from torchforce.core.losses import l2
from torchforce.core.networks.network import penalized
from torchforce.core.optimizers import Info, Synchronization, build_optimizer
from torchforce.core.td import td_targets
from torchforce.spec import SpecError


class DDPGAgent(LearningAgent):
    """Deep Deterministic Policy Gradient (Lillicrap et al. 2016, "Continuous control with deep reinforcement
    learning"): for float actions, a deterministic actor mu(s) that ascends a critic Q(s, a), the critic regressed
    onto TD targets of target copies of both, which follow slowly, on transitions sampled from a replay memory;
    exploration is the ``actions_exploration`` noise.

    Options: see ``DDPGConfig``.
    """

    name = "ddpg"
    losses = ("_critic_loss", "_actor_loss")

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: DDPGConfig | None = None, **options: Any
    ) -> None:
        config = DDPGConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        self.td_errors = TDErrors()
        for name, action in self.actions_spec.items():
            if action.type != "float":
                raise SpecError(
                    f"actions.{name}.type",
                    "DDPG acts with a deterministic policy over float actions",
                    got=action.type,
                    expected='"float"',
                    hint="Use dqn for bool and int actions, or ppo.",
                )
        heads = deterministic_heads(self.actions_spec, config.distributions)
        self._setup_learning(
            network=network,
            config=dataclasses.replace(config, distributions=heads),
            on_policy=False,
            default_update_mode={"unit": "timesteps", "batch_size": 10},
            default_memory={"type": "replay", "capacity": replay_capacity(config.update_mode, 10)},
            unit_reason="DDPG learns from single transitions sampled from its replay memory",
        )
        self.discount = config.discount
        self.random_timesteps = check_random_timesteps(config.random_timesteps, self.actions_spec)
        # the actor mu(s | theta^mu): the policy
        self.optimizer = build_optimizer(
            config.optimizer or {"type": "adam", "learning_rate": 1e-3},
            list(self.policy.parameters()),
            path="optimizer",
            without_kl="the ddpg agent",
        )
        # the critic Q(s, a | theta^Q)
        critic_network = network if config.critic_network is None else config.critic_network
        self.critic = Critic(critic_network, self.processed_states, self.actions_spec, path="critic_network").to(
            self.device
        )
        self.critic_optimizer = build_optimizer(
            config.critic_optimizer or {"type": "adam", "learning_rate": 1e-3},
            list(self.critic.parameters()),
            path="critic_optimizer",
            without_kl="the ddpg critic",
        )
        # the target networks mu' and Q': frozen copies that follow slowly
        self.target = copy.deepcopy(self.policy).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.target_sync = Synchronization(
            [*self.policy.parameters(), *self.critic.parameters()],
            [*self.target.parameters(), *self.target_critic.parameters()],
            sync_frequency=config.target_sync_frequency,
            update_weight=config.target_update_weight,
        )
        self._finish(network=network)
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

    # ------------------------------------------------------------------ the update

    def _update(self, batch: Transitions) -> Info:
        data = batch.flat()
        # the critic's |TD errors| on the whole batch before its step: prioritized replay's priorities
        critic, td_error = self.td_errors.step(self.critic_optimizer, self._critic_loss, data)
        prioritize(self, batch, td_error)
        actor = self.optimizer.step(self._actor_loss, data)
        # theta' <- tau theta + (1 - tau) theta' for mu' and Q'
        self.target_sync.sync(self.update_timestep)
        return {"critic_loss": critic.get("loss", 0.0), "actor_loss": actor.get("loss", 0.0)}

    def _critic_loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        states, actions = group(data, "states"), group(data, "actions")
        next_states, next_internals = group(data, "next_states"), group(data, "next_internals")
        # the critic's target: y = r + gamma [terminal != 1] Q'(s', mu'(s'))
        with torch.no_grad():
            next_params, _, _ = self.target(next_states, next_internals)
            next_value = self.target_critic(next_states, self.target.sample(next_params, deterministic=True))
            y = td_targets(data["reward"], data["terminal"], next_value, self.discount)
        # the critic's loss: half the mean squared error of Q(s, a) against y (importance-weighted for
        # prioritized replay)
        delta = y - self.critic(states, actions)
        self.td_errors.record(data, delta.detach().abs())
        return penalized(weighted(l2(delta), data).mean(), self.critic)

    def _actor_loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        # the deterministic policy gradient: ascend Q(s, mu(s)), the critic held fixed
        states, internals = group(data, "states"), group(data, "internals")
        params, _, _ = self.policy(states, internals)
        mu = self.policy.sample(params, deterministic=True)
        return penalized(-self.critic(states, mu).mean(), self.policy)
