"""DQN n-step: Q-learning on the returns of whole episodes instead of one-step targets (docs/tensorforce-0.4.md, DQN
n-step).

The online network Q(s, a; theta) is the policy (Q-values off its categorical heads, as in every Q agent:
``q_learning.py``), the target network Q(s, a; theta^-) a frozen copy that follows it every
``target_sync_frequency`` timesteps. Each update takes the latest ``update_mode.batch_size`` episodes and regresses
Q(s_t, a_t; theta) onto
    R_t = r_t + gamma r_{t+1} + ... + gamma^(m-1) r_{t+m-1} + gamma^m V'(s_{t+m})
where the sum runs to the episode's end (2018's semantics: m reaches the end of the episode, V' = 0 after a true
terminal) or, with ``horizon`` n, over at most n steps (the 2018 return op's ``horizon``). V'(s) =
Q(s, argmax_a Q(s, a; theta or theta^-); theta^-) is the target network's value, a* chosen by the online network with
``double_q_model``; unlike 2018 it also bootstraps where an episode was cut by a time limit (terminal 2), not only
at the end of the batch. The loss is half the squared error R_t - Q(s_t, a_t; theta), or the Huber loss.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchforce.agents.config import DQNNstepConfig
from torchforce.agents.q_learning import QLearningAgent
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.value_specs import q_values
from torchforce.core.networks.network import penalized
from torchforce.core.optimizers import Info
from torchforce.core.returns import discounted_returns, n_step_returns
from torchforce.core.td import greedy_values, q_regression


class DQNNstepAgent(QLearningAgent):
    """DQN n-step: Q-learning of bool and int actions on the discounted returns of whole episodes (or of
    ``horizon`` steps), bootstrapped with a target network's value (the n-step returns of Mnih et al. 2016,
    "Asynchronous Methods for Deep Reinforcement Learning", on the latest episodes rather than a replay memory);
    it acts greedily in Q, exploring only through ``actions_exploration``.

    Options: see ``DQNNstepConfig``.
    """

    name = "dqn_nstep"
    losses = ("_loss",)
    on_policy = True  # learns from whole episodes, staged per row
    default_update_mode = {"unit": "episodes", "batch_size": 10}
    default_memory = "latest"
    unit_reason = "DQN n-step learns from the returns of whole episodes"

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: DQNNstepConfig | None = None, **options: Any
    ) -> None:
        config = DQNNstepConfig.resolve(config, options)
        super().__init__(states, actions, network, config=config, double_q_model=config.double_q_model)
        self.horizon = config.horizon
        self._finish(network=network)
        self._load_on_start()

    # ------------------------------------------------------------------ the update

    def _update(self, batch: Transitions) -> Info:
        data = batch.flat()
        data.update({f"returns/{name}": value for name, value in self._targets(batch).items()})
        info = self.optimizer.step(self._loss, data)
        # theta^- follows theta every target_sync_frequency timesteps
        self.target_sync.sync(self.update_timestep)
        return {"loss": info.get("loss", 0.0)}

    @torch.no_grad()
    def _targets(self, batch: Transitions) -> dict[str, torch.Tensor]:
        """R_t per action: n-step or episode returns, bootstrapped with the target network's V' (see above)."""
        # V'(s_{t+1}) = Q(s_{t+1}, a*; theta^-), a* = argmax_a Q(s_{t+1}, a; theta or theta^-)
        target_params, _, _ = self.target(batch.next_states, batch.next_internals)
        online_params = self.policy(batch.next_states, batch.next_internals)[0] if self.double_q_model else None
        reward, terminal = batch.reward.cpu().numpy(), batch.terminal.cpu().numpy()
        returns = {}
        for name, head in self.target.heads.items():
            online_q = None if online_params is None else q_values(self.policy.heads[name], online_params[name])
            next_values = greedy_values(q_values(head, target_params[name]), online_q)
            # the returns R_t of each action element, over the episode or the horizon
            columns = next_values.reshape(len(next_values), -1).cpu().numpy()
            width = columns.shape[1]
            rewards, terminals = np.repeat(reward[:, None], width, 1), np.repeat(terminal[:, None], width, 1)
            if self.horizon is None:
                result = discounted_returns(rewards, terminals, self.discount, columns)
            else:
                result = n_step_returns(rewards, terminals, self.discount, self.horizon, columns)
            returns[name] = torch.as_tensor(result.reshape(next_values.shape), device=next_values.device)
        return returns

    def _loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        params, _, _ = self.policy(group(data, "states"), group(data, "internals"))
        q = {name: q_values(head, params[name]) for name, head in self.policy.heads.items()}  # Q(s, .; theta)
        # the regression of Q(s_t, a_t; theta) onto R_t: half the squared error, or the Huber loss
        loss_per_instance, _ = q_regression(q, group(data, "actions"), group(data, "returns"), self.huber_loss)
        # weight penalties, and the entropy bonus of softmax(Q)
        loss = penalized(loss_per_instance.mean(), self.policy)
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss
