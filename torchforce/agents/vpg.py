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

from torchforce.agents.config import VPGConfig
from torchforce.agents.policy_gradient import PolicyGradientAgent
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.core.networks.network import penalized
from torchforce.core.optimizers import Info, build_optimizer


class VPGAgent(PolicyGradientAgent):
    """Vanilla policy gradient (REINFORCE, Williams 1992, "Simple statistical gradient-following algorithms for
    connectionist reinforcement learning"): one gradient step per update on -log pi(a|s) * A, with A the discounted
    return, or its advantage over a learned state-value baseline (GAE, Schulman et al. 2016, with ``gae_lambda``).

    Options: see ``VPGConfig`` (``torchforce.agents.config``), one line of documentation each.
    """

    name = "vpg"
    losses = ("_loss", "_baseline_loss")

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: VPGConfig | None = None, **options: Any
    ) -> None:
        config = VPGConfig.resolve(config, options)
        # the policy, memory and schedule, the optional baseline V(s) and its optimizer (see PolicyGradientAgent)
        super().__init__(states, actions, network, config=config)
        # the policy's optimizer
        self.optimizer = build_optimizer(
            config.optimizer or {"type": "adam", "learning_rate": 1e-3},
            list(self.policy.parameters()),
            path="optimizer",
            without_kl="the vpg agent",
        )
        self._finish(network=network)
        self._load_on_start()

    def _update(self, batch: Transitions) -> Info:
        # ---- 1. Advantages A_t: returns, over the baseline V(s_t), or GAE (Schulman et al. 2016) ----
        data = self._with_advantages(batch)  # + advantages A_t, returns R_t, log pi_old(a_t|s_t)
        # ---- 2. One gradient step on L(theta) = -E_t[log pi(a_t|s_t) * A_t] (see _loss) ----
        info = self.optimizer.step(self._loss, data)
        # ---- 3. The baseline's regression on the returns ----
        if self.baseline_optimizer is not None:
            self.baseline_optimizer.step(self._baseline_loss, data)
        return {"policy_loss": info["loss"], **self._statistics(data)}

    def _loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        states, internals, actions = (group(data, key) for key in ("states", "internals", "actions"))
        params, _, _ = self.policy(states, internals)
        # the policy gradient (REINFORCE): -E_t[log pi(a_t|s_t) * A_t], plus the policy's weight penalties
        log_prob = self.policy.log_prob(params, actions)
        loss = penalized(-(log_prob * data["advantages"]).mean(), self.policy)
        # the entropy bonus: -c * H[pi(.|s_t)]
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss
