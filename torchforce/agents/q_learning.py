"""What the Q-learning agents (DQN, DQN n-step, DQfD) share, as functions of the agent: their construction
(bool and int actions, a target network kept in sync, the optimizer), the target network's value of next states,
and the regression of Q(s, a) onto targets.

Q-values are the raw outputs of each action's categorical head (reference §1.9): ``num_actions`` per element of an
int action, two (False, True) per element of a bool action, which is stored as a bool. The functions read the
agent's ``policy``, ``target``, ``double_q_model``, ``huber_loss`` and ``entropy_regularization``.

Bool actions, clean rather than faithful: 2018 gave a bool action its ``bernoulli`` head, one logit l per element,
and read the Q-values off it as l + log P(True) and l + log P(False). Both then hang on the one number l, and
Q(s, False) = -softplus(-l) can never be positive, so that head cannot hold two independent Q-values (CartPole's
are near 100). Here a bool action gets a ``categorical`` head over its two values by default, and an explicit
head without Q-values (``bernoulli``) is a SpecError.

Acting, faithful: the Q agents act greedily, ``argmax_a Q(s, a)``, whether ``act`` is deterministic or not, and
only ``actions_exploration`` (epsilon-greedy) explores; ``deterministic=True`` turns that off. 2018's Q models did
the same (``QModel`` built its ``DistributionModel`` with ``requires_deterministic=True``, so the categorical head
never sampled for them; tensorforce issue #306), unlike 2018's policy-gradient models, which sample. So a Q agent
without ``actions_exploration`` never explores, then as now.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from torchforce.agents.config import DQFDConfig, DQNConfig, DQNNstepConfig
from torchforce.core.losses import huber, l2
from torchforce.core.optimizers import Synchronization, build_optimizer
from torchforce.spec import ActionSpec, SpecError, expect_dict

Data = dict[str, torch.Tensor]


def setup(
    agent: Any,
    *,
    network: Any,
    config: DQNConfig | DQNNstepConfig | DQFDConfig,
    unit: str,
    unit_reason: str,
    on_policy: bool,
    default_update_mode: dict[str, Any],
    default_memory: dict[str, Any],
) -> None:
    """What every Q-learning agent's constructor does: only bool and int actions (Q-values are per discrete
    action value), the learning setup (``Agent._setup_learning`` with ``config``, bool actions getting a
    categorical head), heads that have Q-values, ``update_mode.unit`` required to be ``unit`` (``unit_reason``
    says why), the config's options set on the agent, the optimizer, and a target network synchronized every
    ``target_sync_frequency`` timesteps (a copy, or a soft update by ``target_update_weight``)."""
    for name, action in agent.actions_spec.items():
        if action.type not in ("bool", "int"):
            raise SpecError(f"actions.{name}.type", "DQN picks actions by argmax over Q-values, so only bool and "
                            "int actions work", got=action.type, expected='"bool" or "int"',
                            hint="Use naf or ddpg for float actions, or ppo.")  # fmt: skip
    config = dataclasses.replace(config, distributions=q_value_heads(agent.actions_spec, config.distributions))
    agent._setup_learning(network=network, config=config, on_policy=on_policy,
                          default_update_mode=default_update_mode, default_memory=default_memory)  # fmt: skip
    for name, head in agent.policy.heads.items():
        if not callable(getattr(head, "q_values", None)):
            raise SpecError(f"distributions.{name}", f"a {type(head).__name__.lower()} head has no Q-values, and "
                            f"the {agent.name} agent reads its Q-values off the action's head",
                            expected='"categorical" (or leave it out)',
                            hint="A categorical head has one Q-value per action value: two for a bool "
                            "action.")  # fmt: skip
    if agent.update_mode.unit != unit:
        raise SpecError("update_mode.unit", unit_reason, got=agent.update_mode.unit, expected=f'"{unit}"')
    agent.discount = config.discount
    agent.entropy_regularization = config.entropy_regularization
    agent.double_q_model = getattr(config, "double_q_model", True)  # DQfD has no such option: always double DQN
    agent.huber_loss = config.huber_loss or None  # 0: none
    agent.optimizer = build_optimizer(config.optimizer or {"type": "adam", "learning_rate": 1e-3},
                                      list(agent.policy.parameters()), path="optimizer",
                                      without_kl=f"the {agent.name} agent")  # fmt: skip
    agent.target = copy.deepcopy(agent.policy).requires_grad_(False)
    agent.target_sync = target_synchronization(list(agent.policy.parameters()), list(agent.target.parameters()),
                                               config.target_sync_frequency,
                                               config.target_update_weight)  # fmt: skip


def q_value_heads(actions: dict[str, ActionSpec], distributions: Any) -> dict[str, Any]:
    """The ``distributions`` spec of a Q agent: a ``categorical`` head, a Q-value per action value, for every
    bool action not given one (2018 defaulted it to ``bernoulli``, see above); the rest as given."""
    specs = {} if distributions is None else expect_dict(distributions, "distributions")
    return {**{name: "categorical" for name, action in actions.items() if action.type == "bool"}, **specs}


def target_synchronization(
    source: list[torch.nn.Parameter], target: list[torch.Tensor], frequency: int, weight: float
) -> Synchronization:
    """Target parameters following ``source``: ``weight`` of the way (1: a copy) every ``frequency`` timesteps,
    the agent config's ``target_update_weight`` and ``target_sync_frequency`` (which it checks)."""
    return Synchronization(source, target, sync_frequency=frequency, update_weight=weight)


