"""Acting with an epsilon exploration drawn before the policy's pass (``Agent._explores_first``): where every row's
actions are replaced at random the pass is left out, as SB3's DQN leaves its network out, and everything else is
as it was: the same actions of the same types, the same generator states, the same parameters after updates."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent

STATES = {"type": "float", "shape": (3,)}
INT = {"type": "int", "num_actions": 3}
BOOL = {"type": "bool"}
TWO = {"move": {"type": "int", "num_actions": 4, "shape": (2,)}, "fire": BOOL}
ANNEAL = {"type": "epsilon_anneal", "initial_epsilon": 1.0, "final_epsilon": 0.0, "timesteps": 120}


def dqn(actions, exploration=ANNEAL, **options):
    spec = {
        "type": "dqn",
        "network": [{"type": "dense", "size": 8}],
        "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4, "first_update": 16},
        "memory": {"type": "replay", "capacity": 200},
        "actions_exploration": exploration,
        "seed": 0,
        **options,
    }
    return create_agent(spec, states=STATES, actions=actions)


def counting_passes(agent):
    """The number of the policy's acting passes so far, in torch or in NumPy (``Policy.on_host``: these small dense
    policies act there), as a list that grows by one per pass."""
    passes = []
    policy = agent.policy
    act_forward, on_host = policy.act_forward, policy.on_host

    def counted(*arguments):
        passes.append(1)
        return act_forward(*arguments)

    def counted_on_host(*arguments):
        host = on_host(*arguments)
        if host is None:
            return None

        def act(*arguments):
            passes.append(1)
            return host.act(*arguments)

        return SimpleNamespace(act=act)

    policy.act_forward, policy.on_host = counted, counted_on_host
    return passes


def play(agent, acts, rows):
    """``acts`` steps of ``rows`` rows of random states; returns the actions of each step."""
    generator = np.random.default_rng(1)
    taken = []
    for step in range(acts):
        states = generator.normal(size=(rows, 3)).astype(np.float32)
        taken.append(agent.act(states))
        agent.observe(terminal=np.full(rows, int(step % 7 == 6)), reward=generator.normal(size=rows))
    return taken


def assert_same_actions(first, second):
    for one, other in zip(first, second, strict=True):
        one, other = (one, other) if isinstance(one, dict) else ({"": one}, {"": other})
        for name, values in one.items():
            assert values.dtype == other[name].dtype
            np.testing.assert_array_equal(values, other[name])


@pytest.mark.parametrize("actions", [INT, BOOL, TWO], ids=["int", "bool", "two actions"])
@pytest.mark.parametrize("rows", [1, 4])
def test_rows_replaced_at_random_leave_the_policy_out_and_nothing_else_changes(actions, rows):
    skipping, passing = dqn(actions), dqn(actions)
    passing._explore_first = False  # explore after every pass, as before
    skipped, passed = counting_passes(skipping), counting_passes(passing)
    taken = play(skipping, 60, rows), play(passing, 60, rows)
    assert_same_actions(*taken)
    assert len(passed) == 60 and 0 < len(skipped) < 60  # epsilon falls from 1: at first every row is random
    assert skipping.updates == passing.updates > 0
    for name, value in passing.get_parameters().items():
        assert torch.equal(skipping.get_parameters()[name], value)
    assert skipping.rng.bit_generator.state == passing.rng.bit_generator.state


def test_at_epsilon_1_the_policy_never_acts_and_at_0_always():
    always = dqn(INT, {"type": "constant", "constant": 1.0}, update_mode={"unit": "timesteps", "batch_size": 4})
    never = dqn(INT, {"type": "constant", "constant": 0.0})
    passes = counting_passes(always), counting_passes(never)
    play(always, 20, 2), play(never, 20, 2)
    assert (len(passes[0]), len(passes[1])) == (0, 20)
    always.act(np.zeros(3, np.float32), deterministic=True, independent=True)  # greedy acting: the policy's
    assert len(passes[0]) == 1


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "dqn", "network": [{"type": "dense", "size": 8}, {"type": "internal_lstm", "size": 4}]},
        {"type": "dqn", "network": [{"type": "dense", "size": 8}], "variable_noise": 0.1},
        {"type": "dqn", "network": [{"type": "dense", "size": 8}], "actions_exploration": {"move": ANNEAL}},
        {"type": "ppo", "network": [{"type": "dense", "size": 8}]},  # sampling draws from torch's generator
    ],
    ids=["recurrent state", "variable noise", "an action without exploration", "a stochastic policy"],
)
def test_the_policy_acts_wherever_its_pass_matters(spec):
    agent = create_agent(
        {"actions_exploration": {"type": "constant", "constant": 1.0}, **spec, "seed": 0}, states=STATES, actions=TWO
    )
    passes = counting_passes(agent)
    play(agent, 5, 2)
    assert not agent._explores_first() and len(passes) == 5
