"""Every SpecError the library raises, triggered through the public API, with its path and message.

One table per module. Sites already pinned by a component's own tests (test_networks, test_optimizers, ...) are not
repeated here, except where those tests check only a fragment of the message. Components that must come from a
user's code (a factory that builds the wrong thing, a network class without ``states``) are defined below and
named by ``f"{__name__}:Name"``, as a spec would name them.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from torchforce.agents import AGENTS, create_agent
from torchforce.core.distributions import build_distribution
from torchforce.core.explorations import build_explorations
from torchforce.core.networks import Layer, build_network
from torchforce.core.optimizers import Optimizer, build_optimizer
from torchforce.core.preprocessors import build_preprocessing
from torchforce.environments import Environment, Gym, Minimal, VectorEnvironment, make, make_vector
from torchforce.spec import ActionSpec, SpecError, StateSpec

MLP = [{"type": "dense", "size": 4}]
LEGACY_HINT = (
    "The shipped configs (torchforce/configs/agents/, copied into configs/agents/ by 'tfcli init') show the 0.4 format."
)
ENVS = {
    "int": make("minimal", action_type="int"),
    "bounded": make("minimal", action_type="bounded"),
    "multi": make("multi"),
}

KNOWN_AGENTS = ", ".join(AGENTS.names())


def message(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SpecError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


# -- user components named by path --------------------------------------------------------------------------------


class InternalsNotADict(nn.Module):
    output_size = 2
    internals = [("h", (2,))]

    def __init__(self, states: Any) -> None:
        super().__init__()


class NoStatesArgument(nn.Module):
    output_size = 2

    def __init__(self) -> None:
        super().__init__()


def builds_a_string(*, incoming: Any, path: str) -> str:
    return "dense"


def builds_a_number() -> float:
    return 0.1


def builds_a_tensor(*, incoming: Any, path: str) -> torch.Tensor:
    return torch.zeros(1)


def builds_a_float(parameters: list) -> float:
    return 0.1


def builds_a_function() -> Any:
    return abs


def builds_a_torch_optimizer(parameters: list) -> torch.optim.Optimizer:
    return torch.optim.SGD(parameters, lr=0.1)


class NoLayerArguments(Layer):
    """A layer whose constructor cannot take what torchforce passes to every layer."""

    def __init__(self) -> None:
        super().__init__()


class NoParameters(Optimizer):
    """An optimizer whose constructor cannot take the parameters."""

    def __init__(self) -> None:
        pass


# -- agents: create_agent, Agent, ConstantAgent, update_mode, Policy ----------------------------------------------


@pytest.mark.parametrize(
    ("env", "spec", "kwargs", "text"),
    [
        ("int", 3, {}, 'agent: not an agent spec; expected a dict like {"type": "ppo", ...}, got 3.'),
        ("int", ["ppo"], {}, 'agent: not an agent spec; expected a dict like {"type": "ppo", ...}, got ["ppo"].'),
        (
            "int",
            {"type": "ppo", "network": MLP},
            {"network": MLP},
            "agent.network: given both in the spec and as an argument.\n  Give it once.",
        ),
        ("int", {"network": MLP}, {}, "agent: an agent spec needs 'type'.\n  Known: " + KNOWN_AGENTS + "."),
        (
            "int",
            {"type": "random", "device": "gpu"},
            {},
            'agent.device: not a torch device; expected "cpu", "cuda", "cuda:N" or "auto", got "gpu".',
        ),
        (
            "int",
            {"type": "random", "device": 3},
            {},
            'agent.device: not a torch device; expected "cpu", "cuda", "cuda:N" or "auto", got 3.',
        ),
        (
            "int",
            {"type": "random", "saver": {"directory": "run", "basename": "a/b"}},
            {},
            'agent.saver.basename: not a file name; expected a name like "model", got "a/b".',
        ),
        (
            "int",
            {"type": "random", "saver": {"directory": "run", "basename": ""}},
            {},
            'agent.saver.basename: not a file name; expected a name like "model", got "".',
        ),
        (
            "int",
            {"type": "random", "saver": {"directory": "run", "file": 3}},
            {},
            "agent.saver.file: not a file name; expected a checkpoint file name, or null, got 3.",
        ),
        (
            "multi",
            {"type": "constant", "action_values": {"int": 1}},
            {},
            "agent.action_values: needs a value for action 'bool'; got {\"int\": 1}.",
        ),
        (
            "int",
            {"type": "constant", "action_values": 2},
            {},
            "agent.action_values.action: out of range; expected an integer in [0, 1], got 2.",
        ),
        (
            "int",
            {"type": "constant", "action_values": -1},
            {},
            "agent.action_values.action: out of range; expected an integer in [0, 1], got -1.",
        ),
        (
            "bounded",
            {"type": "constant", "action_values": 1.5},
            {},
            "agent.action_values.action: out of range; expected a number in [-1.0, 1.0], got 1.5.",
        ),
        (
            "int",
            {"type": "constant", "action_values": {"action": 1, "fire": 0}},
            {},
            'agent.action_values.fire: unknown action "fire".\n  Known: action.',
        ),
        (
            "int",
            {"type": "constant", "action_values": "left"},
            {},
            'agent.action_values.action: not an integer; expected an integer in [0, 1], got "left".',
        ),
        (
            "int",
            {"type": "constant", "action_values": [0, 1]},
            {},
            "agent.action_values.action: action 'action' is a scalar; expected an integer in [0, 1], got [0, 1].",
        ),
        (
            "int",
            {"type": "constant", "action_values": None},
            {},
            "agent.action_values.action: not an integer; expected an integer in [0, 1], got null.",
        ),
        (
            "int",
            {"type": "constant", "action_values": 0.5},
            {},  # once silently truncated to 0
            "agent.action_values.action: not an integer; expected an integer in [0, 1], got 0.5.",
        ),
        (
            "int",
            {"type": "constant", "action_values": True},
            {},
            "agent.action_values.action: not an integer; expected an integer in [0, 1], got true.",
        ),
        (
            "multi",
            {"type": "constant", "action_values": {"bool": 1, "bounded": 0.0, "float": 0.0, "int": 0}},
            {},
            "agent.action_values.bool: not a boolean; expected true or false, got 1.",
        ),
        (
            "multi",
            {"type": "constant", "action_values": {"bool": True, "bounded": 0.0, "float": "x", "int": 0}},
            {},
            'agent.action_values.float: not a finite number; expected a finite number, got "x".',
        ),
        (
            "multi",
            {"type": "constant", "action_values": {"bool": True, "bounded": 0.0, "float": float("nan"), "int": 0}},
            {},
            "agent.action_values.float: not a finite number; expected a finite number, got NaN.",
        ),
        (
            "int",
            {"type": "ppo", "network": MLP, "seed": -1},
            {},
            "agent.seed: out of range; expected an integer >= 0, got -1.",
        ),
        ("int", {"type": "random", "seed": "x"}, {}, 'agent.seed: not an integer; expected an integer >= 0, got "x".'),
        (
            "int",
            {"type": "ppo", "network": MLP, "update_mode": {"unit": "episodes"}},
            {},
            'agent.update_mode: needs \'batch_size\'; got {"unit": "episodes"}.',
        ),
        (
            "int",
            {"type": "ppo", "network": MLP, "update_mode": {"batch_size": 2, "frequncy": 2}},
            {},
            "agent.update_mode.frequncy: unknown key.\n  Did you mean 'frequency'?",
        ),
        (
            "int",
            {"type": "dqn", "network": MLP, "update_mode": {"batch_size": 2, "colour": 2}},
            {},
            "agent.update_mode.colour: unknown key.",
        ),
        (
            "int",
            {"type": "ppo", "network": MLP, "update_mode": {"batch_size": 2, "repeat_update": 2}},
            {},
            "agent.update_mode.repeat_update: 'repeat_update' is the 0.3.5 name; use 'updates' (each update on a "
            "batch of its own, as in 0.3.5).\n  Agents learning from what they just collected (VPG, PPO, TRPO, DQN "
            "n-step) update once per batch: train longer on it with PPO's epochs or optimization_steps, or with a "
            "multi_step optimizer. " + LEGACY_HINT,
        ),
        (
            "int",
            {"type": "ppo", "network": MLP, "update_mode": {"batch_size": 2, "update_frequency": 2}},
            {},
            "agent.update_mode.update_frequency: 'update_frequency' is the 0.3.5 name; use 'frequency'.\n  "
            + LEGACY_HINT,
        ),
        (
            "int",
            {"type": "dqn", "network": MLP, "update_mode": {"batch_size": 2, "keep_last_timestep": True}},
            {},
            "agent.update_mode.keep_last_timestep: 'keep_last_timestep' is a 0.3.5 key and is gone in 0.4.\n"
            "  Remove it: every stored timestep keeps its next state, so there is no last timestep to hold back. "
            + LEGACY_HINT,
        ),
        (
            "int",
            {
                "type": "ppo",
                "network": MLP,
                "memory": {"type": "latest", "capacity": 4},
                "update_mode": {"unit": "timesteps", "batch_size": 8},
            },
            {},
            "agent.memory.capacity: too small for one update, which reads batch_size 8 timesteps (update_mode unit "
            "'timesteps'); expected at least 8, got 4.\n"
            "  Raise memory.capacity (it counts timesteps), or lower update_mode.batch_size.",
        ),
        (
            "int",
            {
                "type": "ppo",
                "network": MLP,
                "memory": {"type": "latest", "capacity": 10},
                "update_mode": {"unit": "sequences", "batch_size": 4, "length": 8},
            },
            {},
            "agent.memory.capacity: too small for one update, which reads batch_size 4 sequences of length 8, "
            "4 + 8 - 1 rows (update_mode unit 'sequences'); expected at least 11, got 10.\n"
            "  Raise memory.capacity (it counts timesteps), or lower update_mode.batch_size.",
        ),
        (
            "int",
            {
                "type": "ppo",
                "network": MLP,
                "memory": {"type": "latest", "capacity": 5},
                "update_mode": {"unit": "episodes", "batch_size": 10},
            },
            {},
            "agent.memory.capacity: too small for one update, which reads batch_size 10 complete episodes, each at "
            "least one timestep (update_mode unit 'episodes'); expected at least 10, got 5.\n"
            "  Raise memory.capacity (it counts timesteps), or lower update_mode.batch_size.",
        ),
        (
            "int",
            {"type": "dqn", "network": MLP, "memory": {"type": "replay", "capacity": 16}},
            {},
            "agent.memory.capacity: too small for one update, which reads batch_size 32 timesteps (update_mode unit "
            "'timesteps'); expected at least 32, got 16.\n"
            "  Raise memory.capacity (it counts timesteps), or lower update_mode.batch_size.",
        ),
        (
            "int",
            {"type": "ppo", "network": MLP, "distributions": {"actoin": "categorical"}},
            {},
            "agent.distributions.actoin: unknown action \"actoin\".\n  Known: action. Did you mean 'action'?",
        ),
    ],
)
def test_agent_errors(env: str, spec: Any, kwargs: dict, text: str) -> None:
    environment = ENVS[env]
    assert message(create_agent, spec, states=environment.states, actions=environment.actions, **kwargs) == text


def test_agent_spec_errors_name_the_file(tmp_path: Path) -> None:
    file = tmp_path / "agent.json"
    file.write_text("[1, 2]")
    assert message(create_agent, str(file), states=ENVS["int"].states, actions=ENVS["int"].actions) == (
        f'agent: not an agent spec; expected a dict like {{"type": "ppo", ...}}, got [1, 2] (in {file}).'
    )
    file.write_text('{"network": [{"type": "dense", "size": 4}]}')
    assert message(create_agent, file, states=ENVS["int"].states, actions=ENVS["int"].actions) == (
        f"agent: an agent spec needs 'type' (in {file}).\n  Known: {KNOWN_AGENTS}."
    )


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_device_without_cuda(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    env = ENVS["int"]
    spec = {"type": "ppo", "network": MLP, "device": device}
    assert message(create_agent, spec, states=env.states, actions=env.actions) == (
        f'agent.device: CUDA is not available on this machine; got "{device}".\n  Use "cpu", or "auto" (a GPU where '
        "there is one, else the CPU)."
    )


@pytest.mark.parametrize("available", [False, True])
def test_auto_device_is_a_gpu_where_this_process_sees_one(available: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchforce.agents.compute import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    assert resolve_device("auto") == torch.device("cuda" if available else "cpu")
    if not available:  # an agent built with "auto" on this machine computes on the CPU
        env = ENVS["int"]
        agent = create_agent({"type": "ppo", "network": MLP, "device": "auto"}, states=env.states, actions=env.actions)
        assert agent.device == torch.device("cpu") and agent.act(env.reset()) in range(env.actions["num_actions"])


# -- environments: Gym, MultiState, the action-space adapter -------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kwargs", "text"),
    [
        (
            "gym",
            {"gym_id": ""},
            "environment.gym_id: not a Gymnasium id; expected a registered id like 'CartPole-v1', got \"\".",
        ),
        (
            {"type": "gym", "gym_id": 3},
            {},
            "environment.gym_id: not a Gymnasium id; expected a registered id like 'CartPole-v1', got 3.",
        ),
        (
            "CartPole-v1",
            {"visualize": True, "monitor": "never-made", "monitor_video": 1},
            "environment.visualize: a window and monitor_video exclude each other.",
        ),
        (
            "CartPole-v1",
            {"visualize": True, "render_mode": "rgb_array"},
            "environment.visualize: give either visualize or render_mode, not both.",
        ),
        ("multi", {"action_types": "int"}, 'environment.action_types: not a list of action types; got "int".'),
        ("multi", {"action_types": []}, "environment.action_types: not a list of action types; got []."),
        (
            "CartPole-v1",
            {"render_mode": 3},
            'environment.render_mode: not a render mode; expected a mode name like "rgb_array" or "human", or null, '
            "got 3.",
        ),
        ("CartPole-v1", {"seed": "x"}, 'environment.seed: not an integer; expected an integer >= 0, got "x".'),
        ("CartPole-v1", {"seed": -1}, "environment.seed: out of range; expected an integer >= 0, got -1."),
        (
            "CartPole-v1",
            {"monitor": 3},
            "environment.monitor: not a directory; expected a directory path, or null, got 3.",
        ),
        (
            "CartPole-v1",
            {"monitor": ""},
            'environment.monitor: not a directory; expected a directory path, or null, got "".',
        ),
        (
            "CartPole-v1",
            {"monitor": "never-made", "monitor_safe": "yes"},
            'environment.monitor_safe: not a boolean; expected true or false, got "yes".',
        ),
        (
            "CartPole-v1",
            {"monitor": "never-made", "monitor_video": -1},
            "environment.monitor_video: out of range; expected an integer >= 0, got -1.",
        ),
        ("CartPole-v1", {"visualize": "no"}, 'environment.visualize: not a boolean; expected true or false, got "no".'),
    ],
)
def test_environment_errors(spec: Any, kwargs: dict, text: str) -> None:
    assert message(make, spec, **kwargs) == text
    assert not Path("never-made").exists()


def test_gym_arguments_are_checked_before_gymnasium_sees_them() -> None:
    assert message(Gym, "CartPole-v1", render_mode=3) == (
        'environment.render_mode: not a render mode; expected a mode name like "rgb_array" or "human", or null, got 3.'
    )
    env = Gym("CartPole-v1")
    try:
        assert message(env.seed, "x") == 'seed: not an integer; expected an integer >= 0, got "x".'
        assert env.seed(np.int64(3)) == 3 and type(env.seed(np.int64(3))) is int  # Gymnasium takes Python ints only
        env.reset()
    finally:
        env.close()


def test_ready_gymnasium_environment_takes_no_arguments() -> None:
    env = gymnasium.make("CartPole-v1")
    try:
        assert message(Gym, env, render_mode="human") == (
            'environment: a ready Gymnasium environment takes no constructor arguments; got {"render_mode": "human"}.'
        )
    finally:
        env.close()


def test_monitor_safe_refuses_a_directory_with_records(tmp_path: Path) -> None:
    (tmp_path / "episodes.jsonl").write_text('{"episode": 0}\n')
    assert message(make, "CartPole-v1", monitor=str(tmp_path), monitor_safe=True) == (
        f"environment.monitor: '{tmp_path}' already holds episode records and monitor_safe is set."
    )
    assert (tmp_path / "episodes.jsonl").read_text() == '{"episode": 0}\n'  # left as it was


class TextActions(gymnasium.Env):
    observation_space = spaces.Box(-1.0, 1.0, (2,))
    action_space = spaces.Text(5)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return self.observation_space.sample(), 0.0, False, False, {}


def test_unsupported_action_space() -> None:
    assert message(Gym, TextActions()) == (
        "environment.action_space: unsupported action space Text; "
        "expected Box, Discrete, MultiDiscrete, MultiBinary, or Tuple/Dict of these."
    )


def _picky_creator(**kwargs: Any) -> gymnasium.Env:
    raise TypeError("size must be an int")


def test_constructor_type_error_names_the_id_and_arguments() -> None:
    gym_id = "TorchforceErrorMessagesPicky-v0"
    if gym_id not in gymnasium.registry:
        gymnasium.register(id=gym_id, entry_point=_picky_creator)
    text = message(Gym, gym_id, size="big")
    assert text.startswith(f"""environment: cannot make '{gym_id}' with {{"size": "big"}}: size must be an int""")


# -- vectorized environments ----------------------------------------------------------------------------------------


class Locked(Minimal):
    """An environment that cannot be pickled (it holds a lock)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()


