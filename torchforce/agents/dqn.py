"""Deep Q-Network (Mnih et al. 2015) with optional double Q-learning (van Hasselt et al. 2016).

The TD target, with the target network's parameters theta^-:
    y = r + gamma * (1 - done) * Q(s', argmax_a' Q(s', a'; theta or theta^-); theta^-)
(the online network picks a' when ``double_q_model`` is set). The loss is half the squared TD error (its gradient is
the TD error), or the Huber loss with threshold ``huber_loss`` (the gradient clipped to [-h, h]), per action element;
prioritized replay's importance-sampling weights multiply each transition's loss, and its priorities are the |TD
errors|. Q-values are the raw outputs of each int action's categorical head. Unlike 2018, terminal transitions are
trained (their target is the reward) and time-limit truncations (terminal 2) bootstrap from the next state.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from torchforce.agents.agent import Agent
from torchforce.agents.transitions import Transitions, group
from torchforce.core.losses import huber, l2
from torchforce.core.optimizers import Synchronization, build_optimizer
from torchforce.spec import SpecError, expect_bool, expect_float, expect_int


class DQNAgent(Agent):
    name = "dqn"
    learning = True

    def __init__(
        self,
        states: Any,
        actions: Any,
        network: Any,
        *,
        batched_observe: bool = True,
        batching_capacity: int = 1000,
        scope: str = "dqn",
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
        seed: int | None = None,
    ) -> None:
        super().__init__(states, actions, batched_observe=batched_observe, batching_capacity=batching_capacity,
                         scope=scope, device=device, saver=saver, summarizer=summarizer, execution=execution,
                         seed=seed)  # fmt: skip
        for name, action in self.actions_spec.items():
            if action.type != "int":
                raise SpecError(
                    f"actions.{name}.type",
                    "DQN picks actions by argmax over Q-values, so only int actions work",
                    got=action.type,
                    expected='"int"',
                    hint="Use ppo for bool and float actions.",
                )
        batch_size = update_mode.get("batch_size", 32) if isinstance(update_mode, dict) else 32
        self._setup_learning(
            network=network, update_mode=update_mode, memory=memory, states_preprocessing=states_preprocessing,
            actions_exploration=actions_exploration, reward_preprocessing=reward_preprocessing,
            distributions=distributions, variable_noise=variable_noise, on_policy=False,
            default_update_mode={"unit": "timesteps", "batch_size": 32, "frequency": 4},
            default_memory={"type": "replay", "capacity": 1000 * batch_size if isinstance(batch_size, int) else 32_000},
        )  # fmt: skip
        if self.update_mode.unit != "timesteps":
            raise SpecError("update_mode.unit", "DQN learns from single transitions sampled from its replay memory",
                            got=self.update_mode.unit, expected='"timesteps"')  # fmt: skip
        self.discount = expect_float(discount, "discount", minimum=0.0, maximum=1.0)
        self.entropy_regularization = expect_float(
            entropy_regularization, "entropy_regularization", minimum=0.0, allow_none=True
        )
        self.double_q_model = expect_bool(double_q_model, "double_q_model")
        self.huber_loss = expect_float(huber_loss, "huber_loss", minimum=0.0, allow_none=True) or None  # 0: none
        self.optimizer = build_optimizer(optimizer or {"type": "adam", "learning_rate": 1e-3},
                                         list(self.policy.parameters()), path="optimizer")  # fmt: skip
        self.target = copy.deepcopy(self.policy).requires_grad_(False)
        update_weight = expect_float(target_update_weight, "target_update_weight")
        if not 0.0 < update_weight <= 1.0:  # a weight of 0 would never move the target
            raise SpecError(
                "target_update_weight",
                "out of range",
                got=target_update_weight,
                expected="a number in (0, 1]",
                hint="1 copies the network, 0.01 is a slow soft update.",
            )
        self.target_sync = Synchronization(
            list(self.policy.parameters()), list(self.target.parameters()),
            sync_frequency=expect_int(target_sync_frequency, "target_sync_frequency", minimum=1),
            update_weight=update_weight,
        )  # fmt: skip
        self._full_batch: dict[str, torch.Tensor] | None = None
        self._td_error: torch.Tensor | None = None
        self._remember(locals())
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return {"policy": self.policy, "target": self.target}

    def optimizers(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer, "target_sync": self.target_sync}

    def _act_deterministically(self, deterministic: bool) -> bool:
        return True  # greedy in Q; exploration (epsilon) does the exploring

    def _loss(self, batch: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        states, internals, actions = group(batch, "states"), group(batch, "internals"), group(batch, "actions")
        params, _, _ = self.policy(states, internals)
        with torch.no_grad():
            next_states = group(batch, "next_states")
            target_params, _, _ = self.target(next_states, internals)
            online_params = self.policy(next_states, internals)[0] if self.double_q_model else None
        losses, errors = [], []
        for name, head in self.policy.heads.items():
            q_taken = head.q_values(params[name]).gather(-1, actions[name].unsqueeze(-1)).squeeze(-1)
            # TD target: the online network picks a' for double Q, else the target network does
            with torch.no_grad():
                target_q = self.target.heads[name].q_values(target_params[name])
                online_q = None if online_params is None else head.q_values(online_params[name])
                target = td_targets(batch["reward"], batch["terminal"], target_q, self.discount, online_q)
            delta = target - q_taken
            # squared or Huber loss, averaged over the elements of the action
            loss = huber(delta, self.huber_loss) if self.huber_loss is not None else l2(delta)
            losses.append(loss.reshape(len(loss), -1).mean(dim=1))
            errors.append(delta.detach().abs().reshape(len(delta), -1).mean(dim=1))
        loss_per_instance = torch.stack(losses).mean(dim=0)
        if batch is self._full_batch and self._td_error is None:  # the whole batch, before any step
            self._td_error = torch.stack(errors).mean(dim=0)
        # importance-sampling weights of prioritized replay
        if "weights" in batch:
            loss_per_instance = loss_per_instance * batch["weights"]
        loss = loss_per_instance.mean() + self.policy.regularization_loss()
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss

    def _update(self, batch: Transitions) -> dict[str, float]:
        # |TD errors| of the whole batch before the step, for the statistics and prioritized replay's priorities
        self._full_batch, self._td_error = batch.flat(), None
        info = self.optimizer.step(self._loss, self._full_batch)
        if self._td_error is None:  # a subsampling optimizer never saw the whole batch: measure it after the step
            with torch.no_grad():
                self._loss(self._full_batch)
        td_error, self._full_batch = self._td_error, None
        if batch.indices is not None and hasattr(self.memory, "update_priorities"):
            self.memory.update_priorities(batch.indices, td_error.cpu().numpy())
        self.target_sync.sync(self.timestep)
        return {"loss": float(info.get("loss", 0.0)), "td_error": float(td_error.mean())}


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
    best = (target_q if online_q is None else online_q).argmax(dim=-1, keepdim=True)
    next_value = target_q.gather(-1, best).squeeze(-1)
    extra = (1,) * (next_value.dim() - 1)
    not_done = (terminal != 1).to(next_value.dtype).view(-1, *extra)
    return reward.to(next_value.dtype).view(-1, *extra) + discount * not_done * next_value
