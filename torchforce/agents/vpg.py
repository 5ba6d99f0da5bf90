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
from torch import nn

from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import VPGConfig
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.update_mode import default_latest_capacity
from torchforce.core.baselines import build_pg_baseline, regularization_loss, state_values
from torchforce.core.objectives import policy_statistics, value_loss
from torchforce.core.optimizers import Optimizer, build_optimizer
from torchforce.core.returns import advantage_tensors

Data = dict[str, torch.Tensor]


class VPGAgent(LearningAgent):
    """Vanilla policy gradient (REINFORCE, Williams 1992, "Simple statistical gradient-following algorithms for
    connectionist reinforcement learning"): one gradient step per update on -log pi(a|s) * A, with A the discounted
    return, or its advantage over a learned state-value baseline (GAE, Schulman et al. 2016, with ``gae_lambda``).

    Options: see ``VPGConfig`` (``torchforce.agents.config``), one line of documentation each.
    """

    name = "vpg"
    optimizer: Optimizer
    baseline_mode: str | None  # the optional state-value baseline: all three set, or all three None
    baseline: nn.Module | None
    baseline_optimizer: Optimizer | None

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: VPGConfig | None = None, **options: Any
    ) -> None:
        config = VPGConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        # on-policy: by default 10 whole episodes per update, from a latest memory
        memory = {"type": "latest", "capacity": default_latest_capacity(config.update_mode)}
        self._setup_learning(
            network=network,
            config=config,
            on_policy=True,
            default_memory=memory,
            default_update_mode={"unit": "episodes", "batch_size": 10},
        )
        self.discount = config.discount
        self.gae_lambda = config.gae_lambda
        self.normalize_advantages = config.normalize_advantages
        self.entropy_regularization = config.entropy_regularization
        # the optional state-value baseline V(s) and its optimizer; the policy's optimizer
        self.baseline_mode, self.baseline, self.baseline_optimizer = build_pg_baseline(
            config.baseline_mode,
            config.baseline,
            config.baseline_optimizer,
            config.gae_lambda,
            states=self.processed_states,
            embedding_size=self.policy.network.output_size,
            device=self.device,
        )
        self.optimizer = build_optimizer(
            config.optimizer or {"type": "adam", "learning_rate": 1e-3},
            list(self.policy.parameters()),
            path="optimizer",
            without_kl="the vpg agent",
        )
        self._record_spec(network=network)
        self._load_on_start()

    def _update(self, batch: Transitions) -> dict[str, float]:
        # ---- 1. Advantages A_t: returns, over the baseline V(s_t), or GAE (Schulman et al. 2016) ----
        data = self._with_advantages(batch)
        # ---- 2. One gradient step on L(theta) = -E_t[log pi(a_t|s_t) * A_t] (see _loss) ----
        info = self.optimizer.step(self._loss, data)
        # ---- 3. The baseline's regression on the returns ----
        if self.baseline_optimizer is not None:
            self.baseline_optimizer.step(self._baseline_loss, data)
        return {"policy_loss": info["loss"], **self._statistics(data)}

    def _with_advantages(self, batch: Transitions) -> Data:
        """The batch as a flat dict plus ``advantages`` A_t, ``returns`` (the baseline's targets) and
        ``old_log_prob``, log pi(a_t|s_t) of the policy that collected it."""
        data = batch.flat()
        with torch.no_grad():
            values = next_values = None
            if self.baseline is not None and self.baseline_mode is not None:  # V(s_t) and V(s_{t+1})
                values = state_values(self.baseline, self.baseline_mode, self.policy, batch.states, batch.internals)
                next_values = state_values(
                    self.baseline, self.baseline_mode, self.policy, batch.next_states, batch.internals
                )
            params, _, _ = self.policy(batch.states, batch.internals)
            old_log_prob = self.policy.log_prob(params, batch.actions)
        window = self.update_mode.length if self.update_mode.unit == "sequences" else None
        data["advantages"], data["returns"] = advantage_tensors(
            batch.reward,
            batch.terminal,
            values,
            next_values,
            discount=self.discount,
            gae_lambda=self.gae_lambda,
            normalize=self.normalize_advantages,
            window=window,
        )
        data["old_log_prob"] = old_log_prob
        return data

    def _loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        states, internals, actions = (group(data, key) for key in ("states", "internals", "actions"))
        params, _, _ = self.policy(states, internals)
        # the policy gradient (REINFORCE): -E_t[log pi(a_t|s_t) * A_t], plus the policy's weight penalties
        log_prob = self.policy.log_prob(params, actions)
        loss = -(log_prob * data["advantages"]).mean() + self.policy.regularization_loss()
        # the entropy bonus: -c * H[pi(.|s_t)]
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss

    def _baseline_loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        # 0.5 * E_t[(V(s_t) - R_t)^2], plus the baseline's weight penalties
        baseline, mode = self.baseline, self.baseline_mode
        assert baseline is not None and mode is not None  # called only for an agent with a baseline
        states, internals = group(data, "states"), group(data, "internals")
        values = state_values(baseline, mode, self.policy, states, internals)
        return value_loss(values, data["returns"]) + regularization_loss(baseline)

    def _statistics(self, data: Data) -> dict[str, float]:
        """Entropy and approximate KL of the updated policy on the batch, and the baseline's loss."""
        with torch.no_grad():
            states, internals, actions = (group(data, key) for key in ("states", "internals", "actions"))
            params, _, _ = self.policy(states, internals)
            info = policy_statistics(
                self.policy.log_prob(params, actions), data["old_log_prob"], self.policy.entropy(params)
            )
            if self.baseline is not None:
                info["baseline_loss"] = float(self._baseline_loss(data))
        return info

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy} | ({"baseline": self.baseline} if self.baseline is not None else {})

    def optimizers(self) -> dict[str, Any]:
        baseline = {"baseline_optimizer": self.baseline_optimizer} if self.baseline is not None else {}
        return {"optimizer": self.optimizer} | baseline
