"""What the policy-gradient agents (VPG, PPO, TRPO) share: the on-policy setup with an optional state-value baseline,
and the first phase of each update, the advantages.

Not an agent of its own (no registry name). Each subclass holds its own objective and update loop: VPG's
-log pi * A in ``vpg.py``, PPO's clipped surrogate and minibatch steps in ``ppo.py``, TRPO's trust-region step in
``trpo.py``.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from torchforce.agents.agent import LearningAgent
from torchforce.agents.batches import STATE_DTYPES, Batch
from torchforce.agents.config import PolicyGradientConfig
from torchforce.agents.transfer import to_host
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.update_mode import default_latest_capacity
from torchforce.core.baselines import build_pg_baseline, regularization_loss, shared_state_values, state_values
from torchforce.core.memories.latest import Latest
from torchforce.core.modes import follows_training_mode
from torchforce.core.networks.network import has_penalties
from torchforce.core.objectives import policy_statistics, value_loss
from torchforce.core.optimizers import Optimizer
from torchforce.core.returns import advantage_tensors
from torchforce.spec import SpecError

Data = dict[str, torch.Tensor]
Forward = tuple[dict[str, Any], dict[str, torch.Tensor], torch.Tensor]  # Policy.forward: params, internals, embedding
PASS_BYTES = 4 * 2**20  # at most the states of one chunk of a batch's pass without gradients: _collecting_policy
# from this many bytes of states a row (images), log pi_old(a|s) and V(s) are kept from acting: see _acted_fields
ACTED_BYTES = 4096


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
        self._acted_value = config.baseline_mode == "network"  # V(s) from the embedding acting computes anyway
        # on-policy: by default 10 whole episodes per update, from a latest memory
        memory = {"type": "latest", "capacity": default_latest_capacity(config.update_mode)}
        self._setup_learning(
            network=network,
            config=config,
            on_policy=True,
            default_memory=memory,
            default_update_mode={"unit": "episodes", "batch_size": 10},
        )
        if self.update_mode.unit == "timesteps" and not isinstance(self.memory, Latest):
            # a replay memory hands out random rows of other episodes, which returns and GAE would chain together
            given = config.memory
            raise SpecError(
                "memory.type",
                f"{self.name.upper()} updating on timesteps learns from the most recent ones",
                got=given.get("type") if isinstance(given, dict) else given,
                expected='"latest"',
                hint='Use {"type": "latest"}, or update_mode.unit "episodes".',
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
        self._records_acting = (
            bool(self._acted_fields())
            and not self.variable_noise  # acting's parameters are not the policy's
            and (self.baseline is None or self.baseline_mode == "network")  # else V(s) is a network of its own
            and not follows_training_mode(*self.trainable_modules().values())  # acting and updates would differ
        )

    # ------------------------------------------------------------------ log pi_old and V kept from acting

    def _acted_fields(self) -> dict[str, np.dtype]:
        """For large states (images: ``ACTED_BYTES`` a row and more), each row keeps what acting computed for it,
        so that an update needs no pass of the collecting policy over its batch (as SB3 keeps its rollout's log
        probabilities and values): log pi(a|s) of the action taken, V(s) in "network" baseline mode, and the
        ``version`` of the parameters acting had (``Policy.version``). Rows acted with other parameters than the
        update starts from (an earlier update's, a parameter server's), and rows without (imported experience, a
        checkpoint of older code) run through the policy as before. For small states that pass is one cheap
        batched call, cheaper than the work added to every act."""
        row_bytes = sum(spec.size * STATE_DTYPES[spec.type].itemsize for spec in self.processed_states.values())
        if row_bytes < ACTED_BYTES:
            return {}
        fields: dict[str, np.dtype] = {"log_prob": np.dtype(np.float32), "version": np.dtype(np.int64)}
        if self._acted_value:
            fields["value"] = np.dtype(np.float32)
        return fields

    def _acted(self, actions: dict[str, np.ndarray], kept: Batch | None) -> Batch:
        if kept is None:  # exploration may have changed the actions: log pi of the ones taken
            taken = {name: np.asarray(value, self.fields[f"actions/{name}"].dtype) for name, value in actions.items()}
            with torch.inference_mode():
                (kept,) = to_host(self._acted_tensors(self._acting_forward, self.as_tensors(taken)))
        rows = len(kept["log_prob"])
        return {**kept, "version": np.full(rows, self.policy.version, dtype=np.int64)}

    def _acted_tensors(self, forward: list[Any], actions: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        params, embedding = forward
        tensors = {"log_prob": self.policy.log_prob(params, actions)}
        if self.baseline is not None and self.baseline_mode is not None:
            tensors["value"] = shared_state_values(self.baseline, self.baseline_mode, {}, embedding)
        return tensors

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
        (before the update): kept from acting where the row was acted with the current parameters (see
        ``_acted_fields``), else from a pass over the rows (``_pass``)."""
        version = batch.acted.get("version")
        if not self._records_acting or version is None:
            return self._pass(batch.states, batch.internals, batch.actions)
        log_prob = batch.acted["log_prob"].clone()
        values = batch.acted["value"].clone() if self.baseline is not None else None
        stale = (version != self.policy.version).nonzero().squeeze(1)
        if len(stale):
            rows = [
                {name: value.index_select(0, stale) for name, value in group.items()}
                for group in (batch.states, batch.internals, batch.actions)
            ]
            log_prob[stale], computed = self._pass(*rows)
            if values is not None and computed is not None:
                values[stale] = computed
        return log_prob, values

    def _pass(self, states: Data, internals: Data, actions: Data) -> tuple[torch.Tensor, torch.Tensor | None]:
        """log pi(a|s) and, with a baseline, V(s) of rows, computed by the policy without gradients. Large states
        (images) run through the network a chunk of rows at a time, each chunk's states at most PASS_BYTES: faster
        than one pass over all rows (a chunk's activations stay in the cache) and far less memory; small states
        (vectors) run in one chunk, the whole batch."""
        count = len(next(iter(actions.values())))
        row_bytes = sum(state.shape[1:].numel() * state.element_size() for state in states.values()) or 1
        size = max(1, PASS_BYTES // row_bytes)
        log_probs, values = [], []
        for start in range(0, max(count, 1), size):
            rows = slice(start, start + size)
            chunk = {name: state[rows] for name, state in states.items()}
            params, _, embedding = self.policy(chunk, {name: internal[rows] for name, internal in internals.items()})
            log_probs.append(self.policy.log_prob(params, {name: action[rows] for name, action in actions.items()}))
            if self.baseline is not None and self.baseline_mode is not None:
                values.append(shared_state_values(self.baseline, self.baseline_mode, chunk, embedding))
        return torch.cat(log_probs), torch.cat(values) if values else None

    def _next_values(self, batch: Transitions, values: torch.Tensor) -> torch.Tensor:
        """V(s_{t+1}) of each row, given V(s_t) of each. A row followed by its own next step (the next row's states
        are its next states: a memory's episodes are contiguous) takes that row's value; the baseline runs only on
        the other rows' next states (a segment's last step, cut for an update), and on none of an episode's end,
        whose next value counts for nothing. A recurrent network's values depend on its internals: all rows run."""
        baseline, mode = self.baseline, self.baseline_mode
        assert baseline is not None and mode is not None  # called only for an agent with a baseline
        if batch.internals:
            return state_values(baseline, mode, self.policy, batch.next_states, batch.next_internals)
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
        loss = value_loss(values, returns)
        return loss + regularization_loss(self.baseline) if has_penalties(self.baseline) else loss

    def _statistics(
        self, data: Data, clipping: float | None = None, forward: Forward | None = None
    ) -> dict[str, float]:
        """Entropy and approximate KL of the updated policy on the batch (with a ``clipping`` epsilon, the clip
        fraction), and the baseline's loss; ``forward``: the policy's output on the batch, if already at hand.
        Nothing for an update that is not reported: they are a pass of the network over the whole batch."""
        if not self.reporting:
            return {}
        with self._report_pass():
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
