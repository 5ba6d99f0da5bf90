"""Every shipped config loads unchanged and runs.

Agent configs (the 2018 examples of docs/tensorforce-0.4.md, Example configs, for the agents that exist, plus the
tuned CartPole ones) go through ``create_agent(path, states=..., actions=..., network=...)`` exactly as 2018 loaded
them, act and observe in one environment and in a vectorized batch, and update once. Every 2018 example network
builds through ``build_network`` and drives an agent. Environment configs build.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from torchforce.agents import AGENTS, create_agent
from torchforce.configs import KINDS, folder, names, shipped
from torchforce.core.networks import build_network, shipped_networks
from torchforce.environments import Environment, VectorEnvironment, make
from torchforce.spec import SpecError

# the example agent configs of 0.4.3 and the agent each one is for
EXAMPLES_2018 = {
    "dqn": "dqn",
    "dqn_visual": "dqn",
    "dqn_ue4": "dqn",
    "dqfd": "dqfd",
    "naf": "naf",
    "ppo": "ppo",
    "ppo_cnn": "ppo",
    "trpo": "trpo",
    "vpg": "vpg",
    "vpg_nobaseline": "vpg",
    "vpg_visual": "vpg",
    "ddpg": "ddpg",
}
TUNED = {
    "ppo_cartpole",
    "dqn_cartpole",
    "vpg_cartpole",
    "trpo_cartpole",
    "dqfd_cartpole",
    "dqn_nstep_cartpole",
    "ddpg_pendulum",
    "naf_pendulum",
    "ppo_halfcheetah",
    "ppo_hopper",
    "ddpg_halfcheetah",
    "naf_halfcheetah",
}
NETWORKS_2018 = {
    "mlp2_network",
    "mlp2_normalized_network",
    "mlp2_embedding_network",
    "mlp2_lstm_network",
    "cnn_dqn_network",
    "cnn_dqn2013_network",
    "cnn_network_2048",
    "cnn2x2_network",
}
SAVER_2018 = {"directory": None, "seconds": 600}
EXECUTION_2018 = {"type": "single", "session_config": None, "distributed_spec": None}


class Frames(Environment):
    """Random image states in [0, 255] (``shape`` (H, W, C), or (H, W) for a grayscale stream), three actions,
    episodes of ``episode_length`` steps; reward 1 for action 1. ``uint8``: the frames are bytes (a uint8 state,
    as Atari frames are), not floats."""

    def __init__(
        self, shape: tuple[int, ...] = (24, 24, 3), *, episode_length: int = 3, seed: int = 0, uint8: bool = False
    ) -> None:
        self.shape, self.episode_length, self.uint8 = tuple(shape), episode_length, uint8
        self.rng = np.random.default_rng(seed)
        self.t = 0

    @property
    def states(self) -> dict:
        if self.uint8:
            return {"type": "uint8", "shape": self.shape}
        return {"type": "float", "shape": self.shape, "min_value": 0.0, "max_value": 255.0}

    @property
    def actions(self) -> dict:
        return {"type": "int", "num_actions": 3}

    def _frame(self) -> np.ndarray:
        return self.rng.integers(0, 256, size=self.shape).astype(np.uint8 if self.uint8 else np.float32)

    def reset(self) -> np.ndarray:
        self.t = 0
        return self._frame()

    def execute(self, actions):
        self.t += 1
        return self._frame(), int(self.t >= self.episode_length), float(np.asarray(actions).item() == 1)


class Tokens(Environment):
    """A scalar int state with 100 values (what ``mlp2_embedding_network`` looks up), two actions."""

    def __init__(self, *, episode_length: int = 4, seed: int = 0) -> None:
        self.episode_length, self.rng, self.t = episode_length, np.random.default_rng(seed), 0

    @property
    def states(self) -> dict:
        return {"type": "int", "shape": (), "num_values": 100}

    @property
    def actions(self) -> dict:
        return {"type": "int", "num_actions": 2}

    def reset(self) -> np.ndarray:
        self.t = 0
        return np.asarray(self.rng.integers(100))

    def execute(self, actions):
        self.t += 1
        return np.asarray(self.rng.integers(100)), int(self.t >= self.episode_length), 1.0


def minimal(seed: int = 0) -> Environment:
    return make("minimal", episode_length=4, seed=seed)


# the environment and the network each agent config runs with (configs without a network of their own get one)
AGENT_SETUPS = {
    "ddpg": (lambda seed: make("minimal", action_type="bounded", episode_length=4, seed=seed), "mlp2_network"),
    "ddpg_pendulum": (lambda seed: make("minimal", action_type="bounded", episode_length=4, seed=seed), None),
    "naf": (lambda seed: make("minimal", action_type="float", episode_length=4, seed=seed), "mlp2_network"),
    "naf_pendulum": (lambda seed: make("minimal", action_type="bounded", episode_length=4, seed=seed), None),
    # the MuJoCo ones (tests/learning/test_mujoco_smoke.py runs them on their environments)
    "ppo_halfcheetah": (lambda seed: make("minimal", action_type="bounded", episode_length=4, seed=seed), None),
    "ppo_hopper": (lambda seed: make("minimal", action_type="bounded", episode_length=4, seed=seed), None),
    "ddpg_halfcheetah": (lambda seed: make("minimal", action_type="bounded", episode_length=4, seed=seed), None),
    "naf_halfcheetah": (lambda seed: make("minimal", action_type="bounded", episode_length=4, seed=seed), None),
    "dqfd": (minimal, "mlp2_network"),
    "dqfd_cartpole": (minimal, None),
    "dqn": (minimal, "mlp2_network"),
    "dqn_cartpole": (minimal, None),
    "dqn_nstep_cartpole": (minimal, None),
    "dqn_atari": (lambda seed: Frames((36, 36, 4), seed=seed, uint8=True), None),  # the smallest Nature CNN input
    "dqn_ue4": (lambda seed: Frames((24, 24), seed=seed), "cnn2x2_network"),  # divide, then stack 4 frames
    "dqn_visual": (lambda seed: Frames((40, 40, 3), seed=seed), "cnn_dqn2013_network"),  # resized to 84x84x1
    "ppo": (minimal, "mlp2_network"),
    "ppo_cartpole": (minimal, None),
    "trpo_cartpole": (minimal, None),
    "vpg_cartpole": (minimal, None),
    "ppo_cnn": (lambda seed: Frames((24, 24, 3), seed=seed), "cnn2x2_network"),
    "ppo_atari": (lambda seed: Frames((36, 36, 4), seed=seed, uint8=True), None),
    "trpo": (minimal, "mlp2_network"),
    "vpg": (minimal, "mlp2_network"),
    "vpg_nobaseline": (minimal, "mlp2_network"),
    "vpg_visual": (lambda seed: Frames((40, 40, 3), seed=seed), "cnn2x2_network"),  # resized to 64x64x3
}
# the states each network config is for, and its output size
NETWORK_SETUPS = {
    "mlp2_network": (minimal, 32),
    "mlp2_normalized_network": (minimal, 64),
    "mlp2_embedding_network": (lambda seed: Tokens(seed=seed), 32),
    "mlp2_lstm_network": (minimal, 32),
    "cnn_dqn_network": (lambda seed: Frames((36, 36, 4), seed=seed), 512),
    "cnn_dqn2013_network": (lambda seed: Frames((40, 40, 1), seed=seed), 256),
    "cnn_network_2048": (lambda seed: Frames((4, 4, 1), seed=seed), 64),
    "cnn2x2_network": (lambda seed: Frames((16, 16, 3), seed=seed), 128),
}


def load(name: str) -> dict:
    return json.loads(shipped("agents", name).read_text())


def build_agent(name: str, environment, network: str | None = None):
    """``create_agent`` on the shipped file itself, unchanged; the network goes in separately as in 2018."""
    default_network = AGENT_SETUPS[name][1]
    network = network or default_network
    kwargs = {} if network is None else {"network": shipped("networks", network)}
    return create_agent(shipped("agents", name), states=environment.states, actions=environment.actions, **kwargs)


def run_single(agent, environment, steps: int) -> None:
    """``steps`` act/observe steps in one environment; the second episode is cut at 2 steps (terminal 2)."""
    state, length, episode = environment.reset(), 0, 0
    for _ in range(steps):
        state, terminal, reward = environment.execute(agent.act(state))
        length += 1
        if not terminal and episode == 1 and length == 2:
            terminal = 2
        agent.observe(terminal=terminal, reward=reward, next_states=state if terminal == 2 else None)
        if terminal:
            state, length, episode = environment.reset(), 0, episode + 1


def run_until_update(agent, environments: VectorEnvironment, limit: int) -> int:
    """Vectorized act/observe until the agent's first update; the number of steps it took."""
    states = environments.reset()
    for step in range(1, limit + 1):
        result = environments.execute(agent.act(states))
        states = result.states
        agent.observe(terminal=result.terminal, reward=result.reward)
        if agent.updates:
            return step
    raise AssertionError(f"no update within {limit} vectorized steps ({agent})")


