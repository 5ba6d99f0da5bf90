"""TensorForce 0.4's API surface: every name its agents and execution pages document imports under torchforce, a
0.4 script runs with only the package renamed, and the Agent methods 0.4 documented (``fetch_tensors``,
``last_observation``, ``initialize_model``, ``set_normalized_states``/``set_normalized_actions``) keep their meaning."""

import importlib
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from torchforce.agents import Agent, LearningAgent, create_agent
from torchforce.environments import make

# What 0.4's documentation of tensorforce.agents and tensorforce.execution names: (module, attribute).
DOCUMENTED = [
    ("agents", "Agent"),
    ("agents", "LearningAgent"),
    *[
        ("agents", name)
        for name in (
            "ConstantAgent",
            "RandomAgent",
            "DQNAgent",
            "DQNNstepAgent",
            "DQFDAgent",
            "NAFAgent",
            "DDPGAgent",
            "VPGAgent",
            "PPOAgent",
            "TRPOAgent",
        )
    ],
    ("agents.agent", "Agent"),
    ("agents.learning_agent", "LearningAgent"),
    ("agents.constant_agent", "ConstantAgent"),
    ("agents.random_agent", "RandomAgent"),
    ("agents.dqn_agent", "DQNAgent"),
    ("agents.dqn_nstep_agent", "DQNNstepAgent"),
    ("agents.dqfd_agent", "DQFDAgent"),
    ("agents.naf_agent", "NAFAgent"),
    ("agents.ddpg_agent", "DDPGAgent"),
    ("agents.vpg_agent", "VPGAgent"),
    ("agents.ppo_agent", "PPOAgent"),
    ("agents.trpo_agent", "TRPOAgent"),
    *[
        ("execution", name)
        for name in (
            "BaseRunner",
            "Runner",
            "SingleRunner",
            "ThreadedRunner",
            "WorkerAgentGenerator",
            "clone_worker_agent",
            "DistributedRunner",
        )
    ],
    ("execution.base_runner", "BaseRunner"),
    ("execution.runner", "Runner"),
    ("execution.threaded_runner", "ThreadedRunner"),
    ("execution.threaded_runner", "WorkerAgentGenerator"),
    ("execution.threaded_runner", "clone_worker_agent"),
    ("environments", "Environment"),
    ("environments", "OpenAIGym"),
    ("contrib.openai_gym", "OpenAIGym"),
]
AGENT_METHODS = [
    "act",
    "observe",
    "reset",
    "close",
    "from_spec",
    "initialize_model",
    "last_observation",
    "restore_model",
    "save_model",
    "set_normalized_actions",
    "set_normalized_states",
    "should_stop",
]


@pytest.mark.parametrize("module, name", DOCUMENTED, ids=lambda value: value)
def test_every_documented_0_4_name_imports(module, name):
    assert getattr(importlib.import_module(f"torchforce.{module}"), name) is not None


def test_agent_classes_are_the_registry_s_and_learning_agents_are_learning_agents():
    import torchforce.agents as agents

    for name in (
        "DQNAgent",
        "DQNNstepAgent",
        "DQFDAgent",
        "NAFAgent",
        "DDPGAgent",
        "VPGAgent",
        "PPOAgent",
        "TRPOAgent",
    ):
        cls = getattr(agents, name)
        assert issubclass(cls, LearningAgent) and cls.learning
        assert agents.AGENTS.get(cls.name, "agent.type") is cls
    for name in ("ConstantAgent", "RandomAgent"):
        assert not issubclass(getattr(agents, name), LearningAgent)
    for method in AGENT_METHODS:
        assert callable(getattr(Agent, method)), method


def test_distributed_tf_runner_is_0_4_s_runner_with_a_pointer_to_the_distributed_one():
    from torchforce.execution import Runner

    with pytest.warns(DeprecationWarning, match="DistributedRunner"):
        from torchforce.execution import DistributedTFRunner
    assert DistributedTFRunner is Runner


SCRIPT_0_4 = """
import numpy as np
from tensorforce.agents import PPOAgent
from tensorforce.execution import Runner
from tensorforce.contrib.openai_gym import OpenAIGym

env = OpenAIGym('CartPole-v0', visualize=False)
network_spec = [
    dict(type='dense', size=32, activation='tanh'),
    dict(type='dense', size=32, activation='tanh')
]
agent = PPOAgent(
    states=env.states,
    actions=env.actions,
    network=network_spec,
    batching_capacity=4096,
    step_optimizer=dict(type='adam', learning_rate=1e-3),
    update_mode=dict(unit='episodes', batch_size=4, frequency=4),
    memory=dict(type='latest', include_next_states=False, capacity=5000),
    likelihood_ratio_clipping=0.2,
    subsampling_fraction=0.2,
    optimization_steps=5,
)
runner = Runner(agent=agent, environment=env)

def episode_finished(r):
    if r.episode % 5 == 0:
        print("Finished episode {ep} after {ts} timesteps (reward: {reward})".format(ep=r.episode, ts=r.timestep,
                                                                                   reward=r.episode_rewards[-1]))
    return True

runner.run(episodes=12, max_episode_timesteps=200, episode_finished=episode_finished)
runner.close()
print("Learning finished. Total episodes: {ep}. Average reward of last 10 episodes: {ar}.".format(
    ep=runner.episode, ar=np.mean(runner.episode_rewards[-10:])))
"""