@pytest.mark.parametrize(
    ("build", "pattern"),
    [
        (
            lambda: make_vector(Minimal(), 2),
            r"environment: make_vector needs a spec to build copies from, not a built environment\.",
        ),
        (lambda: VectorEnvironment([]), r"environments: needs at least one environment\."),
        (
            lambda: VectorEnvironment([Minimal()], num_environments=2),
            r"num_environments: does not match the environments given; got 2\.",
        ),
        (
            lambda: VectorEnvironment(factory=lambda: 3, num_environments=2),
            r"factory: returned an int, not an Environment; expected a torchforce Environment or a gymnasium\.Env\.",
        ),
        (
            lambda: VectorEnvironment([Locked()], mode="subprocess"),
            r"environments: cannot be sent to a worker process: cannot pickle '_thread\.lock' object\.\n"
            r"  Pass a factory that builds the environment inside the worker \(make_vector does this\)\.",
        ),
    ],
)
def test_vector_errors(build: Any, pattern: str) -> None:
    text = message(build)
    assert re.fullmatch(pattern, text), text


# -- networks: activations, layers, routing, layer lists, user classes, tf_layer ----------------------------------


@pytest.mark.parametrize(
    ("spec", "states", "text"),
    [
        (
            [{"type": "nonlinearity", "name": "crelu"}],
            {"shape": ()},
            "network[0].name: crelu acts on the last dimension; this input is a scalar per sample.",
        ),
        (
            [{"type": "nonlinearity", "name": "softmax"}],
            {"shape": ()},
            "network[0].name: softmax acts on the last dimension; this input is a scalar per sample.",
        ),
        (
            [{"type": "dense", "size": 2, "activation": 3}],
            None,
            'network[0].activation: not an activation; expected a name like "relu" or {"name": "lrelu", ...}, got 3.',
        ),
        (
            [{"type": "dense", "size": 2, "activation": {"name": "lrelu", "slope": 0.2}}],
            None,
            "network[0].activation.slope: unknown key for an activation.\n  Accepted: name, alpha, beta, max, min.",
        ),
        (
            [{"type": "dense", "size": 2, "activation": {"name": "relu", "mx": 1.0}}],
            None,
            "network[0].activation.mx: unknown key for an activation.\n  Did you mean 'max'?",
        ),
        (
            [{"type": "pool2d", "window": 5, "padding": "VALID"}],
            {"shape": [4, 4, 1]},
            "network[0]: the window (5) is larger than the input (4) with padding VALID.",
        ),
        (
            [{"type": "conv2d", "size": 2, "window": [2, 6], "padding": "VALID"}],
            {"shape": [4, 5, 1]},
            "network[0]: the window (6) is larger than the input (5) with padding VALID.",
        ),
        (
            [{"type": "linear", "size": 2, "weights": [["a", 1.0]] * 4}],
            None,
            'network[0].weights: not a list of numbers for the weights; got [["a", 1.0], ["a", 1.0], ["a", 1.0], '
            '["a", 1.0]].',
        ),
        (
            [{"type": "linear", "size": 2, "bias": [1.0, [2.0]]}],
            None,
            "network[0].bias: not a list of numbers for the bias values; got [1.0, [2.0]].",
        ),
        (
            [{"type": "linear", "size": 2, "weights": {"name": "msra", "slop": 1.0}}],
            None,
            "network[0].weights.slop: unknown key for the msra initializer.\n  Accepted: name, slope.",
        ),
        (
            [{"type": "linear", "size": 2, "weights": True}],
            None,
            'network[0].weights: not a weights initializer; expected null, a number, a list, "xavier", "msra" or '
            '{"name": "orthogonal", "gain": ...}, got true.',
        ),
        (
            [{"type": "dense", "skip": True, "activation": "crelu"}],
            None,
            "network[0].activation: a dense layer with skip=true needs a size-keeping activation.",
        ),
        (
            [{"type": "input", "names": []}],
            None,
            'network[0].names: not a name or a list of names; expected "state" or ["a", "b"], got [].',
        ),
        (
            [{"type": "input", "names": 3}],
            None,
            'network[0].names: not a name or a list of names; expected "state" or ["a", "b"], got 3.',
        ),
        (
            [{"type": "input", "names": ["state", ""]}],
            None,
            'network[0].names: not a name or a list of names; expected "state" or ["a", "b"], got ["state", ""].',
        ),
        (
            [{"type": "input", "names": "previous"}],
            {"a": {"shape": 2}, "b": {"shape": 2}},
            "network[0].names: 'previous' means the current tensor, and there is none yet.\n"
            "  Name a state instead: a, b.",
        ),
        ([{"type": "output", "name": ""}], None, 'network[0].name: not a name; expected a non-empty string, got "".'),
        (
            [{"type": "dense", "size": 2}, {"type": "output", "name": 3}],
            None,
            "network[1].name: not a name; expected a non-empty string, got 3.",
        ),
        (
            {"type": "torchforce.core.networks:LayeredNetwork", "layers": 3},
            None,
            'network: not a layer list; expected a list like [{"type": "dense", "size": 32}], got 3.',
        ),
        # a path names a Layer subclass, checked before anything is called (issue 7): no factory functions
        (
            [{"type": "torch.nn:Linear"}],
            None,
            "network[0].type: module 'torch.nn' belongs to the installed package 'torch', which does not depend on "
            'torchforce and so holds no layer; got "torch.nn:Linear".\n  Importing a module runs its code, so a config '
            "may name only modules of packages built on torchforce, and your own modules.",
        ),
        (
            [{"type": f"{__name__}:builds_a_string"}],
            None,
            f"network[0].type: '{__name__}:builds_a_string' is not a layer class; expected a subclass of "
            f"torchforce.core.networks.Layer, got the function {__name__}.builds_a_string.",
        ),
        (
            [{"type": f"{__name__}:builds_a_tensor"}],
            None,
            f"network[0].type: '{__name__}:builds_a_tensor' is not a layer class; expected a subclass of "
            f"torchforce.core.networks.Layer, got the function {__name__}.builds_a_tensor.",
        ),
        (
            [{"type": f"{__name__}:NoLayerArguments"}],
            None,
            f"network[0].type: '{__name__}:NoLayerArguments' cannot be built here: its constructor takes no "
            "'incoming', 'path'.\n  torchforce passes 'incoming' and 'path' to every layer; accept them as keyword "
            "arguments.",
        ),
        (
            {"type": f"{__name__}:NoStatesArgument"},
            None,
            "network.type: network 'NoStatesArgument' cannot be built: its constructor takes no 'states'.",
        ),
        (
            f"{__name__}:NoStatesArgument",
            None,  # a string spec has no 'type' key to point at
            "network: network 'NoStatesArgument' cannot be built: its constructor takes no 'states'.",
        ),
        (
            f"{__name__}:builds_a_number",
            None,
            f"network: '{__name__}:builds_a_number' is not a network class; expected a subclass of torch.nn.Module, "
            f"got the function {__name__}.builds_a_number.",
        ),
        (
            {"type": f"{__name__}:builds_a_number"},
            None,
            f"network.type: '{__name__}:builds_a_number' is not a network class; expected a subclass of "
            f"torch.nn.Module, got the function {__name__}.builds_a_number.",
        ),
        (
            [{"type": "internal_lstm", "size": 2, "lstmcell_args": {"use_peepholes": True}}],
            None,
            "network[0].lstmcell_args.use_peepholes: unknown key.\n  Accepted: forget_bias.",
        ),
        (
            [{"type": "tf_layer", "layer": "batch_normalization"}],
            {"shape": ()},  # no axis given: no axis blamed
            "network[0]: batch_normalization normalizes over the last (channels) axis; this input is a scalar per "
            'sample.\n  Give the input a channels axis first, e.g. states_preprocessing {"type": "expand_dims", '
            '"axis": -1}.',
        ),
        (
            [{"type": "tf_layer", "layer": "batch_normalization", "axis": 0}],
            {"shape": [3, 2]},
            "network[0].axis: only the last (channels) axis is supported; got 0.",
        ),
        (
            [{"type": "tf_layer", "layer": 3}],
            None,
            'network[0].layer: not a tf_layer name; expected a tf.layers name like "dense", got 3.\n'
            "  Known: average_pooling2d, batch_normalization, conv1d, conv2d, dense, dropout, flatten, max_pooling2d.",
        ),
        (
            [{"type": "tf_layer", "layer": ["dense"]}],
            None,
            'network[0].layer: not a tf_layer name; expected a tf.layers name like "dense", got ["dense"].\n'
            "  Known: average_pooling2d, batch_normalization, conv1d, conv2d, dense, dropout, flatten, max_pooling2d.",
        ),
        (
            [{"type": "tf_layer", "layer": "dense", "units": 3, "unit": 3}],
            None,
            "network[0].unit: unknown argument for tf_layer 'dense'.\n  Did you mean 'units'?",
        ),
        (
            [{"type": "tf_layer", "layer": "flatten", "units": 3}],
            None,
            "network[0].units: unknown argument for tf_layer 'flatten'.\n  Accepted: no arguments.",
        ),
        (
            [{"type": "tf_layer", "layer": "dropout", "seed": 3}],
            None,
            "network[0].seed: unknown argument for tf_layer 'dropout'.\n  Accepted: rate.",
        ),
    ],
)
def test_network_errors(spec: Any, states: Any, text: str) -> None:
    assert message(build_network, spec, states or {"shape": 4}) == text