# ---------------------------------------------------------------------------------------------- what is shipped


def test_the_2018_examples_of_every_existing_agent_are_shipped():
    shipped_agents = set(names("agents"))
    expected = {name for name, agent in EXAMPLES_2018.items() if AGENTS.canonical(agent) is not None}
    assert expected == set(EXAMPLES_2018)  # every agent of 2018 exists
    assert expected | TUNED <= shipped_agents
    assert set(AGENT_SETUPS) == shipped_agents, "a new agent config needs an entry in AGENT_SETUPS"
    assert set(shipped_networks()) == NETWORKS_2018 == set(NETWORK_SETUPS) == set(names("networks"))


@pytest.mark.parametrize("name", names("agents"))
def test_every_shipped_agent_config_is_for_an_existing_agent(name):
    assert AGENTS.canonical(load(name)["type"]) is not None


def test_the_2018_examples_keep_their_2018_form():
    # 0.4.3's files, verbatim
    assert load("dqn") == {
        "type": "dqn_agent",
        "update_mode": {"unit": "timesteps", "batch_size": 64, "frequency": 4},
        "memory": {"type": "replay", "capacity": 10000, "include_next_states": True},
        "optimizer": {
            "type": "clipped_step",
            "clipping_value": 0.1,
            "optimizer": {"type": "adam", "learning_rate": 1e-3},
        },
        "discount": 0.99,
        "entropy_regularization": None,
        "double_q_model": True,
        "target_sync_frequency": 1000,
        "target_update_weight": 1.0,
        "actions_exploration": {
            "type": "epsilon_anneal",
            "initial_epsilon": 0.5,
            "final_epsilon": 0.0,
            "timesteps": 10000,
        },
        "saver": SAVER_2018,
        "summarizer": {"directory": None, "labels": ["graph", "total-loss"]},
        "execution": EXECUTION_2018,
    }
    ppo = load("ppo")
    assert ppo == {
        "type": "ppo_agent",
        "update_mode": {"unit": "episodes", "batch_size": 10, "frequency": 10},
        "memory": {"type": "latest", "include_next_states": False, "capacity": 5000},
        "step_optimizer": {"type": "adam", "learning_rate": 1e-3},
        "subsampling_fraction": 0.1,
        "optimization_steps": 50,
        "discount": 0.99,
        "entropy_regularization": 0.01,
        "gae_lambda": None,
        "likelihood_ratio_clipping": 0.2,
        "baseline_mode": "states",
        "baseline": {"type": "mlp", "sizes": [32, 32]},
        "baseline_optimizer": {
            "type": "multi_step",
            "num_steps": 5,
            "optimizer": {"type": "adam", "learning_rate": 1e-3},
        },
        "saver": SAVER_2018,
        "summarizer": ppo["summarizer"],
        "execution": EXECUTION_2018,
    }
    # ppo_cnn = ppo with a cnn baseline
    assert load("ppo_cnn") == {**ppo, "baseline": {"type": "cnn", "conv_sizes": [32, 32], "dense_sizes": [32]}}
    # dqn_visual and dqn_ue4 differ only in their preprocessing
    visual, ue4 = load("dqn_visual"), load("dqn_ue4")
    assert visual["states_preprocessing"] == [
        {"type": "image_resize", "width": 84, "height": 84},
        {"type": "grayscale"},
        {"type": "divide", "scale": 255},
    ]
    assert ue4["states_preprocessing"] == [
        {"type": "divide", "scale": 255},
        {"type": "sequence", "length": 4, "add_rank": True},
    ]
    assert {**visual, "states_preprocessing": None} == {**ue4, "states_preprocessing": None}
    assert visual["type"] == "dqn_agent" and visual["discount"] == 0.97
    assert visual["optimizer"] == {"type": "adam", "learning_rate": 1e-3}
    assert visual["actions_exploration"] == {
        "type": "epsilon_decay",
        "initial_epsilon": 1.0,
        "final_epsilon": 0.1,
        "timesteps": 100000,
    }
    assert visual["saver"] == SAVER_2018 and visual["execution"] == EXECUTION_2018
    # 2018 example configs never name a network: it is given separately (-n mlp2_network.json)
    # vpg: 0.4.3's ({episodes, 20, 20}, latest 5000, adam 2e-2, the ppo baseline); without a baseline;
    # visual = a cnn baseline and 64x64 images
    vpg = load("vpg")
    assert {key: vpg[key] for key in ("type", "update_mode", "memory", "optimizer", "baseline_mode", "baseline")} == {
        "type": "vpg_agent",
        "update_mode": {"unit": "episodes", "batch_size": 20, "frequency": 20},
        "memory": {"type": "latest", "include_next_states": False, "capacity": 5000},
        "optimizer": {"type": "adam", "learning_rate": 0.02},
        "baseline_mode": "states",
        "baseline": {"type": "mlp", "sizes": [32, 32]},
    }
    assert vpg["baseline_optimizer"] == ppo["baseline_optimizer"] and vpg["saver"] == SAVER_2018
    assert load("vpg_nobaseline") == {**vpg, "baseline_mode": None, "baseline": None, "baseline_optimizer": None}
    assert load("vpg_visual") == {
        **vpg,
        "baseline": {"type": "cnn", "conv_sizes": [16, 16], "dense_sizes": [128]},
        "states_preprocessing": [{"type": "image_resize", "width": 64, "height": 64}],
    }
    # trpo: {episodes, 20, 20}, latest 5000, learning_rate (the KL bound) 1e-2, everything else null
    assert {key: value for key, value in load("trpo").items() if key not in ("saver", "summarizer", "execution")} == {
        "type": "trpo_agent",
        "update_mode": {"unit": "episodes", "batch_size": 20, "frequency": 20},
        "memory": {"type": "latest", "include_next_states": False, "capacity": 5000},
        "learning_rate": 0.01,
        "discount": 0.99,
        "entropy_regularization": None,
        "gae_lambda": None,
        "likelihood_ratio_clipping": None,
        "baseline_mode": None,
        "baseline": None,
        "baseline_optimizer": None,
    }
    # dqfd: 0.4.3's ({timesteps, 64, 4}, replay 10000, adam 1e-3, sync 1000, epsilon_decay 0.5 -> 0 / 10000)
    dqfd = load("dqfd")
    assert {
        key: dqfd[key]
        for key in ("type", "update_mode", "memory", "optimizer", "target_sync_frequency", "actions_exploration")
    } == {
        "type": "dqfd_agent",
        "update_mode": {"unit": "timesteps", "batch_size": 64, "frequency": 4},
        "memory": {"type": "replay", "capacity": 10000, "include_next_states": True},
        "optimizer": {"type": "adam", "learning_rate": 1e-3},
        "target_sync_frequency": 1000,
        "actions_exploration": {
            "type": "epsilon_decay",
            "initial_epsilon": 0.5,
            "final_epsilon": 0.0,
            "timesteps": 10000,
        },
    }
    # ddpg and naf: 0.4.3's (ddpg: {timesteps, 64, 64}, replay 100000, adam 1e-4, critic {64, 64} with adam
    # 1e-3, sync 1 / 0.999, OU(.3, 0, .15); naf: {timesteps, 64, 4}, replay 10000, adam 1e-3, double Q, sync 1000 / 1,
    # OU(.2, 0, .15))
    ddpg, naf = load("ddpg"), load("naf")
    assert (ddpg["update_mode"], ddpg["critic_network"], ddpg["target_update_weight"]) == (
        {"unit": "timesteps", "batch_size": 64, "frequency": 64},
        {"size_t0": 64, "size_t1": 64},
        0.999,
    )
    assert ddpg["actions_exploration"] == {"type": "ornstein_uhlenbeck", "sigma": 0.3, "mu": 0.0, "theta": 0.15}
    assert (naf["update_mode"], naf["memory"]["capacity"], naf["double_q_model"], naf["target_sync_frequency"]) == (
        {"unit": "timesteps", "batch_size": 64, "frequency": 4},
        10000,
        True,
        1000,
    )
    for name in EXAMPLES_2018:
        assert "network" not in load(name), name


