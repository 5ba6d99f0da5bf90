"""Deep Q-Network (Mnih et al. 2015) with optional double Q-learning (van Hasselt et al. 2016).

The online network Q(s, a; theta) is the policy: the raw outputs of each action's categorical head are its Q-values
(two, False and True, for a bool action; see ``value_specs``). The target network Q(s, a; theta^-) is a frozen copy
that follows theta every ``target_sync_frequency`` timesteps (a copy, or ``target_update_weight`` of the way). From
a batch of transitions (s, a, r, terminal, s') sampled from the replay memory, the TD target is
    y = r + gamma * [terminal != 1] * Q(s', argmax_a' Q(s', a'; theta or theta^-); theta^-)
(the online network theta picks a' when ``double_q_model`` is set), and the loss is half the squared TD error
y - Q(s, a; theta) (its gradient is the TD error), or the Huber loss with threshold ``huber_loss`` (the gradient
clipped to [-h, h]), per action element. Prioritized replay's importance-sampling weights multiply each
transition's loss, and its priorities are the |TD errors|. Unlike 2018, terminal transitions are trained (their
target is the reward) and time-limit truncations (terminal 2) bootstrap from the next state. With a recurrent network
Q(s', .) starts from the recurrent state acting on s left (the transition's next internals), as in 0.4.

Acting is greedy in Q, as in every Q agent (``q_learning.py``).
"""

from __future__ import annotations

from typing import Any

import torch

from torchforce.agents.config import DQNConfig
from torchforce.agents.q_learning import QLearningAgent
from torchforce.agents.td_errors import TDErrors, prioritize, weighted
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.value_specs import q_values
from torchforce.core.networks.network import penalized
from torchforce.core.optimizers import Info
from torchforce.core.td import greedy_values, q_regression, td_targets


class DQNAgent(QLearningAgent):
    """Deep Q-network (Mnih et al. 2015, "Human-level control through deep reinforcement learning"): Q(s, a) of
    bool and int actions regressed onto one-step TD targets from a target network, on transitions sampled from a
    replay memory, optionally with double Q-learning (van Hasselt et al. 2016) and a Huber loss; it acts greedily
    in Q, exploring only through ``actions_exploration``.

    Options: see ``DQNConfig``.
    """

    name = "dqn"
    losses = ("_loss",)
    unit_reason = "DQN learns from single transitions sampled from its replay memory"

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: DQNConfig | None = None, **options: Any
    ) -> None:
        config = DQNConfig.resolve(config, options)
        super().__init__(states, actions, network, config=config, double_q_model=config.double_q_model)
        self.td_errors = TDErrors()
        self._finish(network=network)
        self._load_on_start()

    # ------------------------------------------------------------------ the update

    def _update(self, batch: Transitions) -> Info:
        # |TD errors| of the whole batch before the step, for the statistics and prioritized replay's priorities
        info, td_error = self.td_errors.step(self.optimizer, self._loss, batch.flat())
        prioritize(self, batch, td_error)
        # theta^- follows theta every target_sync_frequency timesteps
        self.target_sync.sync(self.update_timestep)
        return {"loss": info.get("loss", 0.0), "td_error": td_error.mean()}

    def _loss(self, batch: FlatBatch, reference: Any = None) -> torch.Tensor:
        states, internals, actions = group(batch, "states"), group(batch, "internals"), group(batch, "actions")
        next_states, next_internals = group(batch, "next_states"), group(batch, "next_internals")
        params, _, _ = self.policy(states, internals)
        q = {name: q_values(head, params[name]) for name, head in self.policy.heads.items()}  # Q(s, .; theta)

        # TD target: y = r + gamma [terminal != 1] Q(s', a*; theta^-), a* = argmax_a' Q(s', a'; theta or theta^-)
        with torch.no_grad():
            target_params, _, _ = self.target(next_states, next_internals)
            online_params = self.policy(next_states, next_internals)[0] if self.double_q_model else None
            y = {}
            for name, head in self.target.heads.items():
                online_q = None if online_params is None else q_values(self.policy.heads[name], online_params[name])
                next_values = greedy_values(q_values(head, target_params[name]), online_q)
                y[name] = td_targets(batch["reward"], batch["terminal"], next_values, self.discount)

        # the regression of Q(s, a; theta) onto y: half the squared TD error, or the Huber loss
        loss_per_instance, td_error = q_regression(q, actions, y, self.huber_loss)
        self.td_errors.record(batch, td_error)
        loss_per_instance = weighted(loss_per_instance, batch)  # prioritized replay's importance-sampling weights

        # weight penalties, and the entropy bonus of softmax(Q)
        loss = penalized(loss_per_instance.mean(), self.policy)
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss
