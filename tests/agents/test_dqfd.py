"""DQfD: the large-margin loss by hand, demonstrations in their own memory, pre-training (target following in
updates), an online update followed by a demonstration update, exact checkpoints, and errors."""

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.agents.transitions import group
from torchforce.environments import make
from torchforce.spec import SpecError

ENV = make("minimal", action_type="int", episode_length=5)
BOOL = make("minimal", action_type="bool", episode_length=5)
NETWORK = [{"type": "dense", "size": 8}]


def dqfd(env=ENV, **options):
    spec = {
        "type": "dqfd",
        "network": NETWORK,
        "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4},
        "memory": {"type": "replay", "capacity": 256},
        "demo_memory_capacity": 64,
        "demo_sampling_ratio": 0.5,
        "target_sync_frequency": 8,
        "seed": 0,
    }
    return create_agent({**spec, **options}, states=env.states, actions=env.actions)


def demonstrations(episodes=4, seed=0, env=ENV):
    """The minimal task's expert: action 1 (True for a bool action) exactly when the state is positive."""
    env.seed(seed)
    steps = []
    for _ in range(episodes):
        state, terminal = env.reset(), 0
        while not terminal:
            action = bool(state[0] > 0) if env is BOOL else int(state[0] > 0)
            following, terminal, reward = env.execute(action)
            steps.append({"states": state, "actions": action, "terminal": terminal, "reward": reward})
            state = following
    return steps


def play_until_updates(agent, updates: int, seed: int) -> None:
    """Act and observe on the minimal task (seeded) until the agent has made ``updates`` updates."""
    ENV.seed(seed)
    state = ENV.reset()
    while agent.updates < updates:
        state, terminal, reward = ENV.execute(agent.act(state))
        agent.observe(terminal, reward)
        if terminal:
            state = ENV.reset()


def test_large_margin_loss_by_hand():
    agent = dqfd(supervised_weight=1.0, expert_margin=0.8, discount=0.0)  # discount 0: the TD target is r
    head = agent.policy.heads["action"]
    with torch.no_grad():  # Q(s, .) = (1, 2) everywhere
        head.logits.weight.zero_()
        head.logits.bias.copy_(torch.tensor([1.0, 2.0]))
    data = {
        "states/state": torch.zeros(2, 1),
        "next_states/state": torch.zeros(2, 1),
        "reward": torch.tensor([1.0, 2.0]),
        "terminal": torch.tensor([1, 1], dtype=torch.int8),
        "actions/action": torch.tensor([0, 1]),
    }
    # J_E: expert 0: max(1 + 0, 2 + .8) - 1 = 1.8; expert 1: max(1 + .8, 2 + 0) - 2 = 0
    # TD: Q(s, a_E) = 1 and 2 against targets 1 and 2: zero
    assert agent._demo_loss(data).item() == pytest.approx((1.8 + 0.0) / 2)
    assert agent._loss(data).item() == pytest.approx(0.0)


def test_large_margin_loss_by_hand_with_bool_actions():
    # the same numbers with the expert's actions False/True: Q(s, False) = 1, Q(s, True) = 2
    agent = dqfd(BOOL, supervised_weight=1.0, expert_margin=0.8, discount=0.0)
    head = agent.policy.heads["action"]
    with torch.no_grad():
        head.logits.weight.zero_()
        head.logits.bias.copy_(torch.tensor([1.0, 2.0]))
    data = {
        "states/state": torch.zeros(2, 1),
        "next_states/state": torch.zeros(2, 1),
        "reward": torch.tensor([1.0, 2.0]),
        "terminal": torch.tensor([1, 1], dtype=torch.int8),
        "actions/action": torch.tensor([False, True]),
    }
    assert agent._demo_loss(data).item() == pytest.approx((1.8 + 0.0) / 2)
    assert agent._loss(data).item() == pytest.approx(0.0)


def test_bool_actions_pretrain_act_store_and_update():
    agent = dqfd(
        BOOL,
        update_mode={"unit": "timesteps", "batch_size": 16, "frequency": 4},
        supervised_weight=1.0,
        optimizer={"type": "adam", "learning_rate": 0.02},
    )
    assert type(agent.policy.heads["action"]).__name__ == "Categorical"  # Q(s, False), Q(s, True)
    agent.import_demonstrations(demonstrations(8, env=BOOL))
    assert agent.demo_memory.retrieve_timesteps(4)["actions/action"].dtype == np.bool_
    agent.pretrain(301)
    states = np.array([[-0.8], [-0.3], [0.3], [0.8]], dtype=np.float32)
    assert (agent.act(states, deterministic=True, independent=True) == (states[:, 0] > 0)).all()
    BOOL.seed(1)
    state = BOOL.reset()
    while agent.updates < 2:  # online updates, each followed by one on demonstrations
        action = agent.act(state)
        assert isinstance(action, np.bool_)
        state, terminal, reward = BOOL.execute(action)
        agent.observe(terminal, reward)
        if terminal:
            state = BOOL.reset()
    assert agent.memory.retrieve_timesteps(4)["actions/action"].dtype == np.bool_
    assert (agent.act(states, deterministic=True, independent=True) == (states[:, 0] > 0)).all()


