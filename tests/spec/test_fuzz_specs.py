"""Property-based tests of spec handling (issue 7, "Hardening"): generated and mutated agent, network and environment
specs are built and run, and the only outcomes allowed are success or a SpecError.

Specs start from the shipped configs (``torchforce/configs/agents``, ``networks``, ``environments``) and from small
generated ones, and are mutated: values replaced by wrong types, negative, zero, huge (2^40, 3 * 10^12, 1e308),
NaN and infinite numbers, keys removed, unknown keys added, ``type`` names swapped for other components' names, and
nested garbage. Each spec that builds runs a few episodes of act/observe (with updates) on a small environment.
Any exception other than a SpecError is a bug, with one exception: ``NonFiniteError`` (``NonFiniteActionError``
from ``act()``), the runtime report of learning that diverged (a valid but absurd learning rate of 1e30 makes NaN
parameters), is the library working as intended and counts as an outcome too.

Hypothesis runs a fixed, derandomized set of examples by default (small, for CI: the file takes well under 30 s
on one core). ``TORCHFORCE_FUZZ=N`` raises the examples per test to N and draws them at random, for a longer hunt:

    TORCHFORCE_FUZZ=2000 .venv/bin/python -m pytest tests/spec/test_fuzz_specs.py -x

Numbers are drawn from small plausible values and from edge values that are refused, never from the large-but-
allowed middle (a dense layer of 2^24 units would be valid and only exhaust the test machine).
"""

from __future__ import annotations

import copy
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchforce.agents import create_agent
from torchforce.agents.errors import NonFiniteError
from torchforce.environments import Environment
from torchforce.spec import SpecError

CONFIGS = Path(__file__).resolve().parents[2] / "torchforce" / "configs"
FUZZ = int(os.environ.get("TORCHFORCE_FUZZ", "0"))