def test_a_0_4_script_runs_with_only_the_package_renamed(tmp_path):
    script = tmp_path / "ported.py"
    script.write_text(textwrap.dedent(SCRIPT_0_4).replace("tensorforce", "torchforce"))
    result = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", str(script)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Finished episode 10 after" in result.stdout
    assert "Total episodes: 12." in result.stdout


MLP = [{"type": "dense", "size": 16}, {"type": "output", "name": "hidden"}]


def _agent(spec, action_type="int", **env):
    environment = make("minimal", action_type=action_type, seed=0, **env)
    return create_agent({"network": MLP, "seed": 0, **spec}, states=environment.states, actions=environment.actions)


def test_fetch_tensors_returns_the_policy_s_tensors_for_the_state_acted_on():
    agent = _agent({"type": "ppo", "baseline_mode": "states", "baseline": {"type": "mlp", "sizes": [8]}})
    assert agent.fetchable_tensors() == [
        "action/logits",
        "action/probabilities",
        "embedding",
        "hidden",
        "logits",
        "probabilities",
        "state_value",
    ]
    state = np.array([0.5], dtype=np.float32)
    action, fetched = agent.act(state, fetch_tensors=["logits", "probabilities", "state_value", "hidden"])
    assert action in (0, 1) and agent.timestep == 1
    import torch

    with torch.no_grad():
        params, _, embedding = agent.policy({"state": torch.tensor([[0.5]])}, {})
        value = agent.baseline({"state": torch.tensor([[0.5]])})
    np.testing.assert_allclose(fetched["logits"], params["action"][0][0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(fetched["probabilities"], torch.softmax(params["action"][0][0], -1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(fetched["state_value"], value[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(fetched["hidden"], embedding[0].numpy(), rtol=1e-6)
    agent.observe(terminal=False, reward=1.0)
    # a batch keeps its rows; independent acting fetches too, without a step
    actions, fetched = agent.act(
        np.array([[0.5], [-0.5]], dtype=np.float32), independent=True, fetch_tensors=["action/logits"]
    )
    assert actions.shape == (2,) and fetched["action/logits"].shape == (2, 2) and agent.timestep == 1


def test_fetch_tensors_of_q_agents_and_float_actions_and_bad_names():
    dqn = _agent({"type": "dqn"})
    _, fetched = dqn.act(np.array([0.1], dtype=np.float32), fetch_tensors=["q_values", "state_value"])
    assert fetched["q_values"].shape == (2,) and fetched["state_value"] == fetched["q_values"].max()
    ppo = _agent({"type": "ppo"}, action_type="bounded")
    assert {"alpha", "beta"} <= set(ppo.fetchable_tensors())
    _, fetched = ppo.act(np.array([0.1], dtype=np.float32), fetch_tensors=["alpha", "beta"])
    assert fetched["alpha"] >= 1.0 and fetched["beta"] >= 1.0  # softplus(.) + 1
    with pytest.raises(ValueError, match="has no tensor named 'values'; it offers: action/alpha"):
        ppo.act(np.array([0.1], dtype=np.float32), fetch_tensors=["values"])
    with pytest.raises(TypeError, match="a list of names"):
        ppo.act(np.array([0.1], dtype=np.float32), fetch_tensors="alpha")
    environment = make("minimal", action_type="int")
    random = create_agent({"type": "random"}, states=environment.states, actions=environment.actions)
    with pytest.raises(ValueError, match=r"offers: none \(it has no model\)"):
        random.act(np.array([0.1], dtype=np.float32), fetch_tensors=["logits"])


def test_last_observation_initialize_model_and_set_normalized_specs():
    agent = _agent({"type": "vpg"})
    assert agent.last_observation() == {}
    state = np.array([0.25], dtype=np.float32)
    action = agent.act(state)
    last = agent.last_observation()
    assert last["states"] is state and last["actions"] == action and last["terminal"] is None
    agent.observe(terminal=True, reward=0.5)
    last = agent.last_observation()
    assert last["terminal"] is True and last["reward"] == 0.5 and last["internals"] == {}
    assert agent.initialize_model() == {"policy": agent.policy}
    agent.set_normalized_states({"shape": [1], "min_value": -1, "max_value": 1})  # the same spec, another form
    agent.set_normalized_actions({"type": "int", "num_actions": 2})
    with pytest.raises(ValueError, match="the model was built for states"):
        agent.set_normalized_states({"shape": (3,), "type": "float"})
    with pytest.raises(ValueError, match="build a new agent for other actions"):
        agent.set_normalized_actions({"type": "int", "num_actions": 5})


def test_act_takes_0_4_s_buffered_argument():
    agent = _agent({"type": "ppo"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent.act(np.array([0.0], dtype=np.float32), buffered=False)
