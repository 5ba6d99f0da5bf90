"""The update's hot path reads no tensor back to the host: on a GPU every such read (``float(loss)``, ``.item()``,
``.cpu()``...) waits for the device to finish its queue. An update that nobody reports (no summary due) reads what
it needs once (PPO: the rewards, terminals and values its advantages are computed from), never once per minibatch
step or per gradient step. Acting reads back once a step, the actions and what updates keep of it together
(``torchforce.agents.transfer.to_host``). Counted on the CPU by wrapping the tensor methods that read values back."""

import contextlib

import numpy as np
import pytest
import torch

from torchforce.agents import agent as agent_module
from torchforce.agents import create_agent, policy_gradient
from torchforce.environments import make

READS = ("item", "tolist", "numpy", "cpu", "__float__", "__int__", "__bool__", "__index__")
MLP = [{"type": "dense", "size": 16}]


@contextlib.contextmanager
def counted_reads(agent):
    """Counts the host reads made inside the agent's updates; yields the list of per-update counts."""
    counts: list[int] = []
    inside = [False]
    update = agent._update

    def counting_update(batch):
        counts.append(0)
        inside[0] = True
        try:
            return update(batch)
        finally:
            inside[0] = False

    def counting(method):
        def read(self, *args, **kwargs):
            if inside[0]:
                counts[-1] += 1
            return method(self, *args, **kwargs)

        return read

    with pytest.MonkeyPatch.context() as patch:
        for name in READS:
            patch.setattr(torch.Tensor, name, counting(getattr(torch.Tensor, name)))
        patch.setattr(agent, "_update", counting_update)
        yield counts


def reads_per_update(spec, environment, steps=200):
    environment = make(environment)
    agent = create_agent(spec, states=environment.states, actions=environment.actions, seed=0)
    state = environment.reset()
    with counted_reads(agent) as counts:
        for _ in range(steps):
            state, terminal, reward = environment.execute(agent.act(state))
            agent.observe(terminal, reward, next_states=state)
            if terminal:
                state = environment.reset()
    assert len(counts) >= 2, "no updates to count"
    return counts


PPO = {
    "type": "ppo",
    "network": MLP,
    "update_mode": {"unit": "timesteps", "batch_size": 32},
    "memory": {"type": "latest", "capacity": 32},
    "minibatch_size": 8,
    "baseline_mode": "states",
    "baseline": {"type": "mlp", "sizes": [16]},
    "baseline_optimizer": {"type": "adam", "learning_rate": 1e-3},
    "step_optimizer": {"type": "adam", "learning_rate": 1e-3, "clip_grad_norm": 0.5},
    "gae_lambda": 0.95,
}


@pytest.mark.parametrize("environment", ["CartPole-v1", "Pendulum-v1"])
def test_a_ppo_updates_reads_do_not_grow_with_its_minibatch_steps(environment):
    # 1 epoch of 4 minibatches against 10 epochs of 4: 8 gradient steps against 80, the same reads
    few = reads_per_update({**PPO, "epochs": 1}, environment)
    many = reads_per_update({**PPO, "epochs": 10}, environment)
    assert set(few) == set(many) and len(set(few)) == 1, (few, many)
    assert few[0] <= 8  # the advantages' inputs, once


DQN = {
    "type": "dqn",
    "network": MLP,
    "update_mode": {"unit": "timesteps", "batch_size": 16, "frequency": 4, "first_update": 32},
    "memory": {"type": "replay", "capacity": 1000},
    "optimizer": {"type": "adam", "learning_rate": 1e-3, "clip_grad_norm": 10.0},
    "target_sync_frequency": 50,
    "double_q_model": True,
}
OFF_POLICY_FLOAT = {
    "network": MLP,
    "update_mode": {"unit": "timesteps", "batch_size": 16, "frequency": 1, "first_update": 32},
    "memory": {"type": "replay", "capacity": 1000},
}


@pytest.mark.parametrize(
    "spec, environment",
    [
        (DQN, "CartPole-v1"),
        ({**OFF_POLICY_FLOAT, "type": "ddpg", "critic_network": MLP}, "Pendulum-v1"),
        ({**OFF_POLICY_FLOAT, "type": "naf"}, "Pendulum-v1"),
    ],
    ids=["dqn", "ddpg", "naf"],
)
def test_an_off_policy_update_reads_nothing_back(spec, environment):
    # (dqn_nstep computes its n-step returns on the host, once per update, as PPO its advantages)
    assert set(reads_per_update(spec, environment)) == {0}


IMAGE_PPO = {
    "type": "ppo",
    "network": [
        {"type": "divide", "scale": 255},
        {"type": "conv2d", "size": 4, "window": 4, "stride": 4},
        {"type": "flatten"},
        {"type": "dense", "size": 16},
    ],
    "update_mode": {"unit": "timesteps", "batch_size": 12, "frequency": 12},
    "memory": {"type": "latest", "capacity": 24},
    "baseline_mode": "network",
    "baseline": {"type": "mlp", "sizes": []},
    "seed": 0,
}


@pytest.mark.parametrize(
    "options, transfers",
    [({}, 1), ({"actions_exploration": {"type": "constant", "constant": 0.5}}, 2)],
    ids=["policy's actions", "exploration"],
)
def test_acting_brings_actions_log_pi_and_v_back_in_one_transfer(options, transfers):
    """An image PPO agent keeps log pi(a|s) and V(s) of its rows (``_acted_fields``): with the policy's own actions
    they come back with the actions, in one transfer; where exploration may replace them, log pi is of the actions
    taken, a second transfer. A read counts once per ``to_host`` call (one wait for a GPU, whatever it brings) and
    once per tensor read outside it."""
    agent = create_agent(
        {**IMAGE_PPO, **options},
        states={"type": "uint8", "shape": (32, 32, 4)},
        actions={"type": "int", "num_actions": 3},
    )
    assert agent._records_acting
    reads: list[int] = []  # per act
    inside = [False]

    def counted(to_host):
        def transfer(*groups):
            reads[-1] += 1
            inside[0] = True
            try:
                return to_host(*groups)
            finally:
                inside[0] = False

        return transfer

    def counting(method):
        def read(self, *args, **kwargs):
            if reads and not inside[0]:
                reads[-1] += 1
            return method(self, *args, **kwargs)

        return read

    generator = np.random.default_rng(0)
    with pytest.MonkeyPatch.context() as patch:
        for module in (agent_module, policy_gradient):
            patch.setattr(module, "to_host", counted(module.to_host))
        for name in READS:
            patch.setattr(torch.Tensor, name, counting(getattr(torch.Tensor, name)))
        patch.setattr(agent, "_maybe_update", lambda: None)  # acting only: updates read on their own (above)
        for _ in range(8):
            reads.append(0)
            agent.act(generator.integers(0, 256, (3, 32, 32, 4), dtype=np.uint8))
            agent.observe(terminal=np.zeros(3, dtype=np.int8), reward=np.ones(3, dtype=np.float32))
    assert reads == [transfers] * 8
