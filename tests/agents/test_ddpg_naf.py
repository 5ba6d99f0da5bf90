"""DDPG and NAF: their losses by hand, the actor ascending the critic, NAF's Q maximal at mu, learning the minimal
float task, bounded actions staying in bounds, and errors."""

import numpy as np
import pytest
import torch

from tests.agents.test_dqn import run
from torchforce.agents import create_agent
from torchforce.agents.naf import AdvantageHeads, quadratic_advantage
from torchforce.environments import make
from torchforce.spec import SpecError

FLOAT = make("minimal", action_type="float", episode_length=5)
NETWORK = [{"type": "dense", "size": 16}]
NOISE = {"type": "gaussian_noise", "sigma": 0.3}


def build(kind, env=FLOAT, **options):
    spec = {
        "type": kind,
        "network": NETWORK,
        "update_mode": {"unit": "timesteps", "batch_size": 16, "frequency": 1},
        "memory": {"type": "replay", "capacity": 512},
        "target_sync_frequency": 1,
        "target_update_weight": 0.05,
        "actions_exploration": NOISE,
        "seed": 0,
    }
    return create_agent({**spec, **options}, states=env.states, actions=env.actions)


def flat_batch(n=4):
    states = torch.linspace(-1.0, 1.0, n).view(n, 1)
    return {
        "states/state": states,
        "next_states/state": states + 0.1,
        "actions/action": torch.zeros(n),
        "reward": torch.ones(n),
        "terminal": torch.tensor([0, 0, 1, 2] * (n // 4), dtype=torch.int8),
    }


def constant(module: torch.nn.Module, value: float) -> None:
    """Every weight zero and the last bias ``value``: the module outputs ``value`` whatever its input."""
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.zero_()
        list(module.parameters())[-1].fill_(value)


# ---------------------------------------------------------------------------------------------- DDPG


def test_ddpg_critic_loss_by_hand():
    agent = build("ddpg", discount=0.5)
    constant(agent.target_critic, 2.0)  # Q'(s', mu'(s')) = 2
    constant(agent.critic, 1.0)  # Q(s, a) = 1
    # y = 1 + .5 * 2 * [terminal != 1] = [2, 2, 1, 2]; half the mean squared error against 1: (1 + 1 + 0 + 1) / 8
    assert agent._critic_loss(flat_batch()).item() == pytest.approx(3 / 8)


def test_ddpg_actor_step_ascends_the_critic():
    agent = build("ddpg", optimizer={"type": "adam", "learning_rate": 0.05})
    run(agent, FLOAT, 40)  # some experience and a trained critic
    data = flat_batch(8)

    def value():
        with torch.no_grad():
            params, _, _ = agent.policy({"state": data["states/state"]}, {})
            return agent.critic({"state": data["states/state"]}, agent.policy.sample(params, True)).mean().item()

    critic_before = [parameter.clone() for parameter in agent.critic.parameters()]
    before = value()
    agent.optimizer.step(agent._actor_loss, data)
    assert value() > before
    assert all(torch.equal(a, b) for a, b in zip(agent.critic.parameters(), critic_before, strict=True))


@pytest.mark.parametrize("kind", ["ddpg", "naf"])
def test_learns_the_minimal_float_task(kind):
    # reward 1 - |a - x|: the greedy action should track the state x
    critic = {"critic_optimizer": {"type": "adam", "learning_rate": 3e-3}} if kind == "ddpg" else {}
    agent = build(kind, optimizer={"type": "adam", "learning_rate": 3e-3}, discount=0.0, **critic)
    run(agent, FLOAT, 1500)
    states = np.array([[-0.6], [-0.2], [0.2], [0.6]], dtype=np.float32)
    actions = agent.act(states, deterministic=True, independent=True)
    assert np.abs(actions - states[:, 0]).max() < 0.2, actions


@pytest.mark.parametrize("kind", ["ddpg", "naf"])
def test_bounded_actions_stay_within_their_bounds(kind):
    env = make("minimal", action_type="bounded", episode_length=5)
    agent = build(kind, env=env, actions_exploration={"type": "gaussian_noise", "sigma": 5.0})
    run(agent, env, 60)
    stored = agent.memory.retrieve_timesteps(32)["actions/action"]
    action = env.actions
    assert stored.min() >= action["min_value"] and stored.max() <= action["max_value"]


@pytest.mark.parametrize("kind", ["ddpg", "naf"])
def test_random_timesteps_act_uniformly_then_by_the_policy(kind):
    env = make("minimal", action_type="bounded", episode_length=5)
    agent = build(kind, env=env, random_timesteps=300, actions_exploration=None)
    env.seed(0)
    state, taken = env.reset(), []
    for step in range(320):
        policy = agent.act(state, deterministic=True, independent=True)
        action = agent.act(state)
        if step >= 300:  # past the warm-up, without exploration: the policy's (act updates first: not exactly)
            np.testing.assert_allclose(action, policy, atol=0.01)
        taken.append(float(action))
        state, terminal, reward = env.execute(action)
        agent.observe(terminal, reward)
        if terminal:
            state = env.reset()
    first = np.array(taken[:300])  # uniform in [-1, 1]: spread to both bounds, std 1/sqrt(3)
    assert first.min() < -0.95 and first.max() > 0.95 and abs(first.std() - 3**-0.5) < 0.06, first


@pytest.mark.parametrize("kind", ["ddpg", "naf"])
def test_a_sigma_schedule_narrows_the_noise_with_the_agents_timestep(kind):
    narrowing = {"type": "linear", "initial": 0.5, "final": 0.0, "timesteps": 200}
    agent = build(
        kind,
        update_mode={"unit": "timesteps", "batch_size": 16, "frequency": 10**6},
        actions_exploration={"type": "gaussian_noise", "sigma": narrowing},
    )
    state, spread = FLOAT.reset(), []
    for _ in range(240):
        timestep = agent.timestep
        noise = float(agent.act(state) - agent.act(state, deterministic=True, independent=True))
        spread.append((timestep, noise))
        state, terminal, reward = FLOAT.execute(0.0)
        agent.observe(terminal, reward)
        if terminal:
            state = FLOAT.reset()
    early = np.array([noise for timestep, noise in spread if timestep < 50])  # sigma 0.5 to 0.375
    late = [noise for timestep, noise in spread if timestep >= 200]  # sigma 0: the policy's action itself
    assert 0.3 < early.std() < 0.6, early.std()
    np.testing.assert_allclose(late, 0.0, atol=1e-6)


# ---------------------------------------------------------------------------------------------- NAF


def test_quadratic_advantage_by_hand():
    lower = torch.tensor([[[2.0, 0.0], [1.0, 1.0]]])
    # L^T (a - mu) with a - mu = (1, 1): (2 + 1, 0 + 1) = (3, 1); -1/2 (9 + 1)
    assert quadratic_advantage(lower, torch.tensor([[1.0, 1.0]]), torch.zeros(1, 2)).item() == pytest.approx(-5.0)


def test_advantage_heads_are_lower_triangular_with_a_positive_diagonal():
    heads = AdvantageHeads(4, 3)
    value, lower = heads(torch.randn(5, 4))
    assert value.shape == (5,) and lower.shape == (5, 3, 3)
    assert torch.equal(torch.triu(lower, diagonal=1), torch.zeros_like(lower))
    assert (torch.diagonal(lower, dim1=1, dim2=2) > 0).all()


def test_naf_q_is_largest_at_mu_and_equals_v_there():
    agent = build("naf")
    states = {"state": torch.tensor([[0.3], [-0.7]])}
    with torch.no_grad():
        params, _, embedding = agent.policy(states, {})
        mu = agent.policy.sample(params, True)
        value, _ = agent.heads(embedding)
        at_mu = agent.q_values(states, {}, mu)
        assert torch.allclose(at_mu, value)
        for shift in (-0.5, 0.1, 1.0):
            assert (agent.q_values(states, {}, {"action": mu["action"] + shift}) < at_mu).all()


def test_naf_td_target_uses_the_target_value_head():
    agent = build("naf", discount=0.5)
    constant(agent.target_heads.value, 2.0)  # V'(s') = 2
    data = flat_batch()
    with torch.no_grad():
        q = agent.q_values({"state": data["states/state"]}, {}, {"action": data["actions/action"]})
        y = torch.tensor([2.0, 2.0, 1.0, 2.0])
        assert agent._loss(data).item() == pytest.approx((0.5 * (y - q).square()).mean().item(), rel=1e-5)


# ---------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kind, options, message",
    [
        ("ddpg", {"entropy_regularization": 0.01}, "agent.entropy_regularization: a deterministic policy has no"),
        ("naf", {"entropy_regularization": 0.01}, "agent.entropy_regularization: a deterministic policy has no"),
        ("ddpg", {"critic_network": [{"type": "internal_lstm", "size": 4}]}, "agent.critic_network: a critic cannot"),
        ("ddpg", {"target_update_weight": 0.0}, "agent.target_update_weight: out of range"),
        ("naf", {"update_mode": {"unit": "episodes", "batch_size": 2}}, "agent.update_mode.unit: NAF learns from"),
        ("ddpg", {"random_timesteps": 10}, "agent.random_timesteps: acts uniformly within the actions' bounds"),
        ("naf", {"random_timesteps": -1}, "agent.random_timesteps: "),
        ("ddpg", {"distributions": {"action": "gaussian"}}, None),  # a stochastic head is allowed: its mean is mu
    ],
)
def test_spec_errors(kind, options, message):
    if message is None:
        build(kind, **options)
        return
    with pytest.raises(SpecError, match=message):
        build(kind, **options)


def test_ddpg_only_float_actions():
    env = make("minimal", action_type="int")
    with pytest.raises(SpecError, match="agent.actions.action.type: DDPG acts with a deterministic"):
        build("ddpg", env=env)


@pytest.mark.parametrize("action_type", ["bool", "int"])
def test_naf_only_float_actions_and_points_to_dqn(action_type):
    with pytest.raises(SpecError) as error:
        build("naf", env=make("minimal", action_type=action_type))
    assert str(error.value) == (
        "agent.actions.action.type: NAF's Q-function is quadratic in float actions, maximal at the mu(s) it acts "
        f'with, so only float actions work; expected "float", got "{action_type}".\n'
        "  Use dqn, dqn_nstep or dqfd for bool and int actions."
    )


def test_2018_long_names_and_the_2018_critic_form():
    agent = create_agent(
        {"type": "ddpg_agent", "network": NETWORK, "critic_network": {"size_t0": 8, "size_t1": 6}},
        states=FLOAT.states,
        actions=FLOAT.actions,
    )
    assert type(agent).__name__ == "DDPGAgent" and agent.critic.network.layer_names == ["dense0", "dense1"]
    assert (agent.update_mode.batch_size, agent.memory.capacity) == (10, 10_000)
    naf = create_agent(
        {"type": "naf_agent", "network": NETWORK, "double_q_model": True}, states=FLOAT.states, actions=FLOAT.actions
    )
    assert type(naf).__name__ == "NAFAgent"
    # 2018's Q-agent default, as DQN's and DQfD's (an update every 4 timesteps; it was every 32)
    assert (naf.update_mode.unit, naf.update_mode.batch_size, naf.update_mode.frequency) == ("timesteps", 32, 4)


# ---------------------------------------------------------------------------------------------- prioritized replay


@pytest.mark.parametrize("kind", ["ddpg", "naf"])
def test_prioritized_replay_gets_the_td_errors_from_before_the_step_and_weights_the_loss(kind):
    """The critic's (NAF: Q's) |TD errors| of the whole batch before the step become the rows' priorities, and the
    importance-sampling weights multiply the loss per row (before, DDPG and NAF ignored both: uniform replay)."""
    agent = build(kind, memory={"type": "prioritized_replay", "capacity": 64})
    calls = []
    agent.memory.update_priorities = lambda indices, errors: calls.append((indices, errors))
    batch = flat_batch()
    loss = agent._critic_loss if kind == "ddpg" else agent._loss
    with torch.no_grad():
        plain = loss(batch).item()
        halved = loss({**batch, "weights": torch.full((4,), 0.5)}).item()
    assert halved == pytest.approx(0.5 * plain, rel=1e-5)  # no weight penalties: the mean of the rows' losses

    from torchforce.agents.transitions import Transitions

    transitions = Transitions.from_numpy(
        {name: value.numpy() for name, value in batch.items()} | {"indices": np.array([9, 4, 6, 2])}, agent.device
    )

    class NoStep:  # measures the loss, changes nothing
        def step(self, loss, data):
            with torch.no_grad():
                loss(data)
            return {}

    _, expected = agent.td_errors.step(NoStep(), loss, transitions.flat())
    expected = expected.numpy()
    agent._update(transitions)
    ((indices, errors),) = calls
    assert indices.tolist() == [9, 4, 6, 2] and errors == pytest.approx(expected, abs=1e-6)
    assert np.all(expected > 0)


@pytest.mark.parametrize("kind", ["ddpg", "naf"])
def test_prioritized_replay_end_to_end(kind):
    agent = build(kind, memory={"type": "prioritized_replay", "capacity": 128})
    run(agent, FLOAT, 40)
    assert agent.updates > 0
    priorities = agent.memory.priorities[: len(agent.memory)]
    assert np.any(priorities != priorities[0])  # updated rows hold their |TD error|
