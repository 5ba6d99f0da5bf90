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
import pytest
import torch
from gymnasium import spaces
from torch import nn

from torchforce.agents import create_agent
from torchforce.core.distributions import build_distribution
from torchforce.core.explorations import build_explorations
from torchforce.core.networks import build_network
from torchforce.core.optimizers import build_optimizer
from torchforce.core.preprocessors import build_preprocessing
from torchforce.environments import Environment, Gym, Minimal, VectorEnvironment, make, make_vector
from torchforce.spec import ActionSpec, SpecError, StateSpec

MLP = [{"type": "dense", "size": 4}]
ENVS = {
    "int": make("minimal", action_type="int"),
    "bounded": make("minimal", action_type="bounded"),
    "multi": make("multi"),
}


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


def builds_a_function() -> Any:
    return abs


def builds_a_torch_optimizer(parameters: list) -> torch.optim.Optimizer:
    return torch.optim.SGD(parameters, lr=0.1)


# -- agents: create_agent, Agent, ConstantAgent, update_mode, Policy ----------------------------------------------


@pytest.mark.parametrize(
    ("env", "spec", "kwargs", "text"),
    [
        ("int", 3, {}, 'agent: not an agent spec; expected a dict like {"type": "ppo", ...}, got 3.'),
        ("int", ["ppo"], {}, 'agent: not an agent spec; expected a dict like {"type": "ppo", ...}, got ["ppo"].'),
        ("int", {"type": "ppo", "network": MLP}, {"network": MLP},
         "agent.network: given both in the spec and as an argument.\n  Give it once."),
        ("int", {"network": MLP}, {}, "agent: an agent spec needs 'type'.\n  Known: constant, dqn, ppo, random."),
        ("int", {"type": "random", "device": "gpu"}, {},
         'agent.device: not a torch device; expected "cpu" or "cuda", got "gpu".'),
        ("int", {"type": "random", "device": 3}, {},
         'agent.device: not a torch device; expected "cpu" or "cuda", got 3.'),
        ("int", {"type": "random", "saver": {"directory": "run", "basename": "a/b"}}, {},
         'agent.saver.basename: not a file name; expected a name like "model", got "a/b".'),
        ("int", {"type": "random", "saver": {"directory": "run", "basename": ""}}, {},
         'agent.saver.basename: not a file name; expected a name like "model", got "".'),
        ("int", {"type": "random", "saver": {"directory": "run", "file": 3}}, {},
         "agent.saver.file: not a file name; expected a checkpoint file name, or null, got 3."),
        ("multi", {"type": "constant", "action_values": {"int": 1}}, {},
         "agent.action_values: needs a value for action 'bool'; got {\"int\": 1}."),
        ("int", {"type": "constant", "action_values": 2}, {},
         "agent.action_values.action: out of range; expected an integer in [0, 1], got 2."),
        ("int", {"type": "constant", "action_values": -1}, {},
         "agent.action_values.action: out of range; expected an integer in [0, 1], got -1."),
        ("bounded", {"type": "constant", "action_values": 1.5}, {},
         "agent.action_values.action: out of range; expected a number in [-1.0, 1.0], got 1.5."),
        ("int", {"type": "constant", "action_values": {"action": 1, "fire": 0}}, {},
         'agent.action_values.fire: unknown action "fire".\n  Known: action.'),
        ("int", {"type": "ppo", "network": MLP, "update_mode": {"unit": "episodes"}}, {},
         "agent.update_mode: needs 'batch_size'; got {\"unit\": \"episodes\"}."),
        ("int", {"type": "ppo", "network": MLP, "update_mode": {"batch_size": 2, "frequncy": 2}}, {},
         "agent.update_mode.frequncy: unknown key.\n  Did you mean 'frequency'?"),
        ("int", {"type": "dqn", "network": MLP, "update_mode": {"batch_size": 2, "colour": 2}}, {},
         "agent.update_mode.colour: unknown key."),
        ("int", {"type": "ppo", "network": MLP, "distributions": {"actoin": "categorical"}}, {},
         "agent.distributions.actoin: unknown action \"actoin\".\n  Known: action. Did you mean 'action'?"),
    ],
)  # fmt: skip
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
        f"agent: an agent spec needs 'type' (in {file}).\n  Known: constant, dqn, ppo, random."
    )


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_device_without_cuda(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    env = ENVS["int"]
    spec = {"type": "ppo", "network": MLP, "device": device}
    assert message(create_agent, spec, states=env.states, actions=env.actions) == (
        f'agent.device: CUDA is not available on this machine; got "{device}".\n  Use "cpu".'
    )


# -- environments: Gym, MultiState, the action-space adapter -------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kwargs", "text"),
    [
        ("gym", {"gym_id": ""},
         "environment.gym_id: not a Gymnasium id; expected a registered id like 'CartPole-v1', got \"\"."),
        ({"type": "gym", "gym_id": 3}, {},
         "environment.gym_id: not a Gymnasium id; expected a registered id like 'CartPole-v1', got 3."),
        ("CartPole-v1", {"visualize": True, "monitor": "never-made", "monitor_video": 1},
         "environment.visualize: a window and monitor_video exclude each other."),
        ("CartPole-v1", {"visualize": True, "render_mode": "rgb_array"},
         "environment.visualize: give either visualize or render_mode, not both."),
        ("multi", {"action_types": "int"}, 'environment.action_types: not a list of action types; got "int".'),
        ("multi", {"action_types": []}, "environment.action_types: not a list of action types; got []."),
    ],
)  # fmt: skip
def test_environment_errors(spec: Any, kwargs: dict, text: str) -> None:
    assert message(make, spec, **kwargs) == text
    assert not Path("never-made").exists()


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
        (lambda: make_vector(Minimal(), 2),
         r"environment: make_vector needs a spec to build copies from, not a built environment\."),
        (lambda: VectorEnvironment([]), r"environments: needs at least one environment\."),
        (lambda: VectorEnvironment([Minimal()], num_environments=2),
         r"num_environments: does not match the environments given; got 2\."),
        (lambda: VectorEnvironment(factory=lambda: 3, num_environments=2),
         r"factory: returned an? int, not an Environment\."),
        (lambda: VectorEnvironment([Locked()], mode="subprocess"),
         r"environments: cannot be sent to a worker process: cannot pickle '_thread\.lock' object\.\n"
         r"  Pass a factory that builds the environment inside the worker \(make_vector does this\)\."),
    ],
)  # fmt: skip
def test_vector_errors(build: Any, pattern: str) -> None:
    text = message(build)
    assert re.fullmatch(pattern, text), text


