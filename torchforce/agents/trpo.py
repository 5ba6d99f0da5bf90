"""Trust Region Policy Optimization (Schulman et al. 2015).

Each update maximizes the likelihood-ratio surrogate under a bound on the policy's change, eq. (12):
    maximize   E_t[ ratio_t * A_t ],   ratio_t = pi(a_t|s_t) / pi_old(a_t|s_t)
    subject to E_t[ KL(pi_old(.|s_t) || pi(.|s_t)) ] <= delta          (delta = ``learning_rate``)
approximately, as in the paper's appendix C: a natural-gradient step (conjugate gradient on the Fisher matrix of
the KL, ``cg_max_iterations``, ``cg_damping``) scaled so its predicted KL is delta, then a backtracking line
search on the surrogate (halving the step up to ``ls_max_iterations`` times until the improvement is at least
``ls_accept_ratio`` of the predicted one and, unlike 2018, the actual KL at most 1.5 delta). That is the 2018
implicit optimizer, ``optimized_step(natural_gradient)``. Advantages and the optional baseline are VPG's and PPO's
(``core.returns.advantages``); ``likelihood_ratio_clipping`` clips the ratio as PPO does (off by default).
"""

from __future__ import annotations

from typing import Any

import torch

from torchforce.agents import policy_gradient
from torchforce.agents.agent import LearningAgent
from torchforce.agents.policy_gradient import (
    baseline_loss,
    split,
    statistics,
    surrogate_loss,
    with_advantages,
)
from torchforce.agents.transitions import Transitions
from torchforce.core.optimizers import build_optimizer
from torchforce.spec import expect_bool, expect_float
from torchforce.spec.checks import expect_steps


class TRPOAgent(LearningAgent):
    name = "trpo"

    def __init__(
        self,
        states: Any,
        actions: Any,
        network: Any,
        *,
        batched_observe: bool = True,
        batching_capacity: int = 1000,
        scope: str = "trpo",
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
        likelihood_ratio_clipping: float | None = None,
        learning_rate: float = 1e-3,
        cg_max_iterations: int = 20,
        cg_damping: float = 1e-3,
        cg_unroll_loop: bool = False,
        ls_max_iterations: int = 10,
        ls_accept_ratio: float = 0.9,
        ls_unroll_loop: bool = False,
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
        self.clipping = expect_float(
            likelihood_ratio_clipping, "likelihood_ratio_clipping", minimum=0.0, allow_none=True
        )
        # the 2018 implicit optimizer: a natural-gradient step within the KL bound, then a line search on it
        natural_gradient = {"type": "natural_gradient", "cg_unroll_loop": expect_bool(cg_unroll_loop, "cg_unroll_loop"),
                            "learning_rate": expect_float(learning_rate, "learning_rate", minimum=1e-12),
                            "cg_max_iterations": expect_steps(cg_max_iterations, "cg_max_iterations"),
                            "cg_damping": expect_float(cg_damping, "cg_damping", minimum=0.0)}  # fmt: skip
        line_search = {"ls_max_iterations": expect_steps(ls_max_iterations, "ls_max_iterations", minimum=0),
                       "ls_accept_ratio": expect_float(ls_accept_ratio, "ls_accept_ratio", minimum=0.0),
                       "ls_unroll_loop": expect_bool(ls_unroll_loop, "ls_unroll_loop")}  # fmt: skip
        # the paper's line search also keeps the actual KL near the bound (1.5x, as OpenAI baselines' TRPO)
        optimizer = {"type": "optimized_step", "optimizer": natural_gradient, "ls_mode": "exponential",
                     "ls_parameter": 0.5, "ls_max_kl": 1.5 * natural_gradient["learning_rate"],
                     **line_search}  # fmt: skip
        self.optimizer = build_optimizer(optimizer, list(self.policy.parameters()))
        self._remember(locals())
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return policy_gradient.modules(self)

    def optimizers(self) -> dict[str, Any]:
        return policy_gradient.optimizers(self, "optimizer")

    def _update(self, batch: Transitions) -> dict[str, float]:
        data = with_advantages(self, batch)
        info = self.optimizer.step(self._loss, data, reference_fn=self._old_policy, kl_fn=self._kl)
        if self.baseline is not None:
            self.baseline_optimizer.step(self._baseline_loss, data)
        report = {key: info[key] for key in ("kl_estimate", "ls_scale", "loss_after") if key in info}
        return {"policy_loss": info["loss"], **report, **statistics(self, data, self.clipping)}

    def _loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        # the surrogate of eq. (12), negated: the optimizer minimizes
        return surrogate_loss(self, data, self.clipping)

    def _old_policy(self, data: dict[str, torch.Tensor]) -> Any:
        """pi_old's distribution parameters on the batch, computed once before the step."""
        states, internals, _ = split(data)
        params, _, _ = self.policy(states, internals)
        return params

    def _kl(self, data: dict[str, torch.Tensor], old_params: Any) -> torch.Tensor:
        # the trust region: mean KL(pi_old || pi) over the batch
        states, internals, _ = split(data)
        params, _, _ = self.policy(states, internals)
        return self.policy.kl_divergence(old_params, params).mean()

    def _baseline_loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        return baseline_loss(self, data)
