"""DQN n-step: Q-learning on the returns of whole episodes instead of one-step targets (reference §6).

Each update takes the latest ``update_mode.batch_size`` episodes and regresses Q(s_t, a_t) onto
    R_t = r_t + gamma r_{t+1} + ... + gamma^(m-1) r_{t+m-1} + gamma^m V'(s_{t+m})
where the sum runs to the episode's end (2018's semantics: m reaches the end of the episode, V' = 0 after a true
terminal) or, with ``horizon`` n, over at most n steps (the 2018 return op's ``horizon``). V'(s) = Q_target(s, a*)
is the target network's value, a* chosen by the online network with ``double_q_model``; unlike 2018 it also
bootstraps where an episode was cut by a time limit (terminal 2), not only at the end of the batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchforce.agents import q_learning
from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import DQNNstepConfig
from torchforce.agents.transitions import Transitions, group
from torchforce.core.returns import discounted_returns, n_step_returns


class DQNNstepAgent(LearningAgent):
    """DQN n-step: Q-learning of bool and int actions on the discounted returns of whole episodes (or of
    ``horizon`` steps), bootstrapped with a target network's value (the n-step returns of Mnih et al. 2016,
    "Asynchronous Methods for Deep Reinforcement Learning", on the latest episodes rather than a replay memory);
    it acts greedily in Q, exploring only through ``actions_exploration``.

    Options: see ``DQNNstepConfig``.
    """

    name = "dqn_nstep"

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: DQNNstepConfig | None = None, **options: Any
    ) -> None:
        config = DQNNstepConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        q_learning.setup(
            self, network=network, config=config, on_policy=True,
            default_update_mode={"unit": "episodes", "batch_size": 10},
            default_memory=q_learning.default_memory("latest", config.update_mode, batch_size=10), unit="episodes",
            unit_reason="DQN n-step learns from the returns of whole episodes",
        )  # fmt: skip
        self.horizon = config.horizon
        self._record_spec(network=network)
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return q_learning.modules(self)

    def optimizers(self) -> dict[str, Any]:
        return q_learning.optimizers(self)

    def _act_deterministically(self, deterministic: bool) -> bool:
        return True  # greedy in Q, as 2018's Q models (q_learning's docstring); epsilon explores

    def _update(self, batch: Transitions) -> dict[str, float]:
        data = batch.flat()
        data.update({f"returns/{name}": value for name, value in self._targets(batch).items()})
        info = self.optimizer.step(self._loss, data)
        self.target_sync.sync(self.timestep)
        return {"loss": float(info.get("loss", 0.0))}

    def _targets(self, batch: Transitions) -> dict[str, torch.Tensor]:
        """R_t per action: n-step or episode returns, bootstrapped with the target network's V' (see above)."""
        values = q_learning.next_values(self, batch.next_states, batch.internals)
        reward, terminal = batch.reward.cpu().numpy(), batch.terminal.cpu().numpy()
        returns = {}
        for name, value in values.items():
            columns = value.reshape(len(value), -1).cpu().numpy()  # one column per action element
            width = columns.shape[1]
            rewards, terminals = np.repeat(reward[:, None], width, 1), np.repeat(terminal[:, None], width, 1)
            if self.horizon is None:
                result = discounted_returns(rewards, terminals, self.discount, columns)
            else:
                result = n_step_returns(rewards, terminals, self.discount, self.horizon, columns)
            returns[name] = torch.as_tensor(result.reshape(value.shape), device=value.device)
        return returns

    def _loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        params, _, _ = self.policy(group(data, "states"), group(data, "internals"))
        loss_per_instance, _ = q_learning.regression_loss(self, params, group(data, "actions"), group(data, "returns"))
        return q_learning.regularized(self, loss_per_instance.mean(), params)
