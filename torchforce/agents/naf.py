"""Normalized Advantage Functions (Gu et al. 2016, "Continuous Deep Q-Learning with Model-based Acceleration").

Q-learning for float actions with a Q function whose maximum is known in closed form, eqs. (2)-(4):
    Q(s, a) = V(s) + A(s, a),   A(s, a) = -1/2 (a - mu(s))^T P(s) (a - mu(s)),   P(s) = L(s) L(s)^T
with L(s) lower-triangular (a positive, exponentiated diagonal), so the greedy action is mu(s) and the greedy
value V(s). mu is the policy's deterministic head (tanh-scaled into the bounds of a bounded action); V and the
entries of L are Linear heads on the same embedding (``AdvantageHeads``). The TD target is
    y = r + gamma * [terminal != 1] * V'(s')
from the target network's V head (2018 used the log-density of its Gaussian instead: a quirk, fixed), with the
squared or Huber (``huber_loss``) error; the target network (policy and heads) follows slowly,
``target_update_weight`` of the way every ``target_sync_frequency`` timesteps. Algorithm 1's I updates per step, each
on a minibatch of its own, are ``update_mode.updates`` (default 1); the target follows once a timestep, not after
each of them as in the paper (scale ``target_update_weight`` by I for the paper's pace). All float actions form one
vector a
of their flattened elements. ``double_q_model`` is accepted for 2018 configs and changes nothing: V' needs no
argmax. Float actions only, as in 2018: bool and int actions are the DQN agents' (a SpecError points there).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import torch
from torch import Tensor, nn

from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import NAFConfig
from torchforce.agents.td_errors import TDErrors, prioritize, weighted
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.value_specs import deterministic_heads, replay_capacity
from torchforce.core.explorations import check_random_timesteps
from torchforce.core.losses import huber, l2
from torchforce.core.networks.network import penalized
from torchforce.core.optimizers import Info, Synchronization, build_optimizer
from torchforce.core.td import td_targets
from torchforce.spec import SpecError
from torchforce.spec.checks import expect_elements


class AdvantageHeads(nn.Module):
    """V(s) and the lower-triangular L(s) of an ``n``-element action, from the policy's embedding."""

    rows: Tensor  # buffers (register_buffer): the lower triangle's indices, and where it is on the diagonal
    columns: Tensor
    diagonal: Tensor

    def __init__(self, embedding_size: int, n: int) -> None:
        super().__init__()
        self.n = n
        self.value = nn.Linear(embedding_size, 1)
        self.entries = nn.Linear(embedding_size, n * (n + 1) // 2)
        rows, columns = torch.tril_indices(n, n)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("columns", columns, persistent=False)
        self.register_buffer("diagonal", rows == columns, persistent=False)

    def forward(self, embedding: Tensor) -> tuple[Tensor, Tensor]:
        """``V [B]`` and ``L [B, n, n]``."""
        entries = self.entries(embedding)
        entries = torch.where(self.diagonal, entries.clamp(max=10.0).exp(), entries)  # a positive diagonal
        lower = embedding.new_zeros(embedding.shape[0], self.n, self.n)
        lower[:, self.rows, self.columns] = entries
        return self.value(embedding).squeeze(-1), lower


def quadratic_advantage(lower: Tensor, action: Tensor, mu: Tensor) -> Tensor:
    """``-1/2 (a - mu)^T L L^T (a - mu)`` per row: ``L [B, n, n]``, ``a`` and ``mu`` ``[B, n]``."""
    projected = torch.bmm(lower.transpose(1, 2), (action - mu).unsqueeze(-1)).squeeze(-1)  # L^T (a - mu)
    return -0.5 * projected.square().sum(dim=1)


class NAFAgent(LearningAgent):
    """Normalized Advantage Functions (Gu et al. 2016, "Continuous Deep Q-Learning with Model-based
    Acceleration"): Q-learning for float actions with a Q-function quadratic in the action, V(s) minus a
    positive-definite form around mu(s), so the greedy action mu(s) and its value V(s) are known in closed form; TD
    targets come from a target network's V, on transitions sampled from a replay memory.

    Options: see ``NAFConfig``.
    """

    name = "naf"
    losses = ("_loss",)

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: NAFConfig | None = None, **options: Any
    ) -> None:
        config = NAFConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        self.td_errors = TDErrors()
        for name, action in self.actions_spec.items():
            if action.type != "float":
                raise SpecError(
                    f"actions.{name}.type",
                    "NAF's Q-function is quadratic in float actions, maximal "
                    "at the mu(s) it acts with, so only float actions work",
                    got=action.type,
                    expected='"float"',
                    hint="Use dqn, dqn_nstep or dqfd for bool and int actions.",
                )
        heads = deterministic_heads(self.actions_spec, config.distributions)
        self._setup_learning(
            network=network,
            config=dataclasses.replace(config, distributions=heads),
            on_policy=False,
            default_update_mode={"unit": "timesteps", "batch_size": 32, "frequency": 4},  # 2018's, as the Q agents'
            default_memory={"type": "replay", "capacity": replay_capacity(config.update_mode, 32)},
            unit_reason="NAF learns from single transitions sampled from its replay memory",
        )
        self.discount = config.discount
        self.random_timesteps = check_random_timesteps(config.random_timesteps, self.actions_spec)
        self.huber_loss = config.huber_loss or None  # 0: none; double_q_model changes nothing (V' needs no argmax)
        size = sum(math.prod(action.shape) for action in self.actions_spec.values())
        # L(s) has n (n + 1) / 2 entries: the head's weights grow with the square of the action's size
        expect_elements(
            self.policy.network.output_size * size * (size + 1) // 2,
            "actions",
            f"the weights of L(s) for {size} action elements",
            hint="NAF suits small float actions.",
        )
        # V(s) and L(s) on the policy's embedding; mu(s) is the policy's deterministic head
        self.heads = AdvantageHeads(self.policy.network.output_size, size).to(self.device)
        self.optimizer = build_optimizer(
            config.optimizer or {"type": "adam", "learning_rate": 1e-3},
            [*self.policy.parameters(), *self.heads.parameters()],
            path="optimizer",
            without_kl="the naf agent",
        )
        # the target network Q': a frozen copy that follows slowly
        self.target = copy.deepcopy(self.policy).requires_grad_(False)
        self.target_heads = copy.deepcopy(self.heads).requires_grad_(False)
        self.target_sync = Synchronization(
            [*self.policy.parameters(), *self.heads.parameters()],
            [*self.target.parameters(), *self.target_heads.parameters()],
            sync_frequency=config.target_sync_frequency,
            update_weight=config.target_update_weight,
        )
        self._finish(network=network)
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy, "heads": self.heads, "target": self.target, "target_heads": self.target_heads}

    def optimizers(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer, "target_sync": self.target_sync}

    def _flat(self, actions: dict[str, Tensor]) -> Tensor:
        rows = next(iter(actions.values())).shape[0]
        return torch.cat([actions[name].reshape(rows, -1).float() for name in self.actions_spec], dim=1)

    def q_values(self, states: dict[str, Tensor], internals: dict[str, Tensor], actions: dict[str, Tensor]) -> Tensor:
        """Q(s, a) = V(s) + A(s, a), A(s, a) = -1/2 (a - mu(s))^T P(s) (a - mu(s)), one per row."""
        params, _, embedding = self.policy(states, internals)
        value, lower = self.heads(embedding)
        mu = self._flat(self.policy.sample(params, deterministic=True))
        return value + quadratic_advantage(lower, self._flat(actions), mu)

    # ------------------------------------------------------------------ the update

    def _update(self, batch: Transitions) -> Info:
        # |TD errors| of the whole batch before the step: prioritized replay's priorities
        info, td_error = self.td_errors.step(self.optimizer, self._loss, batch.flat())
        prioritize(self, batch, td_error)
        # theta' <- tau theta + (1 - tau) theta'
        self.target_sync.sync(self.update_timestep)
        return {"loss": info.get("loss", 0.0)}

    def _loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        internals = group(data, "internals")
        # TD target: y = r + gamma [terminal != 1] V'(s'), the target network's value of the next state
        with torch.no_grad():
            _, _, next_embedding = self.target(group(data, "next_states"), group(data, "next_internals"))
            next_value, _ = self.target_heads(next_embedding)
            y = td_targets(data["reward"], data["terminal"], next_value, self.discount)
        # the regression of Q(s, a) onto y: half the squared TD error, or the Huber loss
        delta = y - self.q_values(group(data, "states"), internals, group(data, "actions"))
        self.td_errors.record(data, delta.detach().abs())
        loss = huber(delta, self.huber_loss) if self.huber_loss is not None else l2(delta)
        return penalized(weighted(loss, data).mean(), self.policy)  # importance-weighted for prioritized replay
