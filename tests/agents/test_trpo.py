"""TRPO: each update stays within the KL bound and improves the surrogate (or leaves the policy alone), the
2018 arguments reach the implicit optimized_step(natural_gradient), and errors name the agent's own keys."""

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.environments import make
from torchforce.execution import Runner
from torchforce.spec import SpecError

NETWORK = [{"type": "dense", "size": 16}]
BASELINE = {"baseline_mode": "states", "baseline": {"type": "mlp", "sizes": [8]}, "gae_lambda": 0.9}


def trpo(action_type="int", **options):
    env = make("minimal", action_type=action_type)
    spec = {"type": "trpo", "network": NETWORK, "update_mode": {"unit": "episodes", "batch_size": 4}, "seed": 0}
    return create_agent({**spec, **options}, states=env.states, actions=env.actions), env


def collect(agent, env, episodes):
    """Run until the agent has a full batch staged, and return that batch (without updating)."""
    env.seed(0)
    batches = []
    update = agent._update
    agent._update = lambda batch: batches.append(batch) or {}
    for _ in range(episodes):
        state, terminal = env.reset(), 0
        while not terminal:
            state, terminal, reward = env.execute(agent.act(state))
            agent.observe(terminal, reward)
    agent._update = update
    return batches[0]


@pytest.mark.parametrize("action_type", ["int", "float", "bool"])
@pytest.mark.parametrize("bound", [0.001, 0.01])
def test_an_update_keeps_within_the_kl_bound_and_improves_the_surrogate(action_type, bound):
    agent, env = trpo(action_type, learning_rate=bound, **BASELINE)
    batch = collect(agent, env, 4)
    data = agent._with_advantages(batch)
    old = agent._old_policy(data)
    with torch.no_grad():
        before = agent._loss(data).item()
    info = agent._update(batch)
    with torch.no_grad():
        after = agent._loss(data).item()
        kl = agent._kl(data, old).item()
    assert kl <= 1.5 * bound  # the step is scaled to a predicted KL of the bound; the line search only shrinks it
    assert after <= before + 1e-6
    assert info["kl_estimate"] == pytest.approx(bound) or info["kl_estimate"] == 0.0
    assert 0.0 <= info["ls_scale"] <= 1.0


def test_trpo_learns_the_minimal_task():
    agent, env = trpo(learning_rate=0.02, **BASELINE)
    states = np.array([[-0.8], [-0.4], [0.4], [0.8]], dtype=np.float32)
    env.seed(1)
    for _ in range(160):  # 40 updates: at 20 the policy was still wrong near -0.8 for some seeds, old search or new
        state, terminal = env.reset(), 0
        while not terminal:
            state, terminal, reward = env.execute(agent.act(state))
            agent.observe(terminal, reward)
    assert agent.updates == 40
    actions = agent.act(states, deterministic=True, independent=True)
    assert (actions == (states[:, 0] > 0)).all()


def test_trpo_learns_the_minimal_task_with_a_bounded_action():
    # issue "TensorForce 0.4 fidelity" item 5: TRPO with a Beta policy barely learned what PPO and VPG learn. Its
    # line search halved every natural-gradient step until the surrogate was nearly linear along it (about 1/64 of
    # the step), since it lacked 2018's stop once halving no longer raises the improvement ratio (see
    # core/optimizers/solvers.py); the mean return of episodes 400-600 was 4.9 (a random policy earns about 4.5),
    # and is 5.9 with the stop (PPO: 5.1, VPG: 4.5, same network and batches; optimal 10)
    env = make("minimal", action_type="bounded", seed=0)
    spec = {
        "type": "trpo",
        "network": [{"type": "dense", "size": 32}, {"type": "dense", "size": 32}],
        "update_mode": {"unit": "episodes", "batch_size": 10},
        "learning_rate": 1e-2,
        "seed": 0,
    }
    agent = create_agent(spec, states=env.states, actions=env.actions)
    runner = Runner(agent=agent, environment=env)
    runner.run(num_episodes=600)
    assert agent.updates == 60
    assert np.mean(runner.episode_rewards[400:]) > 5.4


def test_the_beta_trust_region_is_the_exact_kl_and_fisher():
    # the KL that TRPO bounds, and the Fisher matrix (its Hessian at equal parameters) that natural_gradient's
    # conjugate gradient inverts, against torch.distributions and the closed form with trigamma psi'
    agent, _ = trpo("bounded")
    beta = agent.policy.heads["action"]
    a1, b1 = torch.tensor([1.5, 2.0, 7.0, 1.01], dtype=torch.float64), torch.tensor([3.0, 1.2, 40.0, 1.0]).double()
    a2, b2 = torch.tensor([2.5, 1.0, 9.0, 1.3], dtype=torch.float64), torch.tensor([1.5, 1.7, 30.0, 2.0]).double()
    expected = torch.distributions.kl_divergence(torch.distributions.Beta(a1, b1), torch.distributions.Beta(a2, b2))
    torch.testing.assert_close(beta.kl_divergence((a1, b1), (a2, b2)), expected)
    assert torch.equal(beta.kl_divergence((a1, b1), (a1, b1)), torch.zeros(4, dtype=torch.float64))
    for alpha, b in [(2.0, 1.6), (1.2, 9.0)]:
        point = torch.tensor([alpha, b], dtype=torch.float64)
        fisher = torch.autograd.functional.hessian(
            lambda new, p=point: beta.kl_divergence((p[0], p[1]), (new[0], new[1])), point
        )
        trigamma = [torch.polygamma(1, torch.tensor(v, dtype=torch.float64)).item() for v in (alpha, b, alpha + b)]
        closed = [[trigamma[0] - trigamma[2], -trigamma[2]], [-trigamma[2], trigamma[1] - trigamma[2]]]
        torch.testing.assert_close(fisher, torch.tensor(closed, dtype=torch.float64))


def test_likelihood_ratio_clipping_clips_the_surrogate():
    agent, env = trpo(likelihood_ratio_clipping=0.2)
    data = agent._with_advantages(collect(agent, env, 4))
    with torch.no_grad():
        for parameter in agent.policy.parameters():
            parameter.add_(0.5)  # ratios far from 1: some are clipped
        clipped = agent._loss(data).item()
        agent.clipping = None
        unclipped = agent._loss(data).item()
    assert clipped != pytest.approx(unclipped)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"learning_rate": -0.1}, "agent.learning_rate: "),
        ({"cg_max_iterations": 0}, "agent.cg_max_iterations: "),
        ({"cg_damping": -1.0}, "agent.cg_damping: "),
        ({"ls_max_iterations": -1}, "agent.ls_max_iterations: "),
        ({"ls_unroll_loop": "yes"}, "agent.ls_unroll_loop: "),
        ({"gae_lambda": 0.9}, "agent.baseline_mode: gae_lambda needs a baseline_mode"),
        ({"optimizer": {"type": "adam"}}, "agent.optimizer: unknown"),
    ],
)
def test_spec_errors_name_the_agents_keys(options, message):
    with pytest.raises(SpecError, match=message):
        trpo(**options)


def test_2018_long_name_and_defaults():
    env = make("minimal")
    agent = create_agent({"type": "trpo_agent", "network": NETWORK}, states=env.states, actions=env.actions)
    assert type(agent).__name__ == "TRPOAgent"
    assert agent.optimizer.optimizer.learning_rate == 1e-3 and agent.optimizer.ls_max_iterations == 10
    assert agent.clipping is None and agent.baseline is None
