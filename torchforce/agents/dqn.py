"""Deep Q-Network (Mnih et al. 2015) with optional double Q-learning (van Hasselt et al. 2016).

The TD target, with the target network's parameters theta^-:
    y = r + gamma * (1 - done) * Q(s', argmax_a' Q(s', a'; theta or theta^-); theta^-)
(the online network picks a' when ``double_q_model`` is set). The loss is half the squared TD error (its gradient is
the TD error), or the Huber loss with threshold ``huber_loss`` (the gradient clipped to [-h, h]), per action element;
prioritized replay's importance-sampling weights multiply each transition's loss, and its priorities are the |TD
errors|. Q-values are the raw outputs of each action's categorical head (two, False and True, for a bool action).
Acting is greedy in Q, with ``actions_exploration`` on top, as in 2018. Unlike 2018, terminal transitions are
trained (their target is the reward) and time-limit truncations (terminal 2) bootstrap from the next state.
"""

from __future__ import annotations

from typing import Any

import torch

from torchforce.agents import q_learning
from torchforce.agents.agent import LearningAgent, NonFiniteError
from torchforce.agents.config import DQNConfig
from torchforce.agents.transitions import Transitions, group


class DQNAgent(LearningAgent):
    """Deep Q-network (Mnih et al. 2015, "Human-level control through deep reinforcement learning"): Q(s, a) of
    bool and int actions regressed onto one-step TD targets from a target network, on transitions sampled from a
    replay memory, optionally with double Q-learning (van Hasselt et al. 2016) and a Huber loss; it acts greedily
    in Q, exploring only through ``actions_exploration``.

    Options: see ``DQNConfig``.
    """

    name = "dqn"

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: DQNConfig | None = None, **options: Any
    ) -> None:
        config = DQNConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        q_learning.setup(
            self, network=network, config=config, on_policy=False,
            default_update_mode={"unit": "timesteps", "batch_size": 32, "frequency": 4},
            default_memory=q_learning.default_memory("replay", config.update_mode), unit="timesteps",
            unit_reason="DQN learns from single transitions sampled from its replay memory",
        )  # fmt: skip
        self._full_batch: dict[str, torch.Tensor] | None = None
        self._td_error: torch.Tensor | None = None
        self._record_spec(network=network)
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return q_learning.modules(self)

    def optimizers(self) -> dict[str, Any]:
        return q_learning.optimizers(self)

    def _act_deterministically(self, deterministic: bool) -> bool:
        return True  # greedy in Q, as 2018's Q models (q_learning's docstring); epsilon explores

    def _loss(self, batch: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        states, internals, actions = group(batch, "states"), group(batch, "internals"), group(batch, "actions")
        params, _, _ = self.policy(states, internals)
        # TD targets y = r + gamma [terminal != 1] Q_target(s', a*): a* by the online network for double Q
        values = q_learning.next_values(self, group(batch, "next_states"), internals)
        not_done = (batch["terminal"] != 1).float()
        targets = {name: bootstrap(batch["reward"], not_done, value, self.discount) for name, value in values.items()}
        loss_per_instance, td_error = q_learning.regression_loss(self, params, actions, targets, batch.get("weights"))
        if batch is self._full_batch and self._td_error is None:  # the whole batch, before any step
            self._td_error = td_error
        return q_learning.regularized(self, loss_per_instance.mean(), params)

    def _update(self, batch: Transitions) -> dict[str, float]:
        # |TD errors| of the whole batch before the step, for the statistics and prioritized replay's priorities
        self._full_batch, self._td_error = batch.flat(), None
        info = self.optimizer.step(self._loss, self._full_batch)
        if self._td_error is None:  # a subsampling optimizer never saw the whole batch: measure it after the step
            with torch.no_grad():
                self._loss(self._full_batch)
        td_error, self._full_batch = self._td_error, None
        if batch.indices is not None and hasattr(self.memory, "update_priorities"):
            if not bool(torch.isfinite(td_error).all()):  # NaN priorities would make every later draw NaN
                raise NonFiniteError(
                    f"{self.name} agent: the TD errors of update {self.updates + 1} are NaN or infinite, so they "
                    "cannot be prioritized replay's priorities (a diverged update?). Try a lower learning rate, "
                    "gradient clipping (clip_grad_norm in the optimizer spec) or a huber_loss, and check that "
                    "rewards and states are finite."
                )
            self.memory.update_priorities(batch.indices, td_error.cpu().numpy())
        self.target_sync.sync(self.timestep)
        return {"loss": float(info.get("loss", 0.0)), "td_error": float(td_error.mean())}


def bootstrap(reward: torch.Tensor, not_done: torch.Tensor, next_value: torch.Tensor, discount: float) -> torch.Tensor:
    """``r + gamma * not_done * next_value`` with ``reward``/``not_done`` ``[B]`` broadcast over the action's
    elements ``[B, *shape]``."""
    extra = (1,) * (next_value.dim() - 1)
    return (
        reward.to(next_value.dtype).view(-1, *extra)
        + discount * not_done.to(next_value.dtype).view(-1, *extra) * next_value
    )


def td_targets(
    reward: torch.Tensor,
    terminal: torch.Tensor,
    target_q: torch.Tensor,
    discount: float,
    online_q: torch.Tensor | None = None,
) -> torch.Tensor:
    """``y = r + γ · [terminal ≠ 1] · Q_target(s', a*)`` with ``a* = argmax_a Q(s', a)``.

    ``target_q`` and ``online_q`` are the Q-values of the next states ``[B, *shape, num_actions]``; ``a*`` is picked
    by ``online_q`` (double Q-learning, van Hasselt et al. 2016) or, without it, by ``target_q`` (Mnih et al. 2015).
    Terminal 1 rows are true ends (``y = r``); terminal 2 rows (time limits) bootstrap. Returns ``[B, *shape]``.
    """
    return bootstrap(reward, (terminal != 1), q_learning.greedy_values(target_q, online_q), discount)
