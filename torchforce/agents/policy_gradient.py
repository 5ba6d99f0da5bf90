"""What the policy-gradient agents (VPG, PPO, TRPO) share, as functions of the agent: the baseline's state values
and its regression loss, a batch with its advantages, the likelihood-ratio surrogate, and the default memory.

Each function reads the agent's ``policy``, ``baseline`` (None without a ``baseline_mode``), ``baseline_mode``,
``discount``, ``gae_lambda``, ``normalize_advantages``, ``entropy_regularization`` and ``update_mode``.
"""

from __future__ import annotations

from typing import Any

import torch

from torchforce.agents.config import PolicyGradientConfig
from torchforce.agents.transitions import Transitions, group
from torchforce.core.baselines import EMBEDDING, build_pg_baseline
from torchforce.core.returns import advantages, cut_windows

Data = dict[str, torch.Tensor]


def setup(agent: Any, *, network: Any, config: PolicyGradientConfig) -> None:
    """What every policy-gradient agent's constructor does: the learning setup (``Agent._setup_learning``: on-policy,
    10 episodes per update and a latest memory by default), the options of the module docstring set from the
    ``config`` (checked already), and the baseline built."""
    agent._setup_learning(
        network=network,
        config=config,
        default_update_mode={"unit": "episodes", "batch_size": 10},
        default_memory={"type": "latest", "capacity": default_capacity(config.update_mode)},
        on_policy=True,
    )
    agent.discount = config.discount
    agent.entropy_regularization = config.entropy_regularization
    agent.gae_lambda = config.gae_lambda
    agent.normalize_advantages = config.normalize_advantages
    agent.baseline_mode, agent.baseline, agent.baseline_optimizer = build_pg_baseline(
        config.baseline_mode, config.baseline, config.baseline_optimizer, config.gae_lambda,
        states=agent.processed_states, embedding_size=agent.policy.network.output_size, device=agent.device,
    )  # fmt: skip


def modules(agent: Any) -> dict[str, torch.nn.Module]:
    """The policy, and the baseline if there is one (what the agent learns and saves)."""
    return {"policy": agent.policy} | ({"baseline": agent.baseline} if agent.baseline is not None else {})


def optimizers(agent: Any, policy_optimizer: str) -> dict[str, Any]:
    """The policy's optimizer under its spec key (``optimizer``, ``step_optimizer``), and the baseline's."""
    baseline = {"baseline_optimizer": agent.baseline_optimizer} if agent.baseline is not None else {}
    return {policy_optimizer: agent.optimizer} | baseline


def split(data: Data) -> tuple[Data, Data, Data]:
    """States, internals and actions of a flat batch."""
    return group(data, "states"), group(data, "internals"), group(data, "actions")


def state_values(agent: Any, states: Data, internals: Data) -> torch.Tensor:
    """V(s) of the baseline: on the states, or ("network" mode) on the policy's embedding without its gradient."""
    if agent.baseline_mode == "network":
        embedding, _ = agent.policy.network(states, internals)
        return agent.baseline({EMBEDDING: embedding.detach()})
    return agent.baseline(states)


def with_advantages(agent: Any, batch: Transitions) -> Data:
    """The batch as a flat dict of tensors plus ``advantages``, ``returns`` (the baseline's targets) and
    ``old_log_prob`` (log pi_old(a|s) of the policy that collected it), as ``core.returns.advantages`` computes."""
    reward, terminal = batch.reward.cpu().numpy(), batch.terminal.cpu().numpy()
    if agent.update_mode.unit == "sequences":
        terminal = cut_windows(terminal, agent.update_mode.length)
    values = next_values = None
    with torch.no_grad():
        if agent.baseline is not None:
            values = state_values(agent, batch.states, batch.internals).cpu().numpy()
            next_values = state_values(agent, batch.next_states, batch.internals).cpu().numpy()
        params, _, _ = agent.policy(batch.states, batch.internals)
        old_log_prob = agent.policy.log_prob(params, batch.actions)
    estimates, returns = advantages(reward, terminal, values, next_values, discount=agent.discount,
                                    gae_lambda=agent.gae_lambda, normalize=agent.normalize_advantages)  # fmt: skip
    data = batch.flat()
    data["advantages"] = torch.as_tensor(estimates, device=batch.reward.device)
    data["returns"] = torch.as_tensor(returns, device=batch.reward.device)
    data["old_log_prob"] = old_log_prob
    return data


def baseline_loss(agent: Any, data: Data, reference: Any = None) -> torch.Tensor:
    """Half the mean squared error of V(s) against the returns, plus the baseline's weight penalties."""
    states, internals, _ = split(data)
    values = state_values(agent, states, internals)
    return 0.5 * (values - data["returns"]).pow(2).mean() + agent.baseline.regularization_loss()


def regularized(agent: Any, loss: torch.Tensor, params: Any) -> torch.Tensor:
    """``loss`` plus the policy's weight penalties, minus the entropy bonus ``entropy_regularization * H``."""
    loss = loss + agent.policy.regularization_loss()
    if agent.entropy_regularization:
        loss = loss - agent.entropy_regularization * agent.policy.entropy(params).mean()
    return loss


def surrogate_loss(agent: Any, data: Data, clipping: float | None) -> torch.Tensor:
    """The likelihood-ratio surrogate of PPO and TRPO, ``-mean(min(ratio * A, clip(ratio, 1-eps, 1+eps) * A))``
    (no clipping without ``clipping``), with ``ratio = pi(a|s) / pi_old(a|s)``; regularized."""
    states, internals, actions = split(data)
    params, _, _ = agent.policy(states, internals)
    ratio = torch.exp(agent.policy.log_prob(params, actions) - data["old_log_prob"])
    surrogate = ratio * data["advantages"]
    if clipping is not None:
        surrogate = torch.min(surrogate, torch.clamp(ratio, 1.0 - clipping, 1.0 + clipping) * data["advantages"])
    return regularized(agent, -surrogate.mean(), params)


def statistics(agent: Any, data: Data, clipping: float | None = None) -> dict[str, float]:
    """What an update reports: entropy, the approximate KL from pi_old, the clip fraction, the baseline loss."""
    with torch.no_grad():
        states, internals, actions = split(data)
        params, _, _ = agent.policy(states, internals)
        log_ratio = agent.policy.log_prob(params, actions) - data["old_log_prob"]
        info = {
            "entropy": float(agent.policy.entropy(params).mean()),
            "approx_kl": float(((log_ratio.exp() - 1) - log_ratio).mean()),
        }  # learning rates: the summarizer reads them from the optimizers
        if clipping is not None:
            info["clip_fraction"] = float(((log_ratio.exp() - 1).abs() > clipping).float().mean())
        if agent.baseline is not None:
            info["baseline_loss"] = float(baseline_loss(agent, data))
    return info


def default_capacity(update_mode: dict | None) -> int:
    """A latest memory's default room: one batch with margin. 1000 steps per episode for episode batches; for
    timesteps and sequences, four times what is staged before an update (a batch, its windows' extra rows, the
    frequency, the first update), and at least 1024 rows, so that batched acting over many environments fits."""
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
