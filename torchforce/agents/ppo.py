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

import numpy as np
import torch

from torchforce.agents.agent import Agent
from torchforce.agents.transitions import Transitions, group
from torchforce.core.baselines import EMBEDDING, build_pg_baseline
from torchforce.core.memories.latest import Latest
from torchforce.core.optimizers import build_optimizer
from torchforce.core.returns import advantages, cut_windows
from torchforce.spec import SpecError, expect_bool, expect_float, expect_int


class PPOAgent(Agent):
    name = "ppo"
    learning = True

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
        self._setup_learning(
            network=network, update_mode=update_mode, memory=memory, states_preprocessing=states_preprocessing,
            actions_exploration=actions_exploration, reward_preprocessing=reward_preprocessing,
            distributions=distributions, variable_noise=variable_noise, on_policy=True,
            default_update_mode={"unit": "episodes", "batch_size": 10},
            default_memory={"type": "latest", "capacity": _default_capacity(update_mode)},
        )  # fmt: skip
        if self.update_mode.unit == "timesteps" and not isinstance(self.memory, Latest):
            # a replay memory would hand out random, old timesteps: PPO needs the latest contiguous ones
            raise SpecError("memory.type", "PPO updating on timesteps learns from the most recent ones",
                            got=memory.get("type") if isinstance(memory, dict) else memory, expected='"latest"',
                            hint='Use {"type": "latest"}, or update_mode.unit "episodes".')  # fmt: skip
        self.discount = expect_float(discount, "discount", minimum=0.0, maximum=1.0)
        self.entropy_regularization = expect_float(
            entropy_regularization, "entropy_regularization", minimum=0.0, allow_none=True
        )
        self.gae_lambda = expect_float(gae_lambda, "gae_lambda", minimum=0.0, maximum=1.0, allow_none=True)
        self.clipping = expect_float(
            likelihood_ratio_clipping, "likelihood_ratio_clipping", minimum=0.0, allow_none=True
        )
        self.subsampling_fraction = expect_float(subsampling_fraction, "subsampling_fraction")
        if not 0.0 < self.subsampling_fraction <= 1.0:
            raise SpecError("subsampling_fraction", "out of range", got=subsampling_fraction,
                            expected="a number in (0, 1]")  # fmt: skip
        self.optimization_steps = expect_int(optimization_steps, "optimization_steps", minimum=1)
        self.epochs = expect_int(epochs, "epochs", minimum=1, allow_none=True)
        self.minibatch_size = expect_int(minibatch_size, "minibatch_size", minimum=1, allow_none=True)
        if self.minibatch_size is not None and self.epochs is None:
            raise SpecError("minibatch_size", "goes with 'epochs'", hint="Set epochs too, or use subsampling_fraction.")
        self.normalize_advantages = expect_bool(normalize_advantages, "normalize_advantages")
        self.optimizer = build_optimizer(step_optimizer or {"type": "adam", "learning_rate": 1e-3},
                                         list(self.policy.parameters()), path="step_optimizer")  # fmt: skip
        self.baseline_mode, self.baseline, self.baseline_optimizer = build_pg_baseline(
            baseline_mode, baseline, baseline_optimizer, gae_lambda, states=self.processed_states,
            embedding_size=self.policy.network.output_size, device=self.device,
        )  # fmt: skip
        self._remember(locals())
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        modules = {"policy": self.policy}
        if self.baseline is not None:
            modules["baseline"] = self.baseline
        return modules

    def optimizers(self) -> dict[str, Any]:
        optimizers = {"step_optimizer": self.optimizer}
        if self.baseline is not None:
            optimizers["baseline_optimizer"] = self.baseline_optimizer
        return optimizers

    def _values(self, states: dict[str, torch.Tensor], internals: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.baseline_mode == "network":
            embedding, _ = self.policy.network(states, internals)
            return self.baseline({EMBEDDING: embedding.detach()})
        return self.baseline(states)

    def _update(self, batch: Transitions) -> dict[str, float]:
        advantages, returns = self._advantages(batch)
        with torch.no_grad():
            # pi_old: the policy that collected the batch
            params, _, _ = self.policy(batch.states, batch.internals)
            old_log_prob = self.policy.log_prob(params, batch.actions)
        data = batch.flat()
        data["advantages"] = torch.as_tensor(advantages, device=self.device)
        data["returns"] = torch.as_tensor(returns, device=self.device)
        data["old_log_prob"] = old_log_prob
        for indices in self._minibatches(len(batch)):
            minibatch = {key: value[indices] for key, value in data.items()}
            self.optimizer.step(self._policy_loss, minibatch)
            if self.baseline is not None and self.epochs is not None:  # epochs: the value loss per minibatch
                self.baseline_optimizer.step(self._baseline_loss, minibatch)
        if self.baseline is not None and self.epochs is None:  # 2018: the baseline's optimizer once, on the batch
            self.baseline_optimizer.step(self._baseline_loss, data)
        return self._statistics(data)

    def _advantages(self, batch: Transitions) -> tuple[np.ndarray, np.ndarray]:
        """Advantages and the baseline's regression targets (see ``core.returns.advantages``)."""
        reward, terminal = batch.reward.cpu().numpy(), batch.terminal.cpu().numpy()
        if self.update_mode.unit == "sequences":
            terminal = cut_windows(terminal, self.update_mode.length)
        values = next_values = None
        if self.baseline is not None:
            with torch.no_grad():
                values = self._values(batch.states, batch.internals).cpu().numpy()
                next_values = self._values(batch.next_states, batch.internals).cpu().numpy()
        return advantages(reward, terminal, values, next_values, discount=self.discount, gae_lambda=self.gae_lambda,
                          normalize=self.normalize_advantages)  # fmt: skip

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

    @staticmethod
    def _split(batch: dict[str, torch.Tensor]) -> tuple[dict, dict, dict]:
        return group(batch, "states"), group(batch, "internals"), group(batch, "actions")

    def _policy_loss(self, batch: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        states, internals, actions = self._split(batch)
        params, _, _ = self.policy(states, internals)
        advantages = batch["advantages"]
        # clipped surrogate
        ratio = torch.exp(self.policy.log_prob(params, actions) - batch["old_log_prob"])
        surrogate = ratio * advantages
        if self.clipping is not None:
            clipped = torch.clamp(ratio, 1.0 - self.clipping, 1.0 + self.clipping) * advantages
            surrogate = torch.min(surrogate, clipped)
        loss = -surrogate.mean() + self.policy.regularization_loss()
        # entropy bonus
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss

    def _baseline_loss(self, batch: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        states, internals, _ = self._split(batch)
        return (
            0.5 * (self._values(states, internals) - batch["returns"]).pow(2).mean()
            + self.baseline.regularization_loss()
        )

    def _statistics(self, data: dict[str, torch.Tensor]) -> dict[str, float]:
        with torch.no_grad():
            states, internals, actions = self._split(data)
            params, _, _ = self.policy(states, internals)
            log_ratio = self.policy.log_prob(params, actions) - data["old_log_prob"]
            info = {
                "policy_loss": float(self._policy_loss(data)),
                "entropy": float(self.policy.entropy(params).mean()),
                "approx_kl": float(((log_ratio.exp() - 1) - log_ratio).mean()),
            }  # learning rates: the summarizer reads them from the optimizers
            if self.clipping is not None:
                info["clip_fraction"] = float(((log_ratio.exp() - 1).abs() > self.clipping).float().mean())
            if self.baseline is not None:
                info["baseline_loss"] = float(self._baseline_loss(data))
        return info


def _default_capacity(update_mode: dict | None) -> int:
    """Room for one batch with margin: 1000 steps per episode for episode batches; for timesteps and sequences, four
    times what is staged before an update (a batch, its windows' extra rows, the frequency, the first update), and at
    least 1024 rows, so that batched acting over many environments fits too."""
    mode = update_mode if isinstance(update_mode, dict) else {}
    batch_size, frequency = mode.get("batch_size", 10), mode.get("frequency", mode.get("batch_size", 10))
    length, first_update = mode.get("length", 8), mode.get("first_update", 0)
    if not all(isinstance(value, int) and value >= 0 for value in (batch_size, frequency, length, first_update)):
        return 10_000  # the update_mode check reports the bad value
    unit = mode.get("unit", "episodes")
    if unit == "episodes":
        return max(batch_size * 1000, 10_000)
    window = batch_size + length - 1 if unit == "sequences" else batch_size
    return max(4 * max(window, frequency, first_update), 1024)
