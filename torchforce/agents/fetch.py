"""``act(..., fetch_tensors=[...])``: the tensors behind an action, by name, as 0.4's named tensors were.

The names an agent offers (``Agent.fetchable_tensors()`` lists them):
- ``embedding``: what the network hands the action heads, ``[B, size]``;
- a name that an ``output`` layer of the network registered, and ``internals/<name>``: the recurrent state the
  action was computed from;
- ``<action>/<parameter>``: the parameters of the action's distribution, ``logits`` and ``probabilities``
  (categorical; for a bool action ``logits`` of P(True) and ``probabilities`` P(True)), ``mean`` and ``log_stddev``
  (gaussian), ``alpha`` and ``beta`` (beta), ``mu`` (deterministic);
- ``<action>/q_values`` (Q-learning agents: Q(s, a) for every a) and ``<action>/state_value`` (their max_a Q(s, a));
- ``state_value``: V(s) of a policy-gradient agent's baseline.
With one action, the action names work without the ``<action>/`` prefix too (0.4's ``logits``). 0.4 also called a
categorical head's logsumexp of the logits its ``state_value``; here the name means the agent's own value estimate.

Everything is computed again from the (preprocessed) states and recurrent state the action came from, only when
asked for, under ``torch.inference_mode``; arrays come back with the action's batch layout (no row dimension for
one unbatched state).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

# the names of a distribution head's parameters, in the order of its params tuple
PARAMETERS = {
    "Categorical": ("logits",),
    "Bernoulli": ("logits",),
    "Gaussian": ("mean", "log_stddev"),
    "Beta": ("alpha", "beta"),
    "Deterministic": ("mu",),
}


def _action_names(agent: Any, action: str, head: Any) -> list[str]:
    names = list(PARAMETERS.get(type(head).__name__, ()))
    if hasattr(head, "probabilities"):
        names.append("probabilities")
    if _is_q_agent(agent) and hasattr(head, "q_values"):
        names += ["q_values", "state_value"]
    return names


def _is_q_agent(agent: Any) -> bool:
    from torchforce.agents.q_learning import QLearningAgent  # the agents import this module

    return isinstance(agent, QLearningAgent)


def fetchable(agent: Any) -> list[str]:
    """Every name ``act(..., fetch_tensors=...)`` accepts for ``agent``, sorted."""
    if not agent.learning:
        return []
    network = agent.policy.network
    names = {"embedding", *(f"internals/{name}" for name in network.internals)}
    names.update(getattr(network, "output_names", lambda: [])())
    if getattr(agent, "baseline", None) is not None:
        names.add("state_value")
    single = len(agent.policy.heads) == 1
    for action, head in agent.policy.heads.items():
        for name in _action_names(agent, action, head):
            names.add(f"{action}/{name}")
            if single and name not in names:
                names.add(name)
    return sorted(names)


def check_fetch(agent: Any, names: Any) -> list[str]:
    """``names`` as a list, every one of them one that ``agent`` offers (else a ValueError listing those)."""
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise TypeError(f"fetch_tensors is a list of names, got {names!r}")
    offered = fetchable(agent)
    unknown = [name for name in names if name not in offered]
    if unknown:
        raise ValueError(
            f"the {agent.name} agent has no tensor named {', '.join(map(repr, unknown))}; it offers: "
            + (", ".join(offered) if offered else "none (it has no model)")
        )
    return list(names)


@torch.inference_mode()
def fetch(
    agent: Any, states: dict[str, np.ndarray], internals: dict[str, torch.Tensor], names: list[str], batched: bool
) -> dict[str, np.ndarray]:
    """The tensors ``names`` for the preprocessed ``states`` and the recurrent state ``internals`` they were acted
    on from, as numpy arrays (the first row only when ``batched`` is false)."""
    if not names:
        return {}
    policy = agent.policy
    tensors = agent.as_tensors(states)
    embedding, _ = policy.network(tensors, internals)
    values: dict[str, torch.Tensor] = {"embedding": embedding}
    values.update({f"internals/{name}": value for name, value in internals.items()})
    outputs = getattr(policy.network, "named_outputs", None)
    if outputs is not None and any(name in policy.network.output_names() for name in names):
        values.update(outputs(tensors, internals))
    if "state_value" in names and getattr(agent, "baseline", None) is not None:
        from torchforce.core.baselines import state_values

        values["state_value"] = state_values(agent.baseline, agent.baseline_mode, policy, tensors, internals)
    single = len(policy.heads) == 1
    for action, head in policy.heads.items():
        params = head(embedding)
        found = dict(zip(PARAMETERS.get(type(head).__name__, ()), params, strict=False))
        if hasattr(head, "probabilities"):
            found["probabilities"] = head.probabilities(params)
        if _is_q_agent(agent) and hasattr(head, "q_values"):
            found["q_values"] = head.q_values(params)
            found["state_value"] = found["q_values"].max(dim=-1).values
        for name, value in found.items():
            values[f"{action}/{name}"] = value
            if single:
                values.setdefault(name, value)
    result = {name: values[name].detach().cpu().numpy() for name in names}
    return result if batched else {name: value[0] for name, value in result.items()}
