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

from typing import Any

import torch

from torchforce.agents import policy_gradient
from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import PPOConfig
from torchforce.agents.policy_gradient import (
    baseline_loss,
    statistics,
    surrogate_loss,
    with_advantages,
)
from torchforce.agents.transitions import Transitions
from torchforce.core.memories.latest import Latest
from torchforce.core.optimizers import build_optimizer
from torchforce.spec import SpecError
from torchforce.spec.checks import MAX_STEPS


class PPOAgent(LearningAgent):
    """Proximal Policy Optimization (Schulman et al. 2017, "Proximal Policy Optimization Algorithms"): several
    optimizer steps per batch on the clipped surrogate E[min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)], which
    keeps the policy near the one that collected the batch; advantages from an optional state-value baseline (GAE
    with ``gae_lambda``), steps either on random subsamples (2018) or over shuffled minibatches for ``epochs``.

    Options: see ``PPOConfig`` (``torchforce.agents.config``), one line of documentation each.
    """

    name = "ppo"

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: PPOConfig | None = None, **options: Any
    ) -> None:
        config = PPOConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        policy_gradient.setup(self, network=network, config=config)
        if self.update_mode.unit == "timesteps" and not isinstance(self.memory, Latest):
            # a replay memory would hand out random, old timesteps: PPO needs the latest contiguous ones
            memory = config.memory
            raise SpecError("memory.type", "PPO updating on timesteps learns from the most recent ones",
                            got=memory.get("type") if isinstance(memory, dict) else memory, expected='"latest"',
                            hint='Use {"type": "latest"}, or update_mode.unit "episodes".')  # fmt: skip
        self.clipping = config.likelihood_ratio_clipping
        self.subsampling_fraction = config.subsampling_fraction
        self.optimization_steps = config.optimization_steps
        self.epochs = config.epochs
        self.minibatch_size = config.minibatch_size
        self.optimizer = build_optimizer(config.step_optimizer or {"type": "adam", "learning_rate": 1e-3},
                                         list(self.policy.parameters()), path="step_optimizer",
                                         without_kl="the ppo agent")  # fmt: skip
        steps = (self.epochs or self.optimization_steps) * self.optimizer.inner_steps
        if steps > MAX_STEPS:
            key = "epochs" if self.epochs else "optimization_steps"
            raise SpecError(key, f"an update takes {steps} inner steps ({key} times those of step_optimizer)",
                            expected=f"at most {MAX_STEPS}",
                            hint=f"Lower {key}, or step_optimizer's num_steps.")  # fmt: skip
        self._record_spec(network=network)
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return policy_gradient.modules(self)

    def optimizers(self) -> dict[str, Any]:
        return policy_gradient.optimizers(self, "step_optimizer")

    def _update(self, batch: Transitions) -> dict[str, float]:
        data = with_advantages(self, batch)
        for indices in self._minibatches(len(batch)):
            minibatch = {key: value[indices] for key, value in data.items()}
            self.optimizer.step(self._policy_loss, minibatch)
            if self.baseline is not None and self.epochs is not None:  # epochs: the value loss per minibatch
                self.baseline_optimizer.step(self._baseline_loss, minibatch)
        if self.baseline is not None and self.epochs is None:  # 2018: the baseline's optimizer once, on the batch
            self.baseline_optimizer.step(self._baseline_loss, data)
        with torch.no_grad():
            return {"policy_loss": float(self._policy_loss(data)), **statistics(self, data, self.clipping)}

    def _minibatches(self, size: int):
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

    def _policy_loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        # the clipped surrogate, eq. (7)
        return surrogate_loss(self, data, self.clipping)

    def _baseline_loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        return baseline_loss(self, data)