def test_network_internals_must_be_a_dict() -> None:
    assert message(build_network, f"{__name__}:InternalsNotADict", {"shape": 4}) == (
        'network: the network InternalsNotADict has internals that are not a dict; got [["h", [2]]].'
    )


# -- explorations, preprocessors, distributions ---------------------------------------------------------------------

INT = ActionSpec("move", "int", (), num_actions=3)
FLOAT = ActionSpec("force", "float", ())


@pytest.mark.parametrize(
    ("spec", "actions", "pattern"),
    [
        (
            f"{__name__}:builds_a_number",
            {"move": INT},
            r"actions_exploration: '\w+:builds_a_number' is not an exploration class; expected a subclass of "
            r"torchforce\.core\.explorations\.Exploration, got the function \w+\.builds_a_number\.",
        ),
        (
            {"move": f"{__name__}:builds_a_number"},
            {"move": INT},
            r"actions_exploration\.move: '\w+:builds_a_number' is not an exploration class; expected a subclass of "
            r"torchforce\.core\.explorations\.Exploration, got the function \w+\.builds_a_number\.",
        ),
        (
            f"{__name__}:builds_a_function",
            {"move": INT},
            r"actions_exploration: '\w+:builds_a_function' is not an exploration class; expected a subclass of "
            r"torchforce\.core\.explorations\.Exploration, got the function \w+\.builds_a_function\.",
        ),
        (
            {"type": "epsilon_anneal"},
            {"force": FLOAT},
            r"actions_exploration: this exploration fits none of the actions: epsilon_anneal replaces actions by "
            r"uniform random ones, which needs bounds, and float action 'force' has no min_value/max_value \(use "
            r"gaussian_noise or ornstein_uhlenbeck\); got \{\"type\": \"epsilon_anneal\"\}\.",
        ),
        (
            "ornstein_uhlenbeck",
            {"move": INT},
            r"actions_exploration: this exploration fits none of the actions: ornstein_uhlenbeck adds noise to float "
            r"actions, and action 'move' is int; got \"ornstein_uhlenbeck\"\.",
        ),
    ],
)
@pytest.mark.filterwarnings("ignore:.*it is not applied there:UserWarning")  # a shared spec warns per misfit first
def test_exploration_errors(spec: Any, actions: dict, pattern: str) -> None:
    text = message(build_explorations, spec, actions)
    assert re.fullmatch(pattern, text), text


