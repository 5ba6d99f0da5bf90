"""Deep Q-learning from Demonstrations (Hester et al. 2018, "Deep Q-learning from Demonstrations").

Double DQN (always on) plus a separate memory of expert demonstrations (``import_demonstrations``). The online
network Q(s, a; theta) is the policy (Q-values off its categorical heads, as in every Q agent: ``q_learning.py``),
the target network Q(s, a; theta^-) a frozen copy that follows it every ``target_sync_frequency`` timesteps. The TD
loss J_DQ is half the squared error (or the Huber loss, ``huber_loss``) of Q(s, a; theta) against the double-DQN
target
    y = r + gamma * [terminal != 1] * Q(s', argmax_a' Q(s', a'; theta); theta^-).
Updates on demonstrations minimize J_DQ plus ``supervised_weight`` (lambda) times the large-margin classification
loss of the paper's eq. (2),
    J_E(Q) = max_a [ Q(s, a) + l(a_E, a) ] - Q(s, a_E),   l(a_E, a) = expert_margin if a != a_E else 0,
which pushes the expert's action a margin above every other (the paper's n-step loss is left out, and its L2 loss
is the network's weight penalties). ``pretrain(steps)`` runs that many demonstration updates before any
interaction (the paper's pre-training phase); afterwards every online update on the replay memory is followed by
one on ``demo_batch_size = demo_sampling_ratio * batch_size / (1 - demo_sampling_ratio)`` demonstrations, so
demonstrations make up ``demo_sampling_ratio`` of the transitions the agent learns from (2018's scheme); each step
takes the mean over its own batch, so one demonstration moves the parameters as much as ``batch_size /
demo_batch_size`` online transitions (4 at the default ratio). 2018 squared J_E and
averaged it over action elements; here it is the paper's (unsquared) margin loss.
"""

from __future__ import annotations

from typing import Any

import torch

from torchforce.agents.config import DQFDConfig
from torchforce.agents.q_learning import QLearningAgent
from torchforce.agents.state import check_module_states
from torchforce.agents.td_errors import TDErrors, prioritize, weighted
from torchforce.agents.transitions import FlatBatch, Transitions, group
from torchforce.agents.value_specs import q_values
from torchforce.core.losses import large_margin
from torchforce.core.memories import build_memory
from torchforce.core.networks.network import penalized
from torchforce.core.optimizers import Info
from torchforce.core.td import greedy_values, per_instance, q_regression, td_targets
from torchforce.spec import SpecError, expect_int