def examples(default: int) -> settings:
    return settings(
        max_examples=FUZZ or default,
        derandomize=not FUZZ,  # CI: the same examples every run
        database=None,  # no .hypothesis directory in the tree
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def load(kind: str) -> dict[str, Any]:
    return {file.stem: json.loads(file.read_text()) for file in sorted((CONFIGS / kind).glob("*.json"))}


AGENT_CONFIGS = load("agents")
NETWORK_CONFIGS = load("networks")
# the Atari config builds an emulator and 210x160x3 images: slow, and the gym adapter is covered by the others
ENVIRONMENT_CONFIGS = {name: spec for name, spec in load("environments").items() if "SpaceInvaders" not in str(spec)}
SMALL_ENVIRONMENTS = {
    "minimal_int": {"type": "minimal", "action_type": "int", "episode_length": 4},
    "minimal_bool": {"type": "minimal", "action_type": "bool", "episode_length": 4},
    "minimal_float": {"type": "minimal", "action_type": "float", "episode_length": 4},
    "minimal_bounded": {"type": "minimal", "action_type": "bounded", "episode_length": 4},
    "multi": {"type": "multi", "episode_length": 4},
}
SMALL_NETWORK = [{"type": "dense", "size": 8}]
IMAGE_NETWORK = [{"type": "flatten"}, {"type": "dense", "size": 8}]
# environments given by their states and actions only: random states, random rewards (see ``episodes``)
VIRTUAL_ENVIRONMENTS = {
    "image": {
        "states": {"type": "float", "shape": (40, 40, 3), "min_value": 0.0, "max_value": 255.0},
        "actions": {"type": "int", "num_actions": 3},
    },
    # Atari frames as the atari environment gives them (bytes), at the smallest size the Nature CNN takes
    "frames": {"states": {"type": "uint8", "shape": (36, 36, 4)}, "actions": {"type": "int", "num_actions": 4}},
}
CARTPOLE = {"type": "gym", "gym_id": "CartPole-v1", "max_episode_timesteps": 5}
PENDULUM = {"type": "gym", "gym_id": "Pendulum-v1", "max_episode_timesteps": 5}
POLICY_GRADIENT = ["minimal_int", "minimal_bool", "minimal_float", "minimal_bounded", "cartpole"]
Q_LEARNING = ["minimal_int", "cartpole"]
# what each shipped agent config runs on unchanged (its own actions, and image states for the visual ones)
CONFIG_ENVIRONMENTS = {
    **dict.fromkeys(
        ["ppo", "ppo_cartpole", "trpo", "trpo_cartpole", "vpg", "vpg_cartpole", "vpg_nobaseline"], POLICY_GRADIENT
    ),
    **dict.fromkeys(["dqn", "dqn_cartpole", "dqn_nstep_cartpole", "dqfd", "dqfd_cartpole"], Q_LEARNING),
    # ddpg_halfcheetah warms up with uniform random actions (random_timesteps): bounded actions only
    **dict.fromkeys(["ddpg", "ddpg_pendulum", "ddpg_halfcheetah"], ["minimal_bounded", "pendulum"]),
    **dict.fromkeys(["naf", "naf_pendulum", "naf_halfcheetah"], ["minimal_bounded", "minimal_float", "pendulum"]),
    **dict.fromkeys(["ppo_halfcheetah", "ppo_hopper"], ["minimal_bounded", "pendulum"]),  # a Gaussian "action"
    **dict.fromkeys(["dqn_visual", "vpg_visual", "ppo_cnn", "dqn_ue4"], ["image"]),
    **dict.fromkeys(["dqn_atari", "ppo_atari"], ["frames"]),
}

# ------------------------------------------------------------------------------------------ values to mutate to

HUGE_INTS = [2**40, 3 * 10**12, 2**64, -(2**63), 10**400]
EDGE_FLOATS = [0.0, -0.0, 1e-300, -1e-300, 1e308, -1e308, 1e38, 3.4e38, math.nan, math.inf, -math.inf]
NAMES = [
    "adam",
    "multi_step",
    "natural_gradient",
    "optimized_step",
    "subsampling_step",
    "evolutionary",
    "clipped_step",
    "dense",
    "linear",
    "conv2d",
    "conv1d",
    "lstm",
    "internal_lstm",
    "embedding",
    "flatten",
    "pool2d",
    "dueling",
    "tf_layer",
    "batch_normalization",
    "input",
    "output",
    "nonlinearity",
    "replay",
    "latest",
    "prioritized_replay",
    "gaussian",
    "beta",
    "categorical",
    "bernoulli",
    "deterministic",
    "sequence",
    "grayscale",
    "image_resize",
    "running_standardize",
    "normalize",
    "clip",
    "divide",
    "gaussian_noise",
    "epsilon_decay",
    "ornstein_uhlenbeck",
    "episodes",
    "timesteps",
    "sequences",
    "states",
    "network",
    "mlp",
    "aggregated",
    "relu",
    "crelu",
    "softmax",
    "float",
    "int",
    "bool",
    "*",
    "state",
    "action",
    "SAME",
    "",
    "x",
    "os.path:join",
    "builtins:dict",
]
KEYS = [
    "type",
    "size",
    "learning_rate",
    "num_steps",
    "capacity",
    "batch_size",
    "unit",
    "frequency",
    "optimizer",
    "shape",
    "num_actions",
    "min_value",
    "max_value",
    "names",
    "name",
    "layer",
    "length",
    "sigma",
    "fraction",
    "window",
    "stride",
    "activation",
    "weights",
    "bias",
    "foo",
    "state",
    "action",
    "rate",
    "indices",
    "ls_max_kl",
    "cg_max_iterations",
    "clip_grad_norm",
    "axis",
    "units",
    "epsilon",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 16),
    st.sampled_from(HUGE_INTS),
    st.floats(-4.0, 4.0),
    st.sampled_from(EDGE_FLOATS),
    st.sampled_from(NAMES),
    st.text(max_size=3),
)
garbage = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.sampled_from(KEYS), children, max_size=3)
    ),
    max_leaves=6,
)


