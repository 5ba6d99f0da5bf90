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
from torchforce.agents.policy_gradient import (
    baseline_loss,
    statistics,
    surrogate_loss,
    with_advantages,
)
from torchforce.agents.transitions import Transitions
from torchforce.core.memories.latest import Latest
from torchforce.core.optimizers import build_optimizer
from torchforce.spec import SpecError, expect_float, expect_int
from torchforce.spec.checks import MAX_STEPS, expect_steps


class PPOAgent(LearningAgent):
    name = "ppo"

    def __init__(
        self,
        states: Any,
        actions: Any,
        network: Any,
        *,
        batched_observe: bool = True,
        batching_capacity: int = 1000,
        scope: str = "ppo",
        device: str | None = None,
        saver: dict | None = None,
        summarizer: dict | None = None,
        execution: dict | None = None,
        variable_noise: float | None = None,
        states_preprocessing: Any = None,
        actions_exploration: Any = None,
        reward_preprocessing: Any = None,
        update_mode: dict | None = None,
        memory: Any = None,
        discount: float = 0.99,
        distributions: dict | None = None,
        entropy_regularization: float | None = None,
        baseline_mode: str | None = None,
        baseline: Any = None,
        baseline_optimizer: Any = None,
        gae_lambda: float | None = None,
        likelihood_ratio_clipping: float | None = 0.2,
        step_optimizer: Any = None,
        subsampling_fraction: float = 0.1,
        optimization_steps: int = 50,
        epochs: int | None = None,
        minibatch_size: int | None = None,
        normalize_advantages: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__(states, actions, batched_observe=batched_observe, batching_capacity=batching_capacity,
                         scope=scope, device=device, saver=saver, summarizer=summarizer, execution=execution,
                         seed=seed)  # fmt: skip
        policy_gradient.setup(
            self, network=network, update_mode=update_mode, memory=memory, states_preprocessing=states_preprocessing,
            actions_exploration=actions_exploration, reward_preprocessing=reward_preprocessing,
            distributions=distributions, variable_noise=variable_noise, discount=discount,
            entropy_regularization=entropy_regularization, gae_lambda=gae_lambda,
            normalize_advantages=normalize_advantages, baseline_mode=baseline_mode, baseline=baseline,
            baseline_optimizer=baseline_optimizer,
        )  # fmt: skip
        if self.update_mode.unit == "timesteps" and not isinstance(self.memory, Latest):
            # a replay memory would hand out random, old timesteps: PPO needs the latest contiguous ones
            raise SpecError("memory.type", "PPO updating on timesteps learns from the most recent ones",
                            got=memory.get("type") if isinstance(memory, dict) else memory, expected='"latest"',
                            hint='Use {"type": "latest"}, or update_mode.unit "episodes".')  # fmt: skip
        self.clipping = expect_float(
            likelihood_ratio_clipping, "likelihood_ratio_clipping", minimum=0.0, allow_none=True
        )
        self.subsampling_fraction = expect_float(subsampling_fraction, "subsampling_fraction")
        if not 0.0 < self.subsampling_fraction <= 1.0:
            raise SpecError("subsampling_fraction", "out of range", got=subsampling_fraction,
                            expected="a number in (0, 1]")  # fmt: skip
        self.optimization_steps = expect_steps(optimization_steps, "optimization_steps")
        self.epochs = expect_steps(epochs, "epochs", allow_none=True)
        self.minibatch_size = expect_int(minibatch_size, "minibatch_size", minimum=1, allow_none=True)
        if self.minibatch_size is not None and self.epochs is None:
            raise SpecError("minibatch_size", "goes with 'epochs'", hint="Set epochs too, or use subsampling_fraction.")
        self.optimizer = build_optimizer(step_optimizer or {"type": "adam", "learning_rate": 1e-3},
                                         list(self.policy.parameters()), path="step_optimizer",
                                         without_kl="the ppo agent")  # fmt: skip
        steps = (self.epochs or self.optimization_steps) * self.optimizer.inner_steps
        if steps > MAX_STEPS:
            key = "epochs" if self.epochs else "optimization_steps"
            raise SpecError(key, f"an update takes {steps} inner steps ({key} times those of step_optimizer)",
                            expected=f"at most {MAX_STEPS}",
                            hint=f"Lower {key}, or step_optimizer's num_steps.")  # fmt: skip
        self._remember(locals())
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
