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

from torchforce.agents.config import PPOConfig
from torchforce.agents.policy_gradient import Forward, PolicyGradientAgent
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.core.baselines import shared_state_values
from torchforce.core.networks.network import penalized
from torchforce.core.objectives import clipped_surrogate, likelihood_ratio, standardized
from torchforce.core.optimizers import Info, TorchOptimizer, build_optimizer, minimize_each
from torchforce.core.schedules import build_schedule
from torchforce.spec import SpecError
from torchforce.spec.checks import MAX_STEPS


class PPOAgent(PolicyGradientAgent):
    """Proximal Policy Optimization (Schulman et al. 2017, "Proximal Policy Optimization Algorithms"): several
    optimizer steps per batch on the clipped surrogate E[min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)], which
    keeps the policy near the one that collected the batch; advantages from an optional state-value baseline (GAE
    with ``gae_lambda``), steps either on random subsamples (2018) or over shuffled minibatches for ``epochs``.

    Options: see ``PPOConfig`` (``torchforce.agents.config``), one line of documentation each.
    """

    name = "ppo"
    optimizer_key = "step_optimizer"
    losses = ("_policy_loss", "_baseline_loss")

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: PPOConfig | None = None, **options: Any
    ) -> None:
        config = PPOConfig.resolve(config, options)
        # the policy, memory and schedule, the optional baseline V(s) and its optimizer (see PolicyGradientAgent)
        super().__init__(states, actions, network, config=config)
        # epsilon, or its schedule over the timesteps (set before each update: _follow_schedules)
        clipping = config.likelihood_ratio_clipping
        self.clipping_schedule = None if clipping is None else build_schedule(clipping, "likelihood_ratio_clipping")
        self.clipping = None if self.clipping_schedule is None else self.clipping_schedule.value(0)
        # advantages normalized over each minibatch instead of the batch (SB3's and CleanRL's way)
        self.minibatch_normalization = config.normalize_advantages == "minibatch"
        self.subsampling_fraction = config.subsampling_fraction
        self.optimization_steps = config.optimization_steps
        self.epochs = config.epochs
        self.minibatch_size = config.minibatch_size
        # c_1 of eq. 9: the value loss joins the policy's, and one optimizer steps both (else the baseline's own)
        self.value_loss_weight = config.value_loss_weight
        parameters = list(self.policy.parameters())
        if self.value_loss_weight is not None and self.baseline is not None:
            self.baseline_optimizer = None
            parameters += list(self.baseline.parameters())
        # the policy's optimizer, one step per minibatch
        self.optimizer = build_optimizer(
            config.step_optimizer or {"type": "adam", "learning_rate": 1e-3},
            parameters,
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
        # the policy's and the baseline's steps on a minibatch share one backward pass where neither loss reads the
        # other's parameters: a baseline network of its own ("states" mode), each optimizer a plain gradient step
        # (a flag, not the two optimizers: a worker sharing a model steps the shared ones, which replace its own)
        self._shared_backward = bool(
            isinstance(self.optimizer, TorchOptimizer)
            and isinstance(self.baseline_optimizer, TorchOptimizer)
            and self.baseline is not None
            and self.baseline_mode == "states"
            and self.epochs is not None
            and not {id(p) for p in self.policy.parameters()} & {id(p) for p in self.baseline.parameters()}
        )
        self._finish(network=network)
        self._load_on_start()

    def _follow_schedules(self) -> None:
        super()._follow_schedules()
        if self.clipping_schedule is not None:
            self.clipping = self.clipping_schedule.value(self.model_timestep)

    def _update(self, batch: Transitions) -> Info:
        # ---- 1. Advantages A_t (GAE, Schulman et al. 2016) and log pi_old(a_t|s_t) of the collecting policy ----
        data = self._with_advantages(batch)  # + advantages A_t, returns R_t, log pi_old(a_t|s_t)
        # ---- 2. Several steps on the clipped surrogate (see _policy_loss), one per minibatch ----
        trained = {key: value for key, value in data.items() if not key.startswith("next_")}  # unread here
        for indices in self._minibatches(len(batch)):
            # index_select: for image rows about 20x faster than indexing with a tensor (value[indices])
            minibatch = {key: value.index_select(0, indices) for key, value in trained.items()}
            if self._shared_backward:  # the two steps below, their gradients from one backward pass
                policy_step, baseline_step = self.optimizer, self.baseline_optimizer
                assert isinstance(policy_step, TorchOptimizer) and isinstance(baseline_step, TorchOptimizer)
                minimize_each(
                    [(policy_step, self._policy_loss(minibatch)), (baseline_step, self._baseline_loss(minibatch))]
                )
            else:
                self.optimizer.step(self._policy_loss, minibatch)
                if self.baseline_optimizer is not None and self.epochs is not None:  # epochs: per minibatch
                    self.baseline_optimizer.step(self._baseline_loss, minibatch)
        # ---- 3. The value loss (2018: the baseline's optimizer once, on the whole batch) ----
        if self.baseline_optimizer is not None and self.epochs is None:
            self.baseline_optimizer.step(self._baseline_loss, data)
        info: Info = {}
        if self.reporting:  # one pass of the updated policy over the batch for both (only if someone reads them)
            with self._report_pass():
                forward = self.policy(group(data, "states"), group(data, "internals"))
                info["policy_loss"] = float(self._policy_loss(data, forward=forward))
                info |= self._statistics(data, self.clipping, forward)
        if self.clipping_schedule is not None and not self.clipping_schedule.constant:
            info["likelihood_ratio_clipping"] = self.clipping_schedule.value(self.model_timestep)  # where it stands now
        return info

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

    def _policy_loss(self, data: FlatBatch, reference: Any = None, *, forward: Forward | None = None) -> torch.Tensor:
        states, internals, actions = (group(data, key) for key in ("states", "internals", "actions"))
        params, _, embedding = self.policy(states, internals) if forward is None else forward
        # the probability ratio r_t(theta) = pi(a_t|s_t) / pi_old(a_t|s_t)
        ratio = likelihood_ratio(self.policy.log_prob(params, actions), data["old_log_prob"])
        advantages = standardized(data["advantages"]) if self.minibatch_normalization else data["advantages"]
        # the clipped surrogate L^CLIP, eq. (7): E_t[min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)] (unclipped: L^CPI)
        surrogate = ratio * advantages if self.clipping is None else clipped_surrogate(ratio, advantages, self.clipping)
        # minimized: -L^CLIP plus the policy's weight penalties, minus the entropy bonus c_2 * S[pi] of eq. (9)
        loss = penalized(-surrogate.mean(), self.policy)
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        if self.value_loss_weight is not None and self.baseline is not None and self.baseline_mode is not None:
            # plus c_1 L^VF of eq. 9 (in "network" mode through the policy's network: a shared torso)
            values = shared_state_values(self.baseline, self.baseline_mode, states, embedding)
            loss = loss + self.value_loss_weight * self._value_loss(values, data["returns"])
        return loss