# -- networks: activations, layers, routing, layer lists, user classes, tf_layer ----------------------------------


@pytest.mark.parametrize(
    ("spec", "states", "text"),
    [
        ([{"type": "nonlinearity", "name": "crelu"}], {"shape": ()},
         "network[0].name: crelu acts on the last dimension; this input is a scalar per sample."),
        ([{"type": "nonlinearity", "name": "softmax"}], {"shape": ()},
         "network[0].name: softmax acts on the last dimension; this input is a scalar per sample."),
        ([{"type": "dense", "size": 2, "activation": 3}], None,
         'network[0].activation: not an activation; expected a name like "relu" or {"name": "lrelu", ...}, got 3.'),
        ([{"type": "dense", "size": 2, "activation": {"name": "lrelu", "slope": 0.2}}], None,
         "network[0].activation.slope: unknown key for an activation.\n  Accepted: name, alpha, beta, max, min."),
        ([{"type": "dense", "size": 2, "activation": {"name": "relu", "mx": 1.0}}], None,
         "network[0].activation.mx: unknown key for an activation.\n  Did you mean 'max'?"),
        ([{"type": "pool2d", "window": 5, "padding": "VALID"}], {"shape": [4, 4, 1]},
         "network[0]: the window (5) is larger than the input (4) with padding VALID."),
        ([{"type": "conv2d", "size": 2, "window": [2, 6], "padding": "VALID"}], {"shape": [4, 5, 1]},
         "network[0]: the window (6) is larger than the input (5) with padding VALID."),
        ([{"type": "linear", "size": 2, "weights": [["a", 1.0]] * 4}], None,
         'network[0].weights: not a list of numbers for the weights; got [["a", 1.0], ["a", 1.0], ["a", 1.0], '
         '["a", 1.0]].'),
        ([{"type": "linear", "size": 2, "bias": [1.0, [2.0]]}], None,
         "network[0].bias: not a list of numbers for the bias values; got [1.0, [2.0]]."),
        ([{"type": "linear", "size": 2, "weights": {"name": "msra", "slop": 1.0}}], None,
         "network[0].weights.slop: unknown key for a weights initializer.\n  Accepted: name, slope."),
        ([{"type": "linear", "size": 2, "weights": True}], None,
         'network[0].weights: not a weights initializer; expected null, a number, a list or "msra", got true.'),
        ([{"type": "dense", "skip": True, "activation": "crelu"}], None,
         "network[0].activation: a dense layer with skip=true needs a size-keeping activation."),
        ([{"type": "input", "names": []}], None,
         'network[0].names: not a name or a list of names; expected "state" or ["a", "b"], got [].'),
        ([{"type": "input", "names": 3}], None,
         'network[0].names: not a name or a list of names; expected "state" or ["a", "b"], got 3.'),
        ([{"type": "input", "names": ["state", ""]}], None,
         'network[0].names: not a name or a list of names; expected "state" or ["a", "b"], got ["state", ""].'),
        ([{"type": "input", "names": "previous"}], {"a": {"shape": 2}, "b": {"shape": 2}},
         "network[0].names: 'previous' means the current tensor, and there is none yet.\n"
         "  Name a state instead: a, b."),
        ([{"type": "output", "name": ""}], None, 'network[0].name: not a name; expected a non-empty string, got "".'),
        ([{"type": "dense", "size": 2}, {"type": "output", "name": 3}], None,
         "network[1].name: not a name; expected a non-empty string, got 3."),
        ({"type": "torchforce.core.networks:LayeredNetwork", "layers": 3}, None,
         'network: not a layer list; expected a list like [{"type": "dense", "size": 32}], got 3.'),
        ([{"type": "torch.nn:Linear"}], None, "network[0].type: Linear is not a layer; expected a subclass of Layer."),
        ([{"type": f"{__name__}:builds_a_string"}], None,
         f"network[0].type: '{__name__}:builds_a_string' did not build a Layer; got \"str\"."),
        ({"type": f"{__name__}:NoStatesArgument"}, None,
         "network.type: network 'NoStatesArgument' cannot be built: its constructor takes no 'states'."),
        ([{"type": "internal_lstm", "size": 2, "lstmcell_args": {"use_peepholes": True}}], None,
         "network[0].lstmcell_args.use_peepholes: unknown key.\n  Accepted: forget_bias."),
        ([{"type": "tf_layer", "layer": "batch_normalization"}], {"shape": ()},
         "network[0].axis: only the last (channels) axis of a non-scalar input is supported; got -1."),
        ([{"type": "tf_layer", "layer": "dense", "units": 3, "unit": 3}], None,
         "network[0].unit: unknown argument for tf_layer 'dense'.\n  Did you mean 'units'?"),
        ([{"type": "tf_layer", "layer": "flatten", "units": 3}], None,
         "network[0].units: unknown argument for tf_layer 'flatten'.\n  Accepted: no arguments."),
        ([{"type": "tf_layer", "layer": "dropout", "seed": 3}], None,
         "network[0].seed: unknown argument for tf_layer 'dropout'.\n  Accepted: rate."),
    ],
)  # fmt: skip
def test_network_errors(spec: Any, states: Any, text: str) -> None:
    assert message(build_network, spec, states or {"shape": 4}) == text