def plausible(value: Any) -> st.SearchStrategy:
    """A value like ``value``: a flipped bool, a small number of its type, a name; anything for other values."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(0, 8)
    if isinstance(value, float):
        return st.sampled_from([0.0, 1e-6, 0.01, 0.5, 0.99, 1.0, 2.0, 10.0])
    if isinstance(value, str):
        return st.one_of(st.just(value), st.sampled_from(NAMES))
    return garbage


def places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path into a nested spec (dict keys and list indices), the root excluded."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*path, key))
            found += places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((*path, index))
            found += places(item, (*path, index))
    return found


def containers(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths of every dict in a nested spec, the root included (where unknown keys can go)."""
    found = [path] if isinstance(value, dict) else []
    if isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            found += containers(item, (*path, key))
    return found


def at(root: Any, path: tuple) -> Any:
    for key in path:
        root = root[key]
    return root


@st.composite
def mutated(draw: st.DrawFn, spec: Any, max_mutations: int = 3) -> Any:
    """``spec`` with 1 to ``max_mutations`` mutations (see the module docstring)."""
    spec = copy.deepcopy(spec)
    for _ in range(draw(st.integers(1, max_mutations))):
        # mostly values (leaves), sometimes whole entries: a spec whose every layer is garbage tests little
        kind = draw(
            st.sampled_from(["plausible"] * 3 + ["leaf"] * 2 + ["number"] * 2 + ["delete", "add", "type", "replace"])
        )
        paths = [path for path in places(spec) if path != ("type",)]  # the agent or network kind stays, mostly
        if kind in ("plausible", "leaf", "number"):
            paths = [path for path in paths if not isinstance(at(spec, path), dict | list)] or paths
        if kind == "add" or not paths:
            where = draw(st.sampled_from(containers(spec) or [()]))
            target = at(spec, where) if where else spec
            if isinstance(target, dict):
                target[draw(st.sampled_from(KEYS))] = draw(garbage)
            continue
        path = draw(st.sampled_from(paths))
        parent, key = at(spec, path[:-1]), path[-1]
        if kind == "plausible":  # another value of the same kind: odd but valid specs, which run
            parent[key] = draw(plausible(parent[key]))
        elif kind == "delete":
            del parent[key]
        elif kind == "number":
            parent[key] = draw(st.one_of(st.sampled_from(HUGE_INTS), st.sampled_from(EDGE_FLOATS), st.integers(-3, 3)))
        elif kind == "type" and isinstance(parent, dict) and "type" in parent:
            parent["type"] = draw(st.sampled_from(NAMES))
        else:
            parent[key] = draw(garbage)
    return spec


# -------------------------------------------------------------------------------------------- running a spec

ALLOWED = (SpecError, NonFiniteError)


def small(spec: dict[str, Any]) -> dict[str, Any]:
    """An agent config made quick to update: small batches, few optimization steps, updates within a few steps."""
    spec = copy.deepcopy(spec)
    mode = spec.get("update_mode")
    if mode is None or isinstance(mode, dict):  # anything else is the garbage under test
        on_policy = str(spec.get("type", "")).startswith(("ppo", "vpg", "trpo", "dqn_nstep"))
        unit = (mode or {}).get("unit", "episodes" if on_policy else "timesteps")
        size = 1 if unit == "episodes" else 4
        spec["update_mode"] = {**(mode or {}), "batch_size": size, "frequency": size}
        if unit == "sequences":
            spec["update_mode"]["length"] = 2
    if isinstance(spec.get("memory"), dict):
        spec["memory"]["capacity"] = 256
    for key, value in (("optimization_steps", 2), ("epochs", 1), ("demo_memory_capacity", 64)):
        if key in spec:
            spec[key] = value
    for key in ("step_optimizer", "optimizer", "baseline_optimizer", "critic_optimizer"):
        if isinstance(spec.get(key), dict) and "num_steps" in spec[key]:
            spec[key]["num_steps"] = 2
    for key in ("saver", "summarizer", "execution"):  # places to write to, or nothing: not what is fuzzed here
        spec.pop(key, None)
    if "demo_sampling_ratio" in spec:
        spec["demo_sampling_ratio"] = 0.5
    spec.setdefault("network", SMALL_NETWORK)
    return spec


