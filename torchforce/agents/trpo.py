"""Trust Region Policy Optimization (Schulman et al. 2015).

Each update maximizes the likelihood-ratio surrogate under a bound on the policy's change, eq. (12):
    maximize   E_t[ ratio_t * A_t ],   ratio_t = pi(a_t|s_t) / pi_old(a_t|s_t)
    subject to E_t[ KL(pi_old(.|s_t) || pi(.|s_t)) ] <= delta          (delta = ``learning_rate``)
approximately, as in the paper's appendix C: a natural-gradient step (conjugate gradient on the Fisher matrix of
the KL, ``cg_max_iterations``, ``cg_damping``) scaled so its predicted KL is delta, then a backtracking line
search on the surrogate (halving the step up to ``ls_max_iterations`` times until the improvement is at least
``ls_accept_ratio`` of the predicted one, or, as 2018, until halving no longer raises that ratio, and, unlike 2018,
the actual KL at most 1.5 delta; without that 2018 stop, TRPO's steps shrank to ~1/64 and a Beta policy barely
learned: see ``core.optimizers.solvers.backtracking_line_search``). That is the 2018
implicit optimizer, ``optimized_step(natural_gradient)``. Advantages and the optional baseline are VPG's and PPO's
(``core.returns.advantages``); ``likelihood_ratio_clipping`` clips the ratio as PPO does (off by default).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import TRPOConfig
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.update_mode import default_latest_capacity
from torchforce.core.baselines import build_pg_baseline, regularization_loss, state_values
from torchforce.core.objectives import clipped_surrogate, likelihood_ratio, policy_statistics, value_loss
from torchforce.core.optimizers import Optimizer, build_optimizer
from torchforce.core.returns import advantage_tensors

Data = dict[str, torch.Tensor]


class TRPOAgent(LearningAgent):
    """Trust Region Policy Optimization (Schulman et al. 2015, "Trust Region Policy Optimization"): each update
    maximizes the likelihood-ratio surrogate E[ratio * A] subject to a bound ``learning_rate`` on the mean KL from
    the policy that collected the batch, by a natural-gradient step (conjugate gradient on the Fisher matrix) and a
    backtracking line search; advantages and the optional baseline are VPG's and PPO's.

    Options: see ``TRPOConfig`` (``torchforce.agents.config``), one line of documentation each.
    """

    name = "trpo"
    optimizer: Optimizer
    baseline_mode: str | None  # the optional state-value baseline: all three set, or all three None
    baseline: nn.Module | None
    baseline_optimizer: Optimizer | None

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: TRPOConfig | None = None, **options: Any
    ) -> None:
        config = TRPOConfig.resolve(config, options)
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
        self.clipping = config.likelihood_ratio_clipping
        # the optional state-value baseline V(s) and its optimizer
        self.baseline_mode, self.baseline, self.baseline_optimizer = build_pg_baseline(
            config.baseline_mode,
            config.baseline,
            config.baseline_optimizer,
            config.gae_lambda,
            states=self.processed_states,
            embedding_size=self.policy.network.output_size,
            device=self.device,
        )
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
        self._record_spec(network=network)
        self._load_on_start()

    def _update(self, batch: Transitions) -> dict[str, float]:
        # ---- 1. Advantages A_t (GAE, Schulman et al. 2016) and log pi_old(a_t|s_t) of the collecting policy ----
        data = self._with_advantages(batch)
        # ---- 2. The natural-gradient step on the surrogate (_loss) within E_t[KL(pi_old || pi)] <= delta (_kl),
        #         then the backtracking line search (appendix C) ----
        info = self.optimizer.step(self._loss, data, reference_fn=self._old_policy, kl_fn=self._kl)
        # ---- 3. The baseline's regression on the returns ----
        if self.baseline_optimizer is not None:
            self.baseline_optimizer.step(self._baseline_loss, data)
        report: dict[str, float] = {key: info[key] for key in ("kl_estimate", "ls_scale", "loss_after") if key in info}
        return {"policy_loss": info["loss"], **report, **self._statistics(data)}

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

    def _loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        states, internals, actions = (group(data, key) for key in ("states", "internals", "actions"))
        params, _, _ = self.policy(states, internals)
        # the surrogate of eq. (12): E_t[r_t(theta) * A_t], r_t(theta) = pi(a_t|s_t) / pi_old(a_t|s_t),
        # optionally clipped as PPO's; negated (the optimizer minimizes) and plus the policy's weight penalties
        ratio = likelihood_ratio(self.policy.log_prob(params, actions), data["old_log_prob"])
        advantages = data["advantages"]
        if self.clipping is None:
            surrogate = ratio * advantages
        else:
            surrogate = clipped_surrogate(ratio, advantages, self.clipping)
        loss = -surrogate.mean() + self.policy.regularization_loss()
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

    def _baseline_loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        # 0.5 * E_t[(V(s_t) - R_t)^2], plus the baseline's weight penalties
        baseline, mode = self.baseline, self.baseline_mode
        assert baseline is not None and mode is not None  # called only for an agent with a baseline
        states, internals = group(data, "states"), group(data, "internals")
        values = state_values(baseline, mode, self.policy, states, internals)
        return value_loss(values, data["returns"]) + regularization_loss(baseline)

    def _statistics(self, data: Data) -> dict[str, float]:
        """Entropy, approximate KL (and clip fraction) of the updated policy on the batch, and the baseline's loss."""
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
        return {"optimizer": self.optimizer} | baseline