@pytest.mark.parametrize("spec", [f"{__name__}:builds_a_function", {"state": f"{__name__}:builds_a_function"}])
def test_preprocessor_factory_that_builds_no_preprocessor(spec: Any) -> None:
    path = "states_preprocessing" if isinstance(spec, str) else "states_preprocessing.state"
    assert message(build_preprocessing, spec, {"state": StateSpec("state", (4,), "float")}) == (
        f"{path}: '{__name__}:builds_a_function' is not a preprocessor class; expected a subclass of "
        f"torchforce.core.preprocessors.Preprocessor, got the function {__name__}.builds_a_function."
    )


@pytest.mark.parametrize(
    ("probabilities", "text"),
    [
        (0.5, "distributions.move.probabilities: not a list; expected 3 numbers, got 0.5."),
        ("abc", 'distributions.move.probabilities: not a list; expected 3 numbers, got "abc".'),
        ({"a": 1.0}, 'distributions.move.probabilities: not a list; expected 3 numbers, got {"a": 1.0}.'),
    ],
)
def test_categorical_probabilities_must_be_a_list(probabilities: Any, text: str) -> None:
    spec = {"type": "categorical", "probabilities": probabilities}
    assert message(build_distribution, INT, 4, spec, path="distributions.move") == text


# -- optimizers -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        (
            {"type": torch.optim.SGD},
            r"optimizer\.type: class SGD is not an optimizer; expected an Optimizer subclass\.",
        ),
        (torch.optim.SGD, r"optimizer: class SGD is not an optimizer; expected an Optimizer subclass\."),
        (
            "synchronization",
            r"optimizer: 'synchronization' updates a target network and is not a loss optimizer\.\n"
            r"  Use the agent's target_sync_frequency / target_update_weight \(built as Synchronization\)\.",
        ),
        (
            {"type": "multi_step", "num_steps": 2},
            r"optimizer\.optimizer: the meta optimizer 'multi_step' needs a nested optimizer spec\.\n"
            r"  For example \{\"type\": \"multi_step\", "
            r"\"optimizer\": \{\"type\": \"adam\", \"learning_rate\": 0\.001\}\}\.",
        ),
        (
            {"type": "clipped_step", "clipping_value": 1.0, "optimizer": None},
            r"optimizer\.optimizer: the meta optimizer 'clipped_step' needs a nested optimizer spec\.\n.*",
        ),
        (
            {"type": "momentum", "learning_rate": 0.1, "momentum": 0.0, "use_nesterov": True},
            r"optimizer\.momentum: Nesterov momentum needs momentum > 0; got 0\.0\.",
        ),
        # a path names an Optimizer subclass, checked before anything is called (issue 7): no factory functions
        (
            f"{__name__}:builds_a_torch_optimizer",
            r"optimizer: '\w+:builds_a_torch_optimizer' is not an optimizer class; expected a subclass of "
            r"torchforce\.core\.optimizers\.Optimizer, got the function \w+\.builds_a_torch_optimizer\.",
        ),
        (
            "torch.optim:SGD",
            r"optimizer: module 'torch\.optim' belongs to the installed package 'torch', which does not depend on "
            r"torchforce and so holds no optimizer; got \"torch\.optim:SGD\"\.\n.*",
        ),
        (
            f"{__name__}:NoParameters",
            r"optimizer: optimizer '[\w.]+:NoParameters' cannot be built here: it cannot be called with the "
            r"parameters \(too many positional arguments\)\.\n"
            r"  torchforce passes the list of parameters as the first argument to every optimizer\.",
        ),
    ],
)
def test_optimizer_errors(spec: Any, pattern: str) -> None:
    text = message(build_optimizer, spec, [nn.Parameter(torch.zeros(2))])
    assert re.fullmatch(pattern, text, re.S), text


# -- spec files -----------------------------------------------------------------------------------------------------


def test_unreadable_spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "agent.json"
    file.write_text('{"type": "random"}')

    def refuse(self: Path, *args: Any, **kwargs: Any) -> str:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)  # root reads any file: chmod cannot make one unreadable here
    assert message(create_agent, str(file), states=ENVS["int"].states, actions=ENVS["int"].actions) == (
        f"cannot read the spec file: Permission denied (in {file})."
    )
    assert message(Environment.from_spec, file) == f"cannot read the spec file: Permission denied (in {file})."
