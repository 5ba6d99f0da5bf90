"""Names that just work: any Gymnasium id, ``module:Class`` (a Gymnasium or a torchforce environment class), ids that
installed packages register through entry points, and from Python a ``gymnasium.Env`` or a factory, wherever an
environment is named (``make``, ``make_vector``, ``Environment.from_spec``); unknown names suggest the closest."""

from __future__ import annotations

import uuid
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from torchforce.environments import Environment, Gym, Minimal, VectorEnvironment, make, make_vector
from torchforce.environments.names import spec_for_name
from torchforce.spec import SpecError

CARTPOLE = "gymnasium.envs.classic_control.cartpole:CartPoleEnv"


class Coin(gymnasium.Env):
    """A Gymnasium environment of the user's: guess a coin's side (of ``sides``); episodes never end by themselves."""

    def __init__(self, sides: int = 2, render_mode: str | None = None) -> None:
        self.sides = sides
        self.render_mode = render_mode
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(sides)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), float(action == 0), False, False, {}


class Still(Environment):
    """A torchforce environment of the user's."""

    def __init__(self, *, value: float = 1.0) -> None:
        self.value = value

    @property
    def states(self):
        return {"type": "float", "shape": ()}

    @property
    def actions(self):
        return {"type": "bool"}

    def reset(self):
        return np.float32(self.value)

    def execute(self, actions):
        return np.float32(self.value), 1, 0.0


def terminals(environment: Environment, steps: int) -> list[int]:
    environment.reset()
    return [environment.execute(0)[1] for _ in range(steps)]


# ------------------------------------------------------------------------------------------------ what a name means


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("CartPole-v1", {"type": "gym", "gym_id": "CartPole-v1"}),
        ("HalfCheetah-v5", {"type": "gym", "gym_id": "HalfCheetah-v5"}),
        ("ALE/Pong-v5", {"type": "gym", "gym_id": "ALE/Pong-v5"}),
        ("minimal", {"type": "minimal"}),
        ("openai_gym", {"type": "openai_gym"}),
        (f"{__name__}:Still", {"type": f"{__name__}:Still"}),
        (f"{__name__}:Coin", {"type": "gym", "gym_id": f"{__name__}:Coin"}),
        (CARTPOLE, {"type": "gym", "gym_id": CARTPOLE}),
        ("torchforce.environments.minimal.Minimal", {"type": "torchforce.environments.minimal.Minimal"}),
    ],
)
def test_a_name_stands_for_the_spec_that_builds_it(name, spec):
    assert spec_for_name(name) == spec


def test_an_id_registered_without_a_version_is_a_gymnasium_id():
    name = f"TfUnversioned{uuid.uuid4().hex[:6]}"
    gymnasium.register(id=name, entry_point=CARTPOLE)
    try:
        assert spec_for_name(name) == {"type": "gym", "gym_id": name}
        environment = make(name)
        assert str(environment) == f"Gym({name})" and environment.states == {"type": "float", "shape": (4,)}
    finally:
        gymnasium.registry.pop(name, None)