def random_states(states: dict, rng: np.random.Generator) -> Any:
    """A batch-free state for the agent's normalized state specs (for environments made of a spec)."""
    values = {}
    for name, spec in states.items():
        if spec.type == "bool":
            values[name] = rng.random(spec.shape) < 0.5
        elif spec.type == "int":
            values[name] = rng.integers(0, spec.num_values or 3, size=spec.shape)
        elif spec.type == "uint8":
            values[name] = rng.integers(0, 256, size=spec.shape, dtype=np.uint8)
        elif spec.min_value is not None:
            values[name] = rng.uniform(spec.min_value, spec.max_value, size=spec.shape).astype(np.float32)
        else:
            values[name] = rng.standard_normal(spec.shape).astype(np.float32)
    return values


def episodes(agent: Any, env: Environment | None, *, count: int = 3, limit: int = 5) -> None:
    """``count`` episodes of at most ``limit`` steps; without an environment, random states and rewards."""
    rng = np.random.default_rng(0)
    for _ in range(count):
        state = env.reset() if env is not None else None
        for step in range(limit):
            if env is None:
                states = random_states(agent.states_spec, rng)
                actions = agent.act(states["state"] if agent.single_state else states)
                terminal, reward = int(step == limit - 1 or rng.random() < 0.2), float(rng.standard_normal())
            else:
                actions = agent.act(state)
                state, terminal, reward = env.execute(actions)
            agent.observe(terminal=terminal, reward=reward)
            if terminal:
                break
        else:
            agent.reset()


def outcome(build: Any) -> str:
    """Run ``build()``; the name of the allowed exception it raised, or "ok". Other exceptions propagate."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                build()
            except ALLOWED as error:
                return type(error).__name__
    return "ok"


def environment(name: str) -> Any:
    """The spec of a named environment: small built-in ones, CartPole, Pendulum, or a virtual one."""
    return {"cartpole": CARTPOLE, "pendulum": PENDULUM, **SMALL_ENVIRONMENTS, **VIRTUAL_ENVIRONMENTS}[name]


def run_agent(spec: Any, env_spec: Any) -> None:
    """Build the agent for the environment (a spec, or a virtual one: states and actions) and run a few episodes."""
    if isinstance(env_spec, dict) and set(env_spec) == {"states", "actions"}:
        agent = create_agent(spec, **env_spec)
        episodes(agent, None)
        return
    env = Environment.from_spec(env_spec)
    try:
        agent = create_agent(spec, states=env.states, actions=env.actions)
        episodes(agent, env)
    finally:
        env.close()


@pytest.fixture(autouse=True, scope="module")
def _in_a_temporary_directory(tmp_path_factory: pytest.TempPathFactory):
    """Mutated specs may name directories (a saver, a monitor): they land in a temporary one."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("fuzz"))
    torch.set_num_threads(1)
    yield
    os.chdir(before)


# ----------------------------------------------------------------------------------------------------- tests


@examples(120)
@given(data=st.data())
def test_mutated_agent_configs(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(AGENT_CONFIGS)), label="config")
    env_name = data.draw(st.sampled_from(CONFIG_ENVIRONMENTS.get(name, ["minimal_int"])), label="environment")
    spec = small(AGENT_CONFIGS[name])
    if env_name == "image" and spec["network"] == SMALL_NETWORK:
        spec["network"] = IMAGE_NETWORK
    spec = data.draw(mutated(spec), label="spec")
    outcome(lambda: run_agent(spec, environment(env_name)))


