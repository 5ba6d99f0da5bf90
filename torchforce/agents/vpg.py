"""Vanilla policy gradient (REINFORCE, Williams 1992), with an optional state-value baseline and GAE.

The policy-gradient loss, one value per batch:
    L(theta) = -E_t[ log pi(a_t|s_t) * A_t ]
with A_t the discounted return, the return minus a learned baseline V(s_t), or GAE (Schulman et al. 2016) when
``gae_lambda`` is set (``core.returns.advantages``). ``optimizer`` takes one step per update on the whole batch
(a ``multi_step`` optimizer takes several), then ``baseline_optimizer`` one on the baseline's squared error, as in
2018. log pi is the joint log-probability of all action elements (2018 averaged them instead).
"""

from __future__ import annotations

from typing import Any

import torch

from torchforce.agents import policy_gradient
from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import VPGConfig
from torchforce.agents.policy_gradient import (
    baseline_loss,
    regularized,
    split,
    statistics,
    with_advantages,
)
from torchforce.agents.transitions import Transitions
from torchforce.core.optimizers import build_optimizer


class VPGAgent(LearningAgent):
    """Vanilla policy gradient (REINFORCE, Williams 1992, "Simple statistical gradient-following algorithms for
    connectionist reinforcement learning"): one gradient step per update on -log pi(a|s) * A, with A the discounted
    return, or its advantage over a learned state-value baseline (GAE, Schulman et al. 2016, with ``gae_lambda``).

    Options: see ``VPGConfig`` (``torchforce.agents.config``), one line of documentation each.
    """

    name = "vpg"

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: VPGConfig | None = None, **options: Any
    ) -> None:
        config = VPGConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        policy_gradient.setup(self, network=network, config=config)
        self.optimizer = build_optimizer(config.optimizer or {"type": "adam", "learning_rate": 1e-3},
                                         list(self.policy.parameters()), path="optimizer",
                                         without_kl="the vpg agent")  # fmt: skip
        self._record_spec(network=network)
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return policy_gradient.modules(self)

    def optimizers(self) -> dict[str, Any]:
        return policy_gradient.optimizers(self, "optimizer")

    def _update(self, batch: Transitions) -> dict[str, float]:
        data = with_advantages(self, batch)
        info = self.optimizer.step(self._loss, data)
        if self.baseline is not None:
            self.baseline_optimizer.step(self._baseline_loss, data)
        return {"policy_loss": info["loss"], **statistics(self, data)}

    def _loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        states, internals, actions = split(data)
        params, _, _ = self.policy(states, internals)
        # the policy gradient: -log pi(a|s) * A
        log_prob = self.policy.log_prob(params, actions)
        return regularized(self, -(log_prob * data["advantages"]).mean(), params)

    def _baseline_loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        return baseline_loss(self, data)