def test_network_internals_must_be_a_dict() -> None:
    text = message(build_network, f"{__name__}:InternalsNotADict", {"shape": 4})
    assert text.startswith("network: the network InternalsNotADict has internals that are not a dict; got ")
    assert "('h', (2,))" in text


# -- explorations, preprocessors, distributions ---------------------------------------------------------------------

INT = ActionSpec("move", "int", (), num_actions=3)
FLOAT = ActionSpec("force", "float", ())


@pytest.mark.parametrize(
    ("spec", "actions", "pattern"),
    [
        (f"{__name__}:builds_a_number", {"move": INT},
         r"actions_exploration: not an Exploration; expected a subclass of Exploration, got .*0\.1.*"),
        ({"move": f"{__name__}:builds_a_number"}, {"move": INT},
         r"actions_exploration\.move: not an Exploration; expected a subclass of Exploration, got .*0\.1.*"),
        ({"type": "epsilon_anneal"}, {"force": FLOAT},
         r"actions_exploration: this exploration fits none of the actions: epsilon_anneal replaces actions by "
         r"uniform random ones, which needs bounds, and float action 'force' has no min_value/max_value \(use "
         r"gaussian_noise or ornstein_uhlenbeck\); got \{\"type\": \"epsilon_anneal\"\}\."),
        ("ornstein_uhlenbeck", {"move": INT},
         r"actions_exploration: this exploration fits none of the actions: ornstein_uhlenbeck adds noise to float "
         r"actions, and action 'move' is int; got \"ornstein_uhlenbeck\"\."),
    ],
)  # fmt: skip
@pytest.mark.filterwarnings("ignore:.*it is not applied there:UserWarning")  # a shared spec warns per misfit first
def test_exploration_errors(spec: Any, actions: dict, pattern: str) -> None:
    text = message(build_explorations, spec, actions)
    assert re.fullmatch(pattern, text), text