def test_the_shipped_agent_configs_run_unchanged_here():
    """Where the mutations start: every shipped agent config runs on each of its environments."""
    for name, config in AGENT_CONFIGS.items():
        for env_name in CONFIG_ENVIRONMENTS.get(name, ["minimal_int"]):
            spec = small(config)
            if env_name == "image" and spec["network"] == SMALL_NETWORK:
                spec["network"] = IMAGE_NETWORK
            assert outcome(lambda spec=spec, env_name=env_name: run_agent(spec, environment(env_name))) == "ok", name


@examples(100)
@given(data=st.data())
def test_mutated_network_configs(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(NETWORK_CONFIGS)), label="network config")
    kind = data.draw(st.sampled_from(["ppo", "dqn", "vpg", "ddpg"]), label="agent")
    env_name, network = NETWORK_ENVIRONMENTS.get(name, "minimal_int"), NETWORK_CONFIGS[name]
    if kind == "ddpg":
        env_name = "image_bounded" if env_name.startswith("image") else "minimal_bounded"
    if kind == "ppo" and env_name == "minimal_int" and data.draw(st.booleans(), label="several states"):
        env_name, network = "multi", [{"type": "input", "names": "float"}, *network]
    spec = small({"type": kind, "network": data.draw(mutated(network), label="network"), "seed": 0})
    outcome(lambda: run_agent(spec, NETWORK_ENVIRONMENTS_SPECS.get(env_name) or environment(env_name)))


# what each shipped network runs on unchanged (images for the convolutional ones, ints for the embedding)
NETWORK_ENVIRONMENTS = {
    **dict.fromkeys(["cnn2x2_network", "cnn_dqn2013_network", "cnn_dqn_network", "cnn_network_2048"], "image"),
    "mlp2_embedding_network": "ints",
}
NETWORK_ENVIRONMENTS_SPECS = {
    "ints": {"states": {"type": "int", "shape": (), "num_values": 100}, "actions": {"type": "int", "num_actions": 2}},
    "image_bounded": {
        "states": VIRTUAL_ENVIRONMENTS["image"]["states"],
        "actions": {"type": "float", "min_value": -1.0, "max_value": 1.0},
    },
}


def test_the_shipped_networks_run_unchanged_here():
    for name, network in NETWORK_CONFIGS.items():
        env_name = NETWORK_ENVIRONMENTS.get(name, "minimal_int")
        env = NETWORK_ENVIRONMENTS_SPECS.get(env_name) or environment(env_name)
        spec = small({"type": "ppo", "network": network, "seed": 0})
        assert outcome(lambda spec=spec, env=env: run_agent(spec, env)) == "ok", name


@examples(50)
@given(data=st.data())
def test_mutated_environment_configs(data: st.DataObject) -> None:
    configs = {**ENVIRONMENT_CONFIGS, **SMALL_ENVIRONMENTS}
    env_spec = data.draw(mutated(configs[data.draw(st.sampled_from(sorted(configs)))], max_mutations=2))
    if isinstance(env_spec, dict) and env_spec.get("type") in ("gym", "tensorforce.contrib.openai_gym.OpenAIGym"):
        env_spec.setdefault("max_episode_timesteps", 5)
        for key in ("visualize", "monitor", "render_mode"):  # windows and files: not spec handling
            env_spec.pop(key, None)
    kind = data.draw(st.sampled_from(["ppo", "dqn", "ddpg", "random"]), label="agent")
    spec = small({"type": kind, "seed": 0}) if kind != "random" else {"type": "random"}
    outcome(lambda: run_agent(spec, env_spec))


def mostly(likely: st.SearchStrategy, weight: int = 3) -> st.SearchStrategy:
    """``likely`` values ``weight`` times as often as garbage."""
    return st.one_of(*[likely] * weight, garbage)