@pytest.mark.parametrize("env", [ENV, BOOL], ids=["int", "bool"])
def test_acting_is_greedy_unless_exploring_as_in_2018(env):
    # tied Q-values: the argmax (the first action) whether deterministic or not, as 2018's Q models acted
    states = np.zeros((1000, 1), dtype=np.float32)
    for constant, explored in ((0.0, 0.0), (1.0, 0.5)):
        agent = dqfd(env, actions_exploration={"type": "constant", "constant": constant})
        with torch.no_grad():
            agent.policy.heads["action"].logits.weight.zero_()
            agent.policy.heads["action"].logits.bias.zero_()
        assert np.mean(agent.act(states, independent=True)) == pytest.approx(explored, abs=0.05)
        assert not agent.act(states, deterministic=True, independent=True).any()


def test_demonstrations_go_to_their_own_memory():
    agent = dqfd()
    agent.import_demonstrations(demonstrations(2))
    assert len(agent.demo_memory) == 10 and len(agent.memory) == 0
    stored = agent.demo_memory.retrieve_timesteps(10)
    assert (stored["actions/action"] == (stored["states/state"][:, 0] > 0)).all()
    with pytest.raises(SpecError, match=r"(?s)100 steps do not fit in the demonstration memory.*demo_memory_capacity"):
        agent.import_demonstrations(demonstrations(20))


def test_pretraining_learns_the_expert_and_the_target_follows_in_updates():
    agent = dqfd(
        update_mode={"unit": "timesteps", "batch_size": 16, "frequency": 4},
        supervised_weight=1.0,
        optimizer={"type": "adam", "learning_rate": 0.02},
    )
    assert agent.demo_batch_size == 16 and agent.pretrain_sync == 2  # a sync every 8 timesteps = 2 updates
    with pytest.raises(RuntimeError, match="import_demonstrations"):
        agent.pretrain(1)
    agent.import_demonstrations(demonstrations(8))
    agent.pretrain(301)
    assert agent.timestep == 0 and agent.updates == 0 and agent.pretrained == 301  # no interaction
    target = dict(agent.target.named_parameters())
    assert any(not torch.equal(p, target[name]) for name, p in agent.policy.named_parameters())  # one step since
    agent.pretrain(1)
    assert all(torch.equal(p, target[name]) for name, p in agent.policy.named_parameters())  # synced at 302
    states = np.array([[-0.8], [-0.3], [0.3], [0.8]], dtype=np.float32)
    assert (agent.act(states, deterministic=True, independent=True) == (states[:, 0] > 0)).all()


def test_an_online_update_is_followed_by_a_demonstration_update():
    agent = dqfd()
    agent.import_demonstrations(demonstrations(4))
    batches = []
    step = agent.optimizer.step
    agent.optimizer.step = lambda loss_fn, data, **kw: batches.append((loss_fn.__name__, len(data["reward"]))) or {}
    play_until_updates(agent, 2, seed=1)
    agent.optimizer.step = step
    assert agent.updates == 2 and batches == [("_loss", 8), ("_demo_loss", 8)] * 2  # ratio .5: 8 demonstrations


def test_a_checkpoint_keeps_the_demonstrations(tmp_path):
    agent = dqfd()
    agent.import_demonstrations(demonstrations(4))
    agent.pretrain(5)
    agent.save_model(tmp_path)
    restored = dqfd()
    restored.restore_model(tmp_path)
    for key, values in agent.demo_memory.state_dict().items():
        np.testing.assert_equal(restored.demo_memory.state_dict()[key], values)
    for (name, value), restored_value in zip(
        agent.get_parameters().items(), restored.get_parameters().values(), strict=True
    ):
        assert torch.equal(value, restored_value), name


@pytest.mark.parametrize(
    "options, message",
    [
        ({"demo_sampling_ratio": 1.0}, "agent.demo_sampling_ratio: out of range"),
        ({"demo_sampling_ratio": 0.05}, "agent.demo_sampling_ratio: gives no demonstrations per batch of 8"),
        ({"demo_memory_capacity": 2}, "agent.demo_memory_capacity: "),
        ({"expert_margin": -1.0}, "agent.expert_margin: "),
        ({"double_q_model": False}, "agent: unknown key 'double_q_model'|double_q_model"),
        ({"update_mode": {"unit": "episodes", "batch_size": 2}}, "agent.update_mode.unit: DQfD learns from"),
    ],
)
def test_spec_errors(options, message):
    with pytest.raises(SpecError, match=message):
        dqfd(**options)


def test_2018_long_name_and_defaults():
    agent = create_agent({"type": "dqfd_agent", "network": NETWORK}, states=ENV.states, actions=ENV.actions)
    assert type(agent).__name__ == "DQFDAgent" and agent.double_q_model
    assert agent.demo_batch_size == 8 and agent.demo_memory.capacity == 10_000  # .2 * 32 / .8
    assert (agent.expert_margin, agent.supervised_weight) == (0.5, 0.1)


def test_demo_loss_uses_group_names_of_flat_batches():
    assert group({"states/state": 1, "reward": 2}, "states") == {"state": 1}


def test_prioritized_replay_of_its_own_experience_gets_the_td_errors():
    """The online loss's |TD errors| become the priorities of its own experience (the demonstrations are drawn
    uniformly from their memory); before, DQfD applied the importance weights but never updated a priority."""
    agent = dqfd(memory={"type": "prioritized_replay", "capacity": 256})
    agent.import_demonstrations(demonstrations(4))
    play_until_updates(agent, 5, seed=2)
    priorities = agent.memory.priorities[: len(agent.memory)]
    assert np.any(priorities != priorities[0])