@pytest.mark.parametrize("spec", [f"{__name__}:builds_a_function", {"state": f"{__name__}:builds_a_function"}])
def test_preprocessor_factory_that_builds_no_preprocessor(spec: Any) -> None:
    path = "states_preprocessing" if isinstance(spec, str) else "states_preprocessing.state"
    text = message(build_preprocessing, spec, {"state": StateSpec("state", (4,), "float")})
    assert text.startswith(f"{path}: not a Preprocessor; expected a subclass of Preprocessor, got ")
    assert "abs" in text


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
        ({"type": torch.optim.SGD},
         r"optimizer\.type: class SGD is not an optimizer; expected an Optimizer subclass\."),
        (torch.optim.SGD, r"optimizer: class SGD is not an optimizer; expected an Optimizer subclass\."),
        ("synchronization",
         r"optimizer: 'synchronization' updates a target network and is not a loss optimizer\.\n"
         r"  Use the agent's target_sync_frequency / target_update_weight \(built as Synchronization\)\."),
        ({"type": "multi_step", "num_steps": 2},
         r"optimizer\.optimizer: the meta optimizer 'multi_step' needs a nested optimizer spec\.\n"
         r"  For example \{\"type\": \"multi_step\", "
         r"\"optimizer\": \{\"type\": \"adam\", \"learning_rate\": 0\.001\}\}\."),
        ({"type": "clipped_step", "clipping_value": 1.0, "optimizer": None},
         r"optimizer\.optimizer: the meta optimizer 'clipped_step' needs a nested optimizer spec\.\n.*"),
        ({"type": "momentum", "learning_rate": 0.1, "momentum": 0.0, "use_nesterov": True},
         r"optimizer\.momentum: Nesterov momentum needs momentum > 0; got 0\.0\."),
        (f"{__name__}:builds_a_torch_optimizer",
         r"optimizer: not an optimizer; expected a torchforce Optimizer subclass, got .*SGD.*"),
    ],
)  # fmt: skip
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
