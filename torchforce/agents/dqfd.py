"""Deep Q-learning from Demonstrations (Hester et al. 2018, "Deep Q-learning from Demonstrations").

Double DQN (always on) plus a separate memory of expert demonstrations (``import_demonstrations``). Updates on
demonstrations minimize the double-DQN TD loss plus ``supervised_weight`` times the large-margin classification
loss of the paper's eq. (2),
    J_E(Q) = max_a [ Q(s, a) + l(a_E, a) ] - Q(s, a_E),   l(a_E, a) = expert_margin if a != a_E else 0,
which pushes the expert's action a margin above every other. ``pretrain(steps)`` runs that many demonstration
updates before any interaction (the paper's pre-training phase); afterwards every online update on the replay
memory is followed by one on ``demo_batch_size = demo_sampling_ratio * batch_size / (1 - demo_sampling_ratio)``
demonstrations, so demonstrations make up ``demo_sampling_ratio`` of what the agent learns from (2018's
scheme). 2018 squared J_E and averaged it over action elements; here it is the paper's (unsquared) margin loss.
"""

from __future__ import annotations

from typing import Any

import torch

from torchforce.agents import q_learning
from torchforce.agents.agent import LearningAgent
from torchforce.agents.config import DQFDConfig
from torchforce.agents.dqn import bootstrap
from torchforce.agents.transitions import Transitions, group
from torchforce.core.memories import build_memory
from torchforce.spec import SpecError, expect_int


class DQFDAgent(LearningAgent):
    """Deep Q-learning from Demonstrations (Hester et al. 2018): double DQN on bool and int actions that also
    learns from a separate memory of expert demonstrations, adding to their TD loss a large-margin loss that
    lifts the expert's action above every other; ``pretrain`` learns from them alone before any interaction.

    Options: see ``DQFDConfig``.
    """

    name = "dqfd"

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: DQFDConfig | None = None, **options: Any
    ) -> None:
        config = DQFDConfig.resolve(config, options)
        super().__init__(states, actions, config=config)
        q_learning.setup(
            self, network=network, config=config, on_policy=False,
            default_update_mode={"unit": "timesteps", "batch_size": 32, "frequency": 4},
            default_memory=q_learning.default_memory("replay", config.update_mode), unit="timesteps",
            unit_reason="DQfD learns from single transitions sampled from its memories",
        )  # fmt: skip
        self.expert_margin = config.expert_margin
        self.supervised_weight = config.supervised_weight
        ratio, batch_size = config.demo_sampling_ratio, self.update_mode.batch_size
        self.demo_batch_size = int(ratio * batch_size / (1.0 - ratio))
        if self.demo_batch_size < 1:
            raise SpecError("demo_sampling_ratio", f"gives no demonstrations per batch of {batch_size}",
                            got=ratio, hint="Raise it, or update_mode.batch_size.")  # fmt: skip
        capacity = expect_int(config.demo_memory_capacity, "demo_memory_capacity", minimum=self.demo_batch_size)
        self.demo_memory = build_memory({"type": "replay", "capacity": capacity}, self.fields,
                                        rng=self.rng.spawn(1)[0], path="demo_memory_capacity")  # fmt: skip
        # pre-training counts updates, not timesteps: the target follows as often, in updates, as when online
        self.pretrain_sync = max(1, self.target_sync.sync_frequency // self.update_mode.frequency)
        self.pretrained = 0  # pre-training updates so far
        self._record_spec(network=network)
        self._load_on_start()

    def trainable_modules(self) -> dict[str, torch.nn.Module]:
        return q_learning.modules(self)

    def optimizers(self) -> dict[str, Any]:
        return q_learning.optimizers(self)

    def _act_deterministically(self, deterministic: bool) -> bool:
        return True  # greedy in Q, as 2018's Q models (q_learning's docstring); epsilon explores

    # ------------------------------------------------------------------ demonstrations

    def import_demonstrations(self, demonstrations: Any) -> None:
        """Put expert demonstrations into the demonstration memory: a list of dicts, or a dict of lists, with
        ``states``, ``actions``, ``terminal`` and ``reward``, as ``import_experience`` takes them."""
        self._import_into(self.demo_memory, demonstrations, what="demonstration memory",
                          capacity="demo_memory_capacity")  # fmt: skip

    def pretrain(self, steps: int) -> dict[str, float]:
        """``steps`` updates on demonstrations alone (TD loss plus the large-margin loss), before interacting;
        the target network follows every ``target_sync_frequency / update_mode.frequency`` of them."""
        steps = expect_int(steps, "steps", minimum=0)
        if steps and len(self.demo_memory) == 0:
            raise RuntimeError("pretrain() needs demonstrations: call import_demonstrations() first")
        self._set_training(True)
        info: dict[str, float] = {}
        for _ in range(steps):
            info = self._demo_update()
            self.pretrained += 1
            if self.pretrained % self.pretrain_sync == 0:
                self.target_sync.apply()
        return info

    def _demo_update(self) -> dict[str, float]:
        batch = self._transitions(self.demo_memory.retrieve_timesteps(self.demo_batch_size))
        info = self.optimizer.step(self._demo_loss, batch.flat())
        return {"demo_loss": float(info.get("loss", 0.0))}

    # ------------------------------------------------------------------ updates

    def _update(self, batch: Transitions) -> dict[str, float]:
        info = self.optimizer.step(self._loss, batch.flat())
        report = {"loss": float(info.get("loss", 0.0))}
        if len(self.demo_memory):
            report.update(self._demo_update())
        self.target_sync.sync(self.timestep)
        return report

    def _td_loss(self, data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        """The double-DQN TD loss per instance, with the policy's parameters and the actions taken."""
        states, internals, actions = group(data, "states"), group(data, "internals"), group(data, "actions")
        params, _, _ = self.policy(states, internals)
        values = q_learning.next_values(self, group(data, "next_states"), internals)
        not_done = (data["terminal"] != 1).float()
        targets = {name: bootstrap(data["reward"], not_done, value, self.discount) for name, value in values.items()}
        loss_per_instance, _ = q_learning.regression_loss(self, params, actions, targets, data.get("weights"))
        return loss_per_instance, params, actions

    def _loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        loss_per_instance, params, _ = self._td_loss(data)
        return q_learning.regularized(self, loss_per_instance.mean(), params)

    def _demo_loss(self, data: dict[str, torch.Tensor], reference: Any = None) -> torch.Tensor:
        loss_per_instance, params, actions = self._td_loss(data)
        # large-margin supervised loss, eq. (2): the expert's action a margin above every other
        margins = []
        for name, head in self.policy.heads.items():
            q = head.q_values(params[name])
            expert = actions[name].long().unsqueeze(-1)  # a bool action's False/True: 0/1
            margin = torch.full_like(q, self.expert_margin).scatter(-1, expert, 0.0)
            j_e = (q + margin).max(dim=-1).values - q.gather(-1, expert).squeeze(-1)
            margins.append(j_e.reshape(len(j_e), -1).mean(dim=1))
        supervised = torch.stack(margins).mean(dim=0)
        return q_learning.regularized(self, (loss_per_instance + self.supervised_weight * supervised).mean(), params)

    # ------------------------------------------------------------------ saving

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "demo_memory": self.demo_memory.state_dict(), "pretrained": self.pretrained}

    def _load_state(self, state: dict[str, Any]) -> None:
        self.demo_memory.load_state_dict(state["demo_memory"])
        super()._load_state(state)
        self.pretrained = int(state["pretrained"])
