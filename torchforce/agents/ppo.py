"""Proximal Policy Optimization (Schulman et al. 2017, "Proximal Policy Optimization Algorithms").

The clipped surrogate objective, eq. (7) of the paper:
    L(theta) = E_t[ min(ratio_t * A_t, clip(ratio_t, 1 - eps, 1 + eps) * A_t) ]
where ratio_t = pi(a_t|s_t) / pi_old(a_t|s_t),
with advantages A_t from a state-value baseline (GAE, Schulman et al. 2016, when ``gae_lambda`` is set). The 2018
quirk of clipping to [1/(1+eps), 1+eps] is fixed: the range is [1-eps, 1+eps] as in the paper.

Optimization runs either the 2018 way (``optimization_steps`` steps, each on a random ``subsampling_fraction`` of the
batch drawn with replacement) or the modern way (``epochs`` passes over shuffled minibatches of ``minibatch_size``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import PPOConfig
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.update_mode import default_latest_capacity
from torchforce.core.baselines import build_pg_baseline, regularization_loss, state_values
from torchforce.core.memories.latest import Latest
from torchforce.core.objectives import clipped_surrogate, likelihood_ratio, policy_statistics, value_loss
from torchforce.core.optimizers import Optimizer, build_optimizer
from torchforce.core.returns import advantage_tensors
from torchforce.spec import SpecError
from torchforce.spec.checks import MAX_STEPS

Data = dict[str, torch.Tensor]


class PPOAgent(LearningAgent):
    """Proximal Policy Optimization (Schulman et al. 2017, "Proximal Policy Optimization Algorithms"): several
    optimizer steps per batch on the clipped surrogate E[min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)], which
    keeps the policy near the one that collected the batch; advantages from an optional state-value baseline (GAE
    with ``gae_lambda``), steps either on random subsamples (2018) or over shuffled minibatches for ``epochs``.

    Options: see ``PPOConfig`` (``torchforce.agents.config``), one line of documentation each.
    """

    name = "ppo"
    optimizer: Optimizer
    baseline_mode: str | None  # the optional state-value baseline: all three set, or all three None
    baseline: nn.Module | None
    baseline_optimizer: Optimizer | None

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: PPOConfig | None = None, **options: Any
    ) -> None:
        config = PPOConfig.resolve(config, options)
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
        self.clipping = config.likelihood_ratio_clipping  # epsilon
        self.subsampling_fraction = config.subsampling_fraction
        self.optimization_steps = config.optimization_steps
        self.epochs = config.epochs
        self.minibatch_size = config.minibatch_size
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
        if self.update_mode.unit == "timesteps" and not isinstance(self.memory, Latest):
            # a replay memory would hand out random, old timesteps: PPO needs the latest contiguous ones
            given = config.memory
            raise SpecError(
                "memory.type",
                "PPO updating on timesteps learns from the most recent ones",
                got=given.get("type") if isinstance(given, dict) else given,
                expected='"latest"',
                hint='Use {"type": "latest"}, or update_mode.unit "episodes".',
            )
        self.optimizer = build_optimizer(
            config.step_optimizer or {"type": "adam", "learning_rate": 1e-3},
            list(self.policy.parameters()),
            path="step_optimizer",
            without_kl="the ppo agent",
        )
        steps = (self.epochs or self.optimization_steps) * self.optimizer.inner_steps
        if steps > MAX_STEPS:
            key = "epochs" if self.epochs else "optimization_steps"
            raise SpecError(
                key,
                f"an update takes {steps} inner steps ({key} times those of step_optimizer)",
                expected=f"at most {MAX_STEPS}",
                hint=f"Lower {key}, or step_optimizer's num_steps.",
            )
        self._record_spec(network=network)
        self._load_on_start()

    def _update(self, batch: Transitions) -> dict[str, float]:
        # ---- 1. Advantages A_t (GAE, Schulman et al. 2016) and log pi_old(a_t|s_t) of the collecting policy ----
        data = self._with_advantages(batch)
        # ---- 2. Several steps on the clipped surrogate (see _policy_loss), one per minibatch ----
        for indices in self._minibatches(len(batch)):
            minibatch = {key: value[indices] for key, value in data.items()}
            self.optimizer.step(self._policy_loss, minibatch)
            if self.baseline_optimizer is not None and self.epochs is not None:  # epochs: the value loss per minibatch
                self.baseline_optimizer.step(self._baseline_loss, minibatch)
        # ---- 3. The value loss (2018: the baseline's optimizer once, on the whole batch) ----
        if self.baseline_optimizer is not None and self.epochs is None:
            self.baseline_optimizer.step(self._baseline_loss, data)
        with torch.no_grad():
            return {"policy_loss": float(self._policy_loss(data)), **self._statistics(data)}

    def _with_advantages(self, batch: Transitions) -> Data:
        """The batch as a flat dict plus ``advantages`` A_t, ``returns`` (the baseline's targets) and
        ``old_log_prob``, log pi_old(a_t|s_t) of the policy that collected it."""
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

    def _minibatches(self, size: int) -> Iterator[torch.Tensor]:
        """The rows of each optimizer step: ``epochs`` passes over shuffled minibatches of ``minibatch_size`` (the
        whole batch without one), or 2018's ``optimization_steps`` random subsamples drawn with replacement."""
        if self.epochs is not None:
            step = self.minibatch_size or size
            for _ in range(self.epochs):
                order = torch.randperm(size, device=self.device)
                for start in range(0, size, step):
                    yield order[start : start + step]
        else:
            count = max(1, int(self.subsampling_fraction * size))
            for _ in range(self.optimization_steps):
                yield torch.randint(size, (count,), device=self.device)

    def _policy_loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        states, internals, actions = (group(data, key) for key in ("states", "internals", "actions"))
        params, _, _ = self.policy(states, internals)
        # the probability ratio r_t(theta) = pi(a_t|s_t) / pi_old(a_t|s_t)
        ratio = likelihood_ratio(self.policy.log_prob(params, actions), data["old_log_prob"])
        advantages = data["advantages"]
        # the clipped surrogate L^CLIP, eq. (7): E_t[min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)]
        if self.clipping is None:
            surrogate = ratio * advantages
        else:
            surrogate = clipped_surrogate(ratio, advantages, self.clipping)
        # minimized: -L^CLIP plus the policy's weight penalties, minus the entropy bonus c_2 * S[pi] of eq. (9)
        loss = -surrogate.mean() + self.policy.regularization_loss()
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss

    def _baseline_loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        # the value loss L^VF of eq. (9): 0.5 * E_t[(V(s_t) - R_t)^2], plus the baseline's weight penalties
        baseline, mode = self.baseline, self.baseline_mode
        assert baseline is not None and mode is not None  # called only for an agent with a baseline
        states, internals = group(data, "states"), group(data, "internals")
        values = state_values(baseline, mode, self.policy, states, internals)
        return value_loss(values, data["returns"]) + regularization_loss(baseline)

    def _statistics(self, data: Data) -> dict[str, float]:
        """Entropy, approximate KL and clip fraction of the updated policy on the batch, and the baseline's loss."""
        with torch.no_grad():
            states, internals, actions = (group(data, key) for key in ("states", "internals", "actions"))
            params, _, _ = self.policy(states, internals)
            info = policy_statistics(
                self.policy.log_prob(params, actions), data["old_log_prob"], self.policy.entropy(params), self.clipping
            )
            if self.baseline is not None:
                info["baseline_loss"] = float(self._baseline_loss(data))
        return info

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy} | ({"baseline": self.baseline} if self.baseline is not None else {})

    def optimizers(self) -> dict[str, Any]:
        baseline = {"baseline_optimizer": self.baseline_optimizer} if self.baseline is not None else {}
        return {"step_optimizer": self.optimizer} | baseline