class DQFDAgent(QLearningAgent):
    """Deep Q-learning from Demonstrations (Hester et al. 2018): double DQN on bool and int actions that also
    learns from a separate memory of expert demonstrations, adding to their TD loss a large-margin loss that
    lifts the expert's action above every other; ``pretrain`` learns from them alone before any interaction.

    Options: see ``DQFDConfig``.
    """

    name = "dqfd"
    losses = ("_loss", "_demo_loss")
    unit_reason = "DQfD learns from single transitions sampled from its memories"

    def __init__(
        self, states: Any, actions: Any, network: Any = None, *, config: DQFDConfig | None = None, **options: Any
    ) -> None:
        config = DQFDConfig.resolve(config, options)
        super().__init__(states, actions, network, config=config, double_q_model=True)  # DQfD is double DQN
        self.td_errors = TDErrors()
        self.expert_margin = config.expert_margin
        self.supervised_weight = config.supervised_weight
        # the demonstration memory, demo_sampling_ratio of what each update learns from
        ratio, batch_size = config.demo_sampling_ratio, self.update_mode.batch_size
        self.demo_batch_size = int(ratio * batch_size / (1.0 - ratio))
        if self.demo_batch_size < 1:
            raise SpecError(
                "demo_sampling_ratio",
                f"gives no demonstrations per batch of {batch_size}",
                got=ratio,
                hint="Raise it, or update_mode.batch_size.",
            )
        capacity = expect_int(config.demo_memory_capacity, "demo_memory_capacity", minimum=self.demo_batch_size)
        self.demo_memory = build_memory(
            {"type": "replay", "capacity": capacity}, self.fields, rng=self.rng.spawn(1)[0], path="demo_memory_capacity"
        )
        # pre-training counts updates, not timesteps: the target follows as often, in updates, as when online
        self.pretrain_sync = max(1, self.target_sync.sync_frequency // self.update_mode.frequency)
        self.pretrained = 0  # pre-training updates so far
        self._finish(network=network)
        self._load_on_start()

    # ------------------------------------------------------------------ demonstrations

    def import_demonstrations(self, demonstrations: Any) -> None:
        """Put expert demonstrations into the demonstration memory: a list of dicts, or a dict of lists, with
        ``states``, ``actions``, ``terminal`` and ``reward``, as ``import_experience`` takes them."""
        if self.acting_only:
            self._refuse_learning("import_demonstrations()")
        self._import_into(
            self.demo_memory, demonstrations, what="demonstration memory", capacity="demo_memory_capacity"
        )

    def pretrain(self, steps: int) -> dict[str, float]:
        """``steps`` updates on demonstrations alone (TD loss plus the large-margin loss), before interacting;
        the target network follows every ``target_sync_frequency / update_mode.frequency`` of them."""
        steps = expect_int(steps, "steps", minimum=0)
        if self.acting_only:
            self._refuse_learning("pretrain()")
        if steps and len(self.demo_memory) == 0:
            raise RuntimeError("pretrain() needs demonstrations: call import_demonstrations() first")
        self._set_training(True)
        info: Info = {}
        for _ in range(steps):
            info = self._demo_update()
            self.pretrained += 1
            if self.pretrained % self.pretrain_sync == 0:
                self.target_sync.apply()
        return {key: float(value) for key, value in info.items()}  # the last update's, read once

    def _demo_update(self) -> Info:
        batch = self._transitions(self.demo_memory.retrieve_timesteps(self.demo_batch_size))
        info = self.optimizer.step(self._demo_loss, batch.flat())
        return {"demo_loss": info.get("loss", 0.0)}

    # ------------------------------------------------------------------ updates

    def _update(self, batch: Transitions) -> Info:
        # |TD errors| of the whole batch before the step: prioritized replay's priorities
        info, td_error = self.td_errors.step(self.optimizer, self._loss, batch.flat())
        prioritize(self, batch, td_error)
        report = {"loss": info.get("loss", 0.0)}
        if len(self.demo_memory):
            report.update(self._demo_update())
        # theta^- follows theta every target_sync_frequency timesteps
        self.target_sync.sync(self.update_timestep)
        return report

    # ------------------------------------------------------------------ the losses, J(Q) = J_DQ(Q) + lambda J_E(Q)

    def _td_loss(self, data: FlatBatch) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        """J_DQ per instance, the double-DQN TD loss, with the policy's parameters and Q(s, .; theta); the |TD
        errors| go to ``td_errors``."""
        states, internals, actions = group(data, "states"), group(data, "internals"), group(data, "actions")
        next_states, next_internals = group(data, "next_states"), group(data, "next_internals")
        params, _, _ = self.policy(states, internals)
        q = {name: q_values(head, params[name]) for name, head in self.policy.heads.items()}

        # double-DQN TD target: y = r + gamma [terminal != 1] Q(s', argmax_a' Q(s', a'; theta); theta^-)
        with torch.no_grad():
            target_params, _, _ = self.target(next_states, next_internals)
            online_params, _, _ = self.policy(next_states, next_internals)
            y = {}
            for name, head in self.target.heads.items():
                online_q = q_values(self.policy.heads[name], online_params[name])
                next_values = greedy_values(q_values(head, target_params[name]), online_q)
                y[name] = td_targets(data["reward"], data["terminal"], next_values, self.discount)

        # the regression of Q(s, a; theta) onto y: half the squared TD error, or the Huber loss
        j_dq, td_error = q_regression(q, actions, y, self.huber_loss)
        self.td_errors.record(data, td_error)
        return j_dq, params, q

    def _loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        """The loss on the agent's own experience: J_DQ, importance-weighted for prioritized replay."""
        j_dq, params, _ = self._td_loss(data)
        return self._regularized(weighted(j_dq, data).mean(), params)

    def _demo_loss(self, data: FlatBatch, reference: Any = None) -> torch.Tensor:
        """The loss on demonstrations: J_DQ plus ``supervised_weight`` times the large-margin J_E."""
        j_dq, params, q = self._td_loss(data)
        # large-margin supervised loss, eq. (2): J_E = max_a [Q(s, a) + l(a_E, a)] - Q(s, a_E), the expert's
        # action a_E a margin above every other
        actions = group(data, "actions")
        j_e = torch.stack([per_instance(large_margin(q[name], actions[name], self.expert_margin)) for name in q])
        return self._regularized((j_dq + self.supervised_weight * j_e.mean(dim=0)).mean(), params)

    def _regularized(self, loss: torch.Tensor, params: Any) -> torch.Tensor:
        """``loss`` plus the weight penalties, minus the entropy bonus of softmax(Q)."""
        loss = penalized(loss, self.policy)
        if self.entropy_regularization:
            loss = loss - self.entropy_regularization * self.policy.entropy(params).mean()
        return loss

    # ------------------------------------------------------------------ saving

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "demo_memory": self.demo_memory.state_dict(), "pretrained": self.pretrained}

    def load_state_dict(self, state: dict[str, Any], *, for_acting: bool = False) -> None:
        check_module_states(self.trainable_modules(), state["modules"])  # another network fails before any change
        if not for_acting:  # the demonstrations, as the memory, only learning reads
            self.demo_memory.load_state_dict(state["demo_memory"])  # so does a capacity mismatch
        super().load_state_dict(state, for_acting=for_acting)
        self.pretrained = int(state["pretrained"])