plausible_numbers = st.one_of(st.none(), st.booleans(), st.integers(0, 8), st.sampled_from([0.0, 1e-3, 0.5, 0.99, 2.0]))
shapes = st.sampled_from([(), (1,), (2,), (3, 2), (2, 2, 1)])
state_specs = st.one_of(
    st.builds(lambda shape: {"type": "float", "shape": shape}, shapes),
    st.builds(
        lambda shape, low, high: {"type": "float", "shape": shape, "min_value": low, "max_value": high},
        shapes,
        st.floats(-3, 0),
        st.floats(0.5, 3),
    ),
    st.builds(lambda shape, n: {"type": "int", "shape": shape, "num_values": n}, shapes, st.integers(1, 5)),
    st.builds(lambda shape: {"type": "bool", "shape": shape}, shapes),
)
action_specs = st.one_of(
    st.builds(lambda shape: {"type": "float", "shape": shape}, shapes),
    st.builds(
        lambda shape, low, high: {"type": "float", "shape": shape, "min_value": low, "max_value": high},
        shapes,
        st.floats(-3, 0),
        st.floats(0.5, 3),
    ),
    st.builds(lambda shape, n: {"type": "int", "shape": shape, "num_actions": n}, shapes, st.integers(1, 4)),
    st.builds(lambda shape: {"type": "bool", "shape": shape}, shapes),
)


def named(specs: st.SearchStrategy, names: list[str]) -> st.SearchStrategy:
    """One spec (the short form), or a dict of them by name."""
    return st.one_of(specs, st.dictionaries(st.sampled_from(names), specs, min_size=1, max_size=2))


layers = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["dense", "dense", "flatten", *NAMES[7:24]])},
        optional={
            "size": mostly(st.integers(1, 8)),
            "activation": mostly(st.sampled_from(["relu", "tanh", "none", "softmax", "crelu"])),
            **{key: garbage for key in ("window", "names", "layer", "length", "rate")},
        },
    ),
    max_size=4,
)
AGENT_OPTIONS = [
    "discount",
    "seed",
    "variable_noise",
    "entropy_regularization",
    "distributions",
    "actions_exploration",
    "states_preprocessing",
    "reward_preprocessing",
    "baseline_mode",
    "memory",
    "update_mode",
    "optimizer",
    "foo",
]


@examples(150)
@given(
    kind=st.sampled_from(["ppo", "vpg", "trpo", "dqn", "dqn_nstep", "ddpg", "naf", "dqfd", "random"]),
    network=st.one_of(st.just(SMALL_NETWORK), st.just(IMAGE_NETWORK), layers, garbage),
    options=st.dictionaries(st.sampled_from(AGENT_OPTIONS), mostly(plausible_numbers, 1), max_size=2),
    data=st.data(),
)
def test_generated_specs(kind: str, network: Any, options: dict, data: st.DataObject) -> None:
    """States, actions, networks and options generated (valid ones, then mutated or not), on random states."""
    states = data.draw(named(state_specs, ["a", "b"]), label="states")
    actions = data.draw(named(action_specs, ["x", "y"]), label="actions")
    if data.draw(st.booleans(), label="mutate"):
        both = data.draw(mutated({"states": states, "actions": actions}, max_mutations=2))
        states, actions = both.get("states"), both.get("actions")

    def build() -> None:
        spec = {"type": kind, **options}
        if kind != "random":
            spec = small({**spec, "network": network})
        agent = create_agent(spec, states=states, actions=actions)
        episodes(agent, None)

    outcome(build)


def test_outcomes_are_reported():
    """The harness itself: a SpecError is an allowed outcome, anything else is raised."""
    assert outcome(lambda: create_agent({"type": "ppo"}, states={"shape": -1}, actions={"num_actions": 2})) == (
        "SpecError"
    )
    with pytest.raises(ZeroDivisionError):
        outcome(lambda: 1 / 0)
