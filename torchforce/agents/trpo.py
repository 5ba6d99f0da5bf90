"""Trust Region Policy Optimization (Schulman et al. 2015).

Each update maximizes the likelihood-ratio surrogate under a bound on the policy's change, eq. (12):
    maximize   E_t[ ratio_t * A_t ],   ratio_t = pi(a_t|s_t) / pi_old(a_t|s_t)
    subject to E_t[ KL(pi_old(.|s_t) || pi(.|s_t)) ] <= delta          (delta = ``learning_rate``)
approximately, as in the paper's appendix C: a natural-gradient step (conjugate gradient on the Fisher matrix of
the KL, ``cg_max_iterations``, ``cg_damping``) scaled so its predicted KL is delta, then a backtracking line
search on the surrogate (halving the step up to ``ls_max_iterations`` times until the improvement is at least
``ls_accept_ratio`` of the predicted one, or, as 2018, until halving no longer raises that ratio, and, unlike 2018,
the actual KL at most 1.5 delta; at 2018's 0.9 the accepted step is often a small fraction of the natural-gradient
step, which the KL bound delta is tuned against: see ``core.optimizers.solvers.backtracking_line_search``). That is
the 2018 implicit optimizer, ``optimized_step(natural_gradient)``. Advantages and the optional baseline are VPG's
and PPO's (``core.returns.advantages``); ``likelihood_ratio_clipping`` clips the ratio as PPO does (off by default).
"""

from __future__ import annotations

from typing import Any

import torch

from torchforce.agents.config import TRPOConfig
from torchforce.agents.policy_gradient import PolicyGradientAgent
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.core.networks.network import penalized
from torchforce.core.objectives import clipped_surrogate, likelihood_ratio
from torchforce.core.optimizers import Info, build_optimizer


class TRPOAgent(PolicyGradientAgent):
    """Trust Region Policy Optimization (Schulman et al. 2015, "Trust Region Policy Optimization"): each update
    maximizes the likelihood-ratio surrogate E[ratio * A] subject to a bound ``learning_rate`` on the mean KL from
    the policy that collected the batch, by a natural-gradient step (conjugate gradient on the Fisher matrix) and a
    backtracking line search; advantages and the optional baseline are VPG's and PPO's.

    Options: see ``TRPOConfig`` (``torchforce.agents.config``), one line of documentation each.
    """

    name = "trpo"
    losses = ("_loss", "_baseline_loss")  # not _kl: the natural gradient differentiates it twice

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: TRPOConfig | None = None, **options: Any
    ) -> None:
        config = TRPOConfig.resolve(config, options)
        # the policy, memory and schedule, the optional baseline V(s) and its optimizer (see PolicyGradientAgent)
        super().__init__(states, actions, network, config=config)
        self.clipping = config.likelihood_ratio_clipping
        # the 2018 implicit optimizer: a natural-gradient step within the KL bound delta, then a line search on it
        natural_gradient = {
            "type": "natural_gradient",
            "cg_unroll_loop": config.cg_unroll_loop,
            "learning_rate": config.learning_rate,
            "cg_max_iterations": config.cg_max_iterations,
            "cg_damping": config.cg_damping,
        }
        line_search = {
            "ls_max_iterations": config.ls_max_iterations,
            "ls_accept_ratio": config.ls_accept_ratio,
            "ls_unroll_loop": config.ls_unroll_loop,
        }
        # the paper's line search also keeps the actual KL near the bound (1.5x, as OpenAI baselines' TRPO)
        optimizer = {
            "type": "optimized_step",
            "optimizer": natural_gradient,
            "ls_mode": "exponential",
            "ls_parameter": 0.5,
            "ls_max_kl": 1.5 * config.learning_rate,
            **line_search,
        }
        self.optimizer = build_optimizer(optimizer, list(self.policy.parameters()))
        self._finish(network=network)
        self._load_on_start()

    def _update(self, batch: Transitions) -> Info:
        # ---- 1. Advantages A_t (GAE, Schulman et al. 2016) and log pi_old(a_t|s_t) of the collecting policy ----
        data = self._with_advantages(batch)  # + advantages A_t, returns R_t, log pi_old(a_t|s_t)
        # ---- 2. The natural-gradient step on the surrogate (_loss) within E_t[KL(pi_old || pi)] <= delta (_kl),
        #         then the backtracking line search (appendix C) ----
        info = self.optimizer.step(self._loss, data, reference_fn=self._old_policy, kl_fn=self._kl)
        # ---- 3. The baseline's regression on the returns ----
        if self.baseline_optimizer is not None:
            self.baseline_optimizer.step(self._baseline_loss, data)
        report: Info = {key: info[key] for key in ("kl_estimate", "ls_scale", "loss_after") if key in info}
        return {"policy_loss": info["loss"], **report, **self._statistics(data, self.clipping)}

    def _loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        states, internals, actions = (group(data, key) for key in ("states", "internals", "actions"))
        params, _, _ = self.policy(states, internals)
        # the surrogate of eq. (12): E_t[r_t(theta) * A_t], r_t(theta) = pi(a_t|s_t) / pi_old(a_t|s_t)
        ratio = likelihood_ratio(self.policy.log_prob(params, actions), data["old_log_prob"])
        surrogate = ratio * data["advantages"]
        if self.clipping is not None:  # optionally clipped as PPO's
            surrogate = clipped_surrogate(ratio, data["advantages"], self.clipping)
        # negated (the optimizer minimizes), plus the policy's weight penalties
        loss = penalized(-surrogate.mean(), self.policy)
        # the entropy bonus: -c * H[pi(.|s_t)]
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss

    def _old_policy(self, data: FlatBatch) -> Any:
        """pi_old's distribution parameters on the batch, computed once before the step."""
        params, _, _ = self.policy(group(data, "states"), group(data, "internals"))
        return params

    def _kl(self, data: FlatBatch, old_params: Any) -> torch.Tensor:
        # the trust region's constraint: E_t[KL(pi_old(.|s_t) || pi(.|s_t))]
        params, _, _ = self.policy(group(data, "states"), group(data, "internals"))
        return self.policy.kl_divergence(old_params, params).mean()
