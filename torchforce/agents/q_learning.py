"""What the Q-learning agents (DQN, DQN n-step, DQfD) share: Q-values, greedy acting and a target network.

The online network Q(s, a; theta) is the policy: the raw outputs of each action's categorical head are its Q-values
(two, False and True, for a bool action; see ``value_specs``), so only bool and int actions work. The target network
Q(s, a; theta^-) is a frozen copy that follows theta every ``target_sync_frequency`` timesteps (a copy, or
``target_update_weight`` of the way), and one optimizer steps theta. Each agent's file holds what it learns: its
targets and its loss (DQN's one-step TD target in ``dqn.py``, the n-step returns in ``dqn_nstep.py``, J_DQ + lambda
J_E in ``dqfd.py``), its update, and its own options and checks.

Acting, faithful: the Q agents act greedily, ``argmax_a Q(s, a)``, whether ``act`` is deterministic or not, and only
``actions_exploration`` (epsilon-greedy) explores; ``deterministic=True`` turns that off. 2018's Q models did the
same (``QModel`` built its ``DistributionModel`` with ``requires_deterministic=True``, so the categorical head never
sampled for them; tensorforce issue #306), unlike 2018's policy-gradient models, which sample. So a Q agent without
``actions_exploration`` never explores, then as now.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import DQFDConfig, DQNConfig, DQNNstepConfig
from torchforce.agents.value_specs import check_discrete_actions, check_q_heads, q_value_heads, replay_capacity
from torchforce.core.optimizers import Synchronization, build_optimizer

QConfig = DQNConfig | DQNNstepConfig | DQFDConfig


class QLearningAgent(LearningAgent):
    """Base of the Q-learning agents (not an agent type itself): a policy whose categorical heads give Q(s, .;
    theta), its optimizer, and a target network Q(s, .; theta^-) with its ``target_sync``; the agent acts greedily in
    Q. Each subclass declares how it learns (the class attributes below) and holds its own targets, loss and update.
    """

    # how the agent learns: by default (DQN, DQfD) from batches of 32 single transitions, every 4 timesteps, sampled
    # from a replay memory of 1000 such batches (2018's defaults); the unit of default_update_mode is the only one
    # it learns with, for unit_reason (the SpecError's text); on_policy: its memory holds whole, contiguous episodes
    default_update_mode: ClassVar[Mapping[str, Any]] = {"unit": "timesteps", "batch_size": 32, "frequency": 4}
    default_memory: ClassVar[str] = "replay"
    on_policy: bool = False
    unit_reason: ClassVar[str]

    def __init__(self, states: Any, actions: Any, network: Any, *, config: QConfig, double_q_model: bool) -> None:
        """Build the policy (Q-value heads), memory and schedule, the optimizer and the target network, in this
        order (it fixes the initial weights). The subclass then sets its own options, records its spec and loads
        its checkpoint."""
        super().__init__(states, actions, config=config)
        check_discrete_actions(self.actions_spec)
        heads = q_value_heads(self.actions_spec, config.distributions)
        capacity = replay_capacity(config.update_mode, self.default_update_mode["batch_size"])
        self._setup_learning(
            network=network,
            config=dataclasses.replace(config, distributions=heads),
            on_policy=self.on_policy,
            default_update_mode=dict(self.default_update_mode),
            default_memory={"type": self.default_memory, "capacity": capacity},
            unit_reason=self.unit_reason,
        )
        check_q_heads(self.policy.heads, self.name)
        self.discount = config.discount
        self.double_q_model = double_q_model
        self.huber_loss = config.huber_loss or None  # 0: none
        self.entropy_regularization = config.entropy_regularization
        # the online network Q(s, a; theta) and its optimizer
        self.optimizer = build_optimizer(
            config.optimizer or {"type": "adam", "learning_rate": 1e-3},
            list(self.policy.parameters()),
            path="optimizer",
            without_kl=f"the {self.name} agent",
        )
        # the target network Q(s, a; theta^-): a frozen copy that follows theta
        self.target = copy.deepcopy(self.policy).requires_grad_(False)
        self.target_sync = Synchronization(
            self.policy.parameters(),
            self.target.parameters(),
            sync_frequency=config.target_sync_frequency,
            update_weight=config.target_update_weight,
        )

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy, "target": self.target}

    def optimizers(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer, "target_sync": self.target_sync}

    def _act_deterministically(self, deterministic: bool) -> bool:
        return True  # greedy in Q, as 2018's Q models (see the module docstring); epsilon explores