def test_reference_network_shapes():
    layers = {name: json.loads(shipped("networks", name).read_text()) for name in NETWORKS_2018}
    assert [(layer["type"], layer["size"]) for layer in layers["mlp2_network"]] == [("dense", 32), ("dense", 32)]
    assert [(layer["type"], layer.get("size")) for layer in layers["mlp2_lstm_network"]] == [
        ("dense", 32),
        ("dense", 32),
        ("internal_lstm", 32),
    ]
    conv = [(layer["size"], layer["window"], layer["stride"]) for layer in layers["cnn_dqn_network"][:3]]
    assert conv == [(32, 8, 4), (64, 4, 2), (64, 3, 1)] and layers["cnn_dqn_network"][-1]["size"] == 512
    assert layers["mlp2_embedding_network"][0] == {"type": "embedding", "indices": 100, "size": 32}


def test_config_lookup_errors_name_what_is_known():
    with pytest.raises(SpecError, match="Did you mean 'ppo'"):
        shipped("agents", "ppo0")
    with pytest.raises(SpecError, match="Known: agents, clusters"):
        folder("agent")
    assert shipped("agents", "ppo.json") == shipped("agents", "ppo")


# ---------------------------------------------------------------------------------------------- agents


@pytest.mark.parametrize("name", sorted(AGENT_SETUPS))
def test_shipped_agent_config_loads_unchanged_acts_observes_and_updates(name):
    make_environment, _ = AGENT_SETUPS[name]
    environment = make_environment(0)
    agent = build_agent(name, environment)
    run_single(agent, environment, steps=8)
    assert agent.timestep == 8 and agent.episode >= 2
    # an independent act (evaluation) leaves the counters alone
    agent.act(environment.reset(), deterministic=True, independent=True)
    assert agent.timestep == 8
    # a fresh agent from the same file in a vectorized batch: one act per step for 8 rows, up to its first update
    environments = VectorEnvironment([make_environment(seed) for seed in range(8)])
    agent = build_agent(name, environments)
    # naf_pendulum: first_update 2000 = 250 steps; dqn_atari: first_update 20000 = 2500 steps
    first_update = (load(name).get("update_mode") or {}).get("first_update", 0)
    steps = run_until_update(agent, environments, limit=max(260, first_update // 8 + 10))
    assert agent.timestep == 8 * steps and agent.updates >= 1


def test_2018_configs_load_through_from_spec_with_the_2018_kwargs():
    from torchforce.agents import Agent

    environment = make("gym", gym_id="CartPole-v1")
    spec = load("dqn")
    network = json.loads(shipped("networks", "mlp2_network").read_text())
    agent = Agent.from_spec(
        spec=spec, kwargs={"states": environment.states, "actions": environment.actions, "network": network}
    )
    assert type(agent).__name__ == "DQNAgent"
    run_single(agent, environment, steps=5)
    environment.close()


# ---------------------------------------------------------------------------------------------- networks


def _batch(states: dict, size: int) -> dict[str, torch.Tensor]:
    spec = states
    shape = tuple(spec["shape"])
    if spec["type"] == "int":
        return {"state": torch.randint(0, spec["num_values"], (size, *shape))}
    return {"state": torch.rand(size, *shape) * spec.get("max_value", 1.0)}


@pytest.mark.parametrize("name", sorted(NETWORK_SETUPS))
def test_shipped_network_config_builds(name):
    make_environment, size = NETWORK_SETUPS[name]
    states = make_environment(0).states
    for spec in (shipped("networks", name), name, json.loads(shipped("networks", name).read_text())):
        network = build_network(spec, states)
        assert network.output_size == size
    network.eval()
    output, internals = network(_batch(states, 3), network.initial_internals(3))
    assert output.shape == (3, size) and torch.isfinite(output).all()
    assert set(internals) == set(network.internals)
    assert bool(network.internals) == (name == "mlp2_lstm_network")


def _agent_network_pairs() -> list:
    pairs = []
    for name in sorted(NETWORK_SETUPS):
        image = name.startswith("cnn")
        for agent in ("dqn",) if name == "mlp2_embedding_network" else ("dqn", "ppo_cnn" if image else "ppo"):
            pairs.append(pytest.param(agent, name, id=f"{agent}-{name}"))
    return pairs


@pytest.mark.parametrize(("agent_name", "network"), _agent_network_pairs())
def test_shipped_network_config_drives_an_agent(agent_name, network):
    make_environment, _ = NETWORK_SETUPS[network]
    environment = make_environment(0)
    agent = build_agent(agent_name, environment, network=network)
    if agent_name == "ppo_cnn":  # 50 optimization steps of two CNNs are slow on a CPU: act and observe only
        run_single(agent, environment, steps=8)
        assert agent.timestep == 8
        return
    run_single(agent, environment, steps=70)  # past dqn's first update (64) and ppo's 10 episodes
    assert agent.updates >= 1


# ---------------------------------------------------------------------------------------------- other kinds


@pytest.mark.parametrize("kind", [kind for kind in KINDS if kind != "sweeps"])  # YAML: tests/client/test_sweep.py
def test_every_shipped_config_is_valid_json(kind):
    for name in names(kind):
        assert isinstance(json.loads(shipped(kind, name).read_text()), dict | list), name


@pytest.mark.parametrize("name", names("environments"))
def test_shipped_environment_config_builds(name):
    environment = make(shipped("environments", name))
    environment.reset()
    environment.close()