def default_memory(memory_type: str, update_mode: Any, batch_size: int = 32) -> dict[str, Any]:
    """2018's default memory of the Q agents: ``memory_type`` with room for 1000 batches."""
    size = update_mode.get("batch_size", batch_size) if isinstance(update_mode, dict) else batch_size
    return {"type": memory_type, "capacity": 1000 * size if isinstance(size, int) and size > 0 else 32_000}


def modules(agent: Any) -> dict[str, torch.nn.Module]:
    return {"policy": agent.policy, "target": agent.target}


def optimizers(agent: Any) -> dict[str, Any]:
    return {"optimizer": agent.optimizer, "target_sync": agent.target_sync}


def greedy_values(target_q: torch.Tensor, online_q: torch.Tensor | None = None) -> torch.Tensor:
    """``Q_target(s', a*)`` with ``a* = argmax_a Q(s', a)``, picked by ``online_q`` (double Q-learning, van Hasselt
    et al. 2016) or, without it, by ``target_q`` (Mnih et al. 2015). ``[B, *shape, num_actions] -> [B, *shape]``."""
    best = (target_q if online_q is None else online_q).argmax(dim=-1, keepdim=True)
    return target_q.gather(-1, best).squeeze(-1)


@torch.no_grad()
def next_values(agent: Any, next_states: Data, internals: Data) -> Data:
    """The target network's value of the next states, per action: ``greedy_values`` of its Q-values, the online
    network choosing the action with ``double_q_model``."""
    target_params, _, _ = agent.target(next_states, internals)
    online_params = agent.policy(next_states, internals)[0] if agent.double_q_model else None
    values = {}
    for name, head in agent.target.heads.items():
        online_q = None if online_params is None else agent.policy.heads[name].q_values(online_params[name])
        values[name] = greedy_values(head.q_values(target_params[name]), online_q)
    return values


def regression_loss(
    agent: Any, params: Any, actions: Data, targets: Data, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Q(s, a) regressed onto ``targets`` ``{action: [B, *shape]}``: half the squared error, or the Huber loss
    with threshold ``huber_loss``, averaged over each action's elements and over the actions; times the
    importance-sampling ``weights`` of prioritized replay. Returns the loss per instance ``[B]`` and the |TD
    error| per instance (no gradient), for prioritized replay's priorities."""
    losses, errors = [], []
    for name, head in agent.policy.heads.items():
        q_taken = head.q_values(params[name]).gather(-1, actions[name].long().unsqueeze(-1)).squeeze(-1)
        delta = targets[name] - q_taken
        loss = huber(delta, agent.huber_loss) if agent.huber_loss is not None else l2(delta)
        losses.append(loss.reshape(len(loss), -1).mean(dim=1))
        errors.append(delta.detach().abs().reshape(len(delta), -1).mean(dim=1))
    loss_per_instance = torch.stack(losses).mean(dim=0)
    if weights is not None:
        loss_per_instance = loss_per_instance * weights
    return loss_per_instance, torch.stack(errors).mean(dim=0)


def regularized(agent: Any, loss: torch.Tensor, params: Any) -> torch.Tensor:
    """``loss`` plus the policy's weight penalties, minus the entropy bonus of its Q-value softmax."""
    loss = loss + agent.policy.regularization_loss()
    if agent.entropy_regularization:
        loss = loss - agent.entropy_regularization * agent.policy.entropy(params).mean()
    return loss
