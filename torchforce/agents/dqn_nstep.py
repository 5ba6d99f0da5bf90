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
from torchforce.agents.transitions import Transitions, group
from torchforce.core.returns import discounted_returns, n_step_returns
from torchforce.spec import expect_int


class DQNNstepAgent(LearningAgent):
    name = "dqn_nstep"

    def __init__(
        self,
        states: Any,
        actions: Any,
        network: Any,
        *,
        batched_observe: bool = True,
        batching_capacity: int = 1000,
        scope: str = "dqn-nstep",
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
        optimizer: Any = None,
        discount: float = 0.99,
        distributions: dict | None = None,
        entropy_regularization: float | None = None,
        target_sync_frequency: int = 10000,
        target_update_weight: float = 1.0,
        double_q_model: bool = False,
        huber_loss: float | None = None,
        horizon: int | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(states, actions, batched_observe=batched_observe, batching_capacity=batching_capacity,
                         scope=scope, device=device, saver=saver, summarizer=summarizer, execution=execution,
                         seed=seed)  # fmt: skip
        q_learning.setup(
            self, network=network, update_mode=update_mode, memory=memory, states_preprocessing=states_preprocessing,
            actions_exploration=actions_exploration, reward_preprocessing=reward_preprocessing,
            distributions=distributions, variable_noise=variable_noise, on_policy=True,
            default_update_mode={"unit": "episodes", "batch_size": 10},
            default_memory=q_learning.default_memory("latest", update_mode, batch_size=10), unit="episodes",
            unit_reason="DQN n-step learns from the returns of whole episodes", optimizer=optimizer,
            discount=discount, entropy_regularization=entropy_regularization,
            target_sync_frequency=target_sync_frequency, target_update_weight=target_update_weight,
            double_q_model=double_q_model, huber_loss=huber_loss,
        )  # fmt: skip
        self.horizon = expect_int(horizon, "horizon", minimum=1, allow_none=True)
        self._remember(locals())
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