def test_a_gymnasium_id_works_in_make_from_spec_and_make_vector(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo may write MUJOCO_LOG.TXT into the working directory
    cheetah = make("HalfCheetah-v5", max_episode_timesteps=2)
    assert str(cheetah) == "Gym(HalfCheetah-v5)" and cheetah.states == {"type": "float", "shape": (17,)}
    cheetah.reset()
    assert [cheetah.execute(np.zeros(6, np.float32))[1] for _ in range(2)] == [0, 2]
    assert str(Environment.from_spec({"type": "Pendulum-v1", "seed": 0})) == "Gym(Pendulum-v1)"
    with make_vector("Acrobot-v1", 3, seed=0) as vector:
        assert vector.reset().shape == (3, 6)


# ---------------------------------------------------------------------------------------- module:Class of either kind


def test_a_gymnasium_class_by_path_or_object_is_built_through_the_gym_adapter():
    coin = make(f"{__name__}:Coin", sides=3, max_episode_timesteps=3)
    assert isinstance(coin, Gym) and str(coin) == f"Gym({__name__}:Coin)"
    assert coin.gym.unwrapped.sides == 3 and coin.actions == {"type": "int", "shape": (), "num_actions": 3}
    assert terminals(coin, 3) == [0, 0, 2]  # the time limit applies: truncation is terminal 2
    by_object = make(Coin, sides=4)
    assert by_object.gym.unwrapped.sides == 4 and str(by_object) == f"Gym({__name__}:Coin)"
    in_a_dict = make({"type": f"{__name__}:Coin", "sides": 5})
    assert in_a_dict.gym.unwrapped.sides == 5
    with pytest.raises(SpecError, match=r"(?s)environment\.side: unknown argument for .*Did you mean 'sides'\?"):
        make(f"{__name__}:Coin", side=3)


def test_a_torchforce_class_by_path_is_built_with_its_arguments():
    still = make(f"{__name__}:Still", value=2.5)
    assert isinstance(still, Still) and still.value == 2.5


def test_a_path_to_anything_but_an_environment_class_is_refused():
    with pytest.raises(SpecError) as caught:
        make("gymnasium.spaces:Box")
    assert str(caught.value) == (
        "environment: 'gymnasium.spaces:Box' is not an environment class; expected a subclass of "
        "torchforce.environments.Environment or of gymnasium.Env, got the class gymnasium.spaces.Box."
    )
    with pytest.raises(SpecError, match="(?s)module 'gymnasium.spaces' has no attribute 'Boxx'.*Did you mean 'Box'"):
        make("gymnasium.spaces:Boxx")


# ---------------------------------------------------------------------------------- gymnasium.Env objects, factories


def test_a_gymnasium_env_instance_is_wrapped_as_it_is():
    instance = gymnasium.make("CartPole-v1")
    environment = make(instance, max_episode_timesteps=2)
    assert isinstance(environment, Gym) and environment.gym.unwrapped is instance.unwrapped
    assert terminals(environment, 2) == [0, 2]
    with pytest.raises(SpecError, match="a ready Gymnasium environment takes no constructor arguments"):
        make(gymnasium.make("CartPole-v1"), sutton_barto_reward=True)


def test_a_factory_is_called_once_per_environment():
    calls = []

    def factory():
        calls.append(1)
        return gymnasium.make("CartPole-v1")

    environment = Environment.from_spec(factory, {"max_episode_timesteps": 1})
    assert isinstance(environment, Gym) and terminals(environment, 1) == [2] and len(calls) == 1
    with make_vector(factory, 3, seed=0) as vector:
        assert len(calls) == 4 and vector.reset().shape == (3, 4)
        assert len({id(copy.gym.unwrapped) for copy in vector.environments}) == 3
    minimal = make(lambda: Minimal(episode_length=2))
    assert isinstance(minimal, Minimal) and minimal.episode_length == 2
    with VectorEnvironment(factory=lambda: gymnasium.make("CartPole-v1"), num_environments=2) as vector:
        assert [str(copy) for copy in vector.environments] == ["Gym(CartPole-v1)"] * 2


def test_a_factory_that_returns_the_same_environment_twice_is_refused():
    instance = gymnasium.make("CartPole-v1")
    with pytest.raises(SpecError, match="factory: returned the same environment more than once") as caught:
        make_vector(lambda: instance, 2)
    assert "lambda: gymnasium.make(...), not lambda: env" in str(caught.value)
    still = Still()
    with pytest.raises(SpecError, match=r"factory: returned the same environment more than once \(Still\)"):
        make_vector(lambda: still, 3)


def test_bad_factories_are_spec_errors():
    with pytest.raises(SpecError, match=r"^environment: an environment factory is called with no arguments, and this"):
        make(lambda size: Coin(size))
    with pytest.raises(SpecError) as caught:
        make(lambda: 3)
    assert str(caught.value) == (
        "environment: the factory returned no environment; expected a gymnasium.Env or a torchforce Environment, got 3."
    )


def test_one_gymnasium_env_instance_makes_one_copy_only():
    with make_vector(gymnasium.make("CartPole-v1"), 1) as vector:
        assert vector.reset().shape == (1, 4)
    with pytest.raises(SpecError) as caught:
        make_vector(gymnasium.make("CartPole-v1"), 4)
    assert str(caught.value).startswith(
        "environment: one gymnasium.Env instance can be wrapped only once, not into 4 copies; got an instance of "
    )
    assert "make_vector('CartPole-v1', 4)" in str(caught.value)
    assert "make_vector(lambda: gymnasium.make('CartPole-v1', ...), 4)" in str(caught.value)
    with pytest.raises(SpecError, match=r"make_vector\(lambda: MyEnv\(\.\.\.\), 2\)"):
        make_vector(Coin(), 2)


# ---------------------------------------------------------------------------------------------------- unknown names


@pytest.mark.parametrize(
    ("name", "message", "guess"),
    [
        ("cartpol", 'environment: unknown environment "cartpol"', "CartPole-v1"),
        ("minimall", 'environment: unknown environment "minimall"', "minimal"),
        ("HalfCheetah", 'environment: unknown environment "HalfCheetah"', "HalfCheetah-v5"),
        ("HalfCheeta-v5", "environment: unknown Gymnasium id 'HalfCheeta-v5'", "HalfCheetah-v5"),
        ("ALE/Pongg-v5", "environment: unknown Gymnasium id 'ALE/Pongg-v5'", "ALE/Pong-v5"),
    ],
)
def test_an_unknown_name_suggests_the_closest_type_or_id(name, message, guess):
    with pytest.raises(SpecError) as caught:
        make(name)
    assert str(caught.value).startswith(message + ".\n  "), str(caught.value)
    assert str(caught.value).endswith(f"Did you mean '{guess}'?"), str(caught.value)


def test_a_name_close_to_nothing_says_where_the_ids_are_listed():
    with pytest.raises(SpecError) as caught:
        make("zzzzzzzz")
    assert str(caught.value) == (
        'environment: unknown environment "zzzzzzzz".\n  Environment types: atari, gym, minimal, minimal_test, '
        "multi, repeat_actions; or a Gymnasium id ('CartPole-v1', 'ALE/Pong-v5') or 'module:Class'. List the "
        'registered ids with: python -c "import gymnasium; gymnasium.pprint_registry()".'
    )


def test_an_id_and_a_gym_id_key_together_are_refused():
    with pytest.raises(SpecError, match=r"^environment\.gym_id: given twice"):
        make({"type": "CartPole-v1", "gym_id": "Pendulum-v1"})


# ----------------------------------------------------------------------------- ids registered through entry points


def plugin(site: Path, entry: str, body: str) -> str:
    """A package "installed" in ``site`` that depends on Gymnasium and declares the ``gymnasium.envs`` entry point
    ``entry`` (the namespace of its ids, or ``__root__``) calling ``register_envs``, whose body is ``body``."""
    name = f"tf_plugin_{uuid.uuid4().hex[:8]}"
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(f"import gymnasium\n\n\ndef register_envs():\n    {body}\n")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nRequires-Dist: gymnasium>=1\n")
    (info / "top_level.txt").write_text(name + "\n")
    (info / "entry_points.txt").write_text(f"[gymnasium.envs]\n{entry} = {name}:register_envs\n")
    return name


@pytest.mark.parametrize("namespaced", [True, False])
def test_an_id_an_installed_package_registers_through_an_entry_point(tmp_path, monkeypatch, namespaced):
    suffix = uuid.uuid4().hex[:6]
    namespace = f"tfns{suffix}"
    plugin(
        tmp_path / "site",
        namespace if namespaced else "__root__",
        f"gymnasium.register(id='TfPluginCart{suffix}-v0', entry_point={CARTPOLE!r})",
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    gym_id = f"{namespace}/TfPluginCart{suffix}-v0" if namespaced else f"TfPluginCart{suffix}-v0"
    assert gym_id not in gymnasium.registry  # Gymnasium 1.x does not load entry points itself
    try:
        assert spec_for_name(gym_id) == {"type": "gym", "gym_id": gym_id}
        with make_vector(gym_id, 2) as vector:
            assert vector.reset().shape == (2, 4)
    finally:
        gymnasium.registry.pop(gym_id, None)


def test_a_broken_entry_point_is_skipped_with_a_warning(tmp_path, monkeypatch):
    name = plugin(tmp_path / "site", "__root__", "raise RuntimeError('no ROMs here')")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.warns(UserWarning, match=rf"the gymnasium.envs entry point '__root__ = {name}:register_envs' failed"):
        with pytest.raises(SpecError, match="unknown Gymnasium id 'TfNowhere-v0'"):
            make("TfNowhere-v0")
