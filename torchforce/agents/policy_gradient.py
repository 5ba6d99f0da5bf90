"""What the policy-gradient agents (VPG, PPO, TRPO) share: the on-policy setup with an optional state-value baseline,
and the first phase of each update, the advantages.

Not an agent of its own (no registry name). Each subclass holds its own objective and update loop: VPG's
-log pi * A in ``vpg.py``, PPO's clipped surrogate and minibatch steps in ``ppo.py``, TRPO's trust-region step in
``trpo.py``.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import torch
from torch import nn

from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import PolicyGradientConfig
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.update_mode import default_latest_capacity
from torchforce.core.baselines import build_pg_baseline, regularization_loss, shared_state_values, state_values
from torchforce.core.objectives import policy_statistics, value_loss
from torchforce.core.optimizers import Optimizer
from torchforce.core.returns import advantage_tensors

Data = dict[str, torch.Tensor]
Forward = tuple[dict[str, Any], dict[str, torch.Tensor], torch.Tensor]  # Policy.forward: params, internals, embedding
PASS_BYTES = 4 * 2**20  # at most the states of one chunk of a batch's pass without gradients: _collecting_policy


class PolicyGradientAgent(LearningAgent):
    """Base of VPG, PPO and TRPO: what the three share is their on-policy construction (10 whole episodes per
    update from a latest memory by default), the optional state-value baseline V(s) with its optimizer and squared
    error, the advantages A_t of each batch (returns, over the baseline, or GAE: ``core.returns.advantage_tensors``)
    and the statistics an update reports. Each subclass holds its own objective, its policy optimizer and its
    ``_update`` loop.
    """

    optimizer_key: ClassVar[str] = "optimizer"  # the policy optimizer's spec key (PPO's: "step_optimizer")
    optimizer: Optimizer
    baseline_mode: str | None  # the optional state-value baseline: all three set, or all three None
    baseline: nn.Module | None
    baseline_optimizer: Optimizer | None

    def __init__(self, states: Any, actions: Any, network: Any, *, config: PolicyGradientConfig) -> None:
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
        self.normalize_advantages = config.normalize_advantages is True  # PPO's "minibatch": in its loss
        self.entropy_regularization = config.entropy_regularization
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

    def _with_advantages(self, batch: Transitions) -> Data:
        """The batch as a flat dict plus ``advantages`` A_t, ``returns`` (the baseline's targets) and
        ``old_log_prob``, log pi_old(a_t|s_t) of the policy that collected it."""
        data = batch.flat()
        with torch.no_grad():
            old_log_prob, values = self._collecting_policy(batch)  # log pi_old(a_t|s_t) and V(s_t)
            next_values = None if values is None else self._next_values(batch, values)  # V(s_{t+1})
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

    def _collecting_policy(self, batch: Transitions) -> tuple[torch.Tensor, torch.Tensor | None]:
        """log pi_old(a_t|s_t) of each row and, with a baseline, V(s_t), from the policy as it collected the batch
        (before the update). Large states (images) run through the network a chunk of rows at a time, each chunk's
        states at most PASS_BYTES: faster than one pass over all rows (a chunk's activations stay in the cache) and
        far less memory; small states (vectors) run in one chunk, the whole batch."""
        row_bytes = sum(state.shape[1:].numel() * state.element_size() for state in batch.states.values()) or 1
        size = max(1, PASS_BYTES // row_bytes)
        log_probs, values = [], []
        for start in range(0, max(len(batch), 1), size):
            rows = slice(start, start + size)
            states = {name: state[rows] for name, state in batch.states.items()}
            internals = {name: internal[rows] for name, internal in batch.internals.items()}
            params, _, embedding = self.policy(states, internals)
            actions = {name: action[rows] for name, action in batch.actions.items()}
            log_probs.append(self.policy.log_prob(params, actions))
            if self.baseline is not None and self.baseline_mode is not None:
                values.append(shared_state_values(self.baseline, self.baseline_mode, states, embedding))
        return torch.cat(log_probs), torch.cat(values) if values else None

    def _next_values(self, batch: Transitions, values: torch.Tensor) -> torch.Tensor:
        """V(s_{t+1}) of each row, given V(s_t) of each. A row followed by its own next step (the next row's states
        are its next states: a memory's episodes are contiguous) takes that row's value; the baseline runs only on
        the other rows' next states (a segment's last step, cut for an update), and on none of an episode's end,
        whose next value counts for nothing. A recurrent network's values depend on its internals: all rows run."""
        baseline, mode = self.baseline, self.baseline_mode
        assert baseline is not None and mode is not None  # called only for an agent with a baseline
        if batch.internals:
            return state_values(baseline, mode, self.policy, batch.next_states, batch.internals)
        follows = torch.zeros(len(batch), dtype=torch.bool, device=values.device)
        if len(batch) > 1:
            same = (
                (after[:-1] == batch.states[name][1:]).reshape(len(batch) - 1, -1).all(1)
                for name, after in batch.next_states.items()
            )
            follows[:-1] = functools.reduce(torch.logical_and, same)
        next_values = torch.zeros_like(values)
        next_values[:-1] = torch.where(follows[:-1], values[1:], next_values[:-1])
        rows = ((batch.terminal != 1) & ~follows).nonzero().squeeze(1)
        if len(rows):
            states = {name: after[rows] for name, after in batch.next_states.items()}
            next_values[rows] = state_values(baseline, mode, self.policy, states, {})
        return next_values

    def _baseline_loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        baseline, mode = self.baseline, self.baseline_mode
        assert baseline is not None and mode is not None  # called only for an agent with a baseline
        states, internals = group(data, "states"), group(data, "internals")
        return self._value_loss(state_values(baseline, mode, self.policy, states, internals), data["returns"])

    def _value_loss(self, values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
        """0.5 * E_t[(V(s_t) - R_t)^2] (PPO's value loss L^VF, eq. 9), plus the baseline's weight penalties."""
        assert self.baseline is not None  # called only for an agent with a baseline
        return value_loss(values, returns) + regularization_loss(self.baseline)

    def _statistics(
        self, data: Data, clipping: float | None = None, forward: Forward | None = None
    ) -> dict[str, float]:
        """Entropy and approximate KL of the updated policy on the batch (with a ``clipping`` epsilon, the clip
        fraction), and the baseline's loss; ``forward``: the policy's output on the batch, if already at hand.
        Nothing for an update that is not reported: they are a pass of the network over the whole batch."""
        if not self.reporting:
            return {}
        with torch.no_grad():
            states, internals, actions = (group(data, key) for key in ("states", "internals", "actions"))
            params, _, embedding = self.policy(states, internals) if forward is None else forward
            info = policy_statistics(
                self.policy.log_prob(params, actions), data["old_log_prob"], self.policy.entropy(params), clipping
            )
            if self.baseline is not None and self.baseline_mode is not None:  # from the embedding at hand
                values = shared_state_values(self.baseline, self.baseline_mode, states, embedding)
                info["baseline_loss"] = float(self._value_loss(values, data["returns"]))
        return info

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy} | ({"baseline": self.baseline} if self.baseline is not None else {})

    def optimizers(self) -> dict[str, Any]:
        baseline = {"baseline_optimizer": self.baseline_optimizer} if self.baseline_optimizer is not None else {}
        return {self.optimizer_key: self.optimizer} | baseline
