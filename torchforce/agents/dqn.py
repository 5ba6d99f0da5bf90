"""Deep Q-Network (Mnih et al. 2015) with optional double Q-learning (van Hasselt et al. 2016).

The TD target, with the target network's parameters theta^-:
    y = r + gamma * (1 - done) * Q(s', argmax_a' Q(s', a'; theta or theta^-); theta^-)
(the online network picks a' when ``double_q_model`` is set). The loss is the squared TD error, or the Huber loss with
threshold ``huber_loss``. Q-values are the raw outputs of each int action's categorical head. Unlike 2018, terminal
transitions are trained (their target is the reward) and time-limit truncations bootstrap from the next state.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from torchforce.agents.agent import Agent, Transitions, group
from torchforce.core.losses import huber
from torchforce.core.optimizers import Synchronization, build_optimizer
from torchforce.core.policy import require_action_types
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
        require_action_types(self.actions_spec, ("int",), "DQN")
        batch_size = update_mode.get("batch_size", 32) if isinstance(update_mode, dict) else 32
        self._setup_learning(
            network=network, update_mode=update_mode, memory=memory, states_preprocessing=states_preprocessing,
            actions_exploration=actions_exploration, reward_preprocessing=reward_preprocessing,
            distributions=distributions, variable_noise=variable_noise, on_policy=False,
            default_update_mode={"unit": "timesteps", "batch_size": 32, "frequency": 4},
            default_memory={"type": "replay", "capacity": 1000 * batch_size if isinstance(batch_size, int) else 32_000},
        )  # fmt: skip
        if self.update_mode.unit != "timesteps":
            raise SpecError(
                "update_mode.unit", "DQN updates on timesteps", got=self.update_mode.unit, expected='"timesteps"'
            )
        self.discount = expect_float(discount, "discount", minimum=0.0, maximum=1.0)
        self.entropy_regularization = expect_float(
            entropy_regularization, "entropy_regularization", minimum=0.0, allow_none=True
        )
        self.double_q_model = expect_bool(double_q_model, "double_q_model")
        self.huber_loss = expect_float(huber_loss, "huber_loss", minimum=0.0, allow_none=True) or None  # 0: none
        self.optimizer = build_optimizer(optimizer or {"type": "adam", "learning_rate": 1e-3},
                                         list(self.policy.parameters()), path="optimizer")  # fmt: skip
        self.target = copy.deepcopy(self.policy).requires_grad_(False)
        self.target_sync = Synchronization(
            list(self.policy.parameters()), list(self.target.parameters()),
            sync_frequency=expect_int(target_sync_frequency, "target_sync_frequency", minimum=1),
            update_weight=expect_float(target_update_weight, "target_update_weight", minimum=0.0, maximum=1.0),
        )  # fmt: skip
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
            online_params = self.policy(next_states, internals)[0] if self.double_q_model else target_params
        not_done = (batch["terminal"] != 1).float()
        losses, errors = [], []
        for name, head in self.policy.heads.items():
            q = head.q_values(params[name])
            q_taken = q.gather(-1, actions[name].unsqueeze(-1)).squeeze(-1)
            # TD target
            with torch.no_grad():
                next_q = self.target.heads[name].q_values(target_params[name])
                best = self.policy.heads[name].q_values(online_params[name]).argmax(-1)
                next_value = next_q.gather(-1, best.unsqueeze(-1)).squeeze(-1)
                extra = (1,) * (next_value.dim() - 1)
                td_target = batch["reward"].view(-1, *extra) + self.discount * not_done.view(-1, *extra) * next_value
            delta = td_target - q_taken
            loss = huber(delta, self.huber_loss) if self.huber_loss is not None else 0.5 * delta.pow(2)
            losses.append(loss.reshape(len(loss), -1).mean(dim=1))
            errors.append(delta.detach().abs().reshape(len(delta), -1).mean(dim=1))
        loss_per_instance = torch.stack(losses).mean(dim=0)
        self._td_error = torch.stack(errors).mean(dim=0)
        if "weights" in batch:
            loss_per_instance = loss_per_instance * batch["weights"]
        loss = loss_per_instance.mean() + self.policy.regularization_loss()
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss

    def _update(self, batch: Transitions) -> dict[str, float]:
        info = self.optimizer.step(self._loss, batch.flat())
        if batch.indices is not None and hasattr(self.memory, "update_priorities"):
            self.memory.update_priorities(batch.indices, self._td_error.cpu().numpy())
        self.target_sync.sync(self.timestep)
        return {"loss": float(info.get("loss", 0.0)), "td_error": float(self._td_error.mean())}
