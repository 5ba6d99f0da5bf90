"""Environments: the 2018 Environment API, the Gymnasium adapter, Atari from pixels (``atari``), built-in test
environments, vectorized stepping.

``make`` (``Environment.from_spec``) and ``make_vector`` build any of them from a spec: a name below, any Gymnasium id
(``"CartPole-v1"``, ``"HalfCheetah-v5"``, ``"ALE/Pong-v5"``), ``"module:Class"`` (see ``names``), a dict or file of
these, or from Python a ``gymnasium.Env`` or a factory returning one: ``make_vector(lambda: gymnasium.make(...), 8)``.
"""

from typing import Any

from torchforce.environments.environment import Environment
from torchforce.environments.gym import Gym
from torchforce.environments.minimal import Minimal, MultiState
from torchforce.environments.minimal_test import MinimalTest
from torchforce.environments.vector import VectorEnvironment, VectorEnvironmentError, VectorStep, make_vector
from torchforce.spec import Registry

ENVIRONMENTS = Registry(
    "environment",
    {
        "atari": "torchforce.environments.atari:Atari",
        "gym": "torchforce.environments.gym:Gym",
        "minimal": "torchforce.environments.minimal:Minimal",
        "minimal_test": "torchforce.environments.minimal_test:MinimalTest",
        "multi": "torchforce.environments.minimal:MultiState",
        "repeat_actions": "torchforce.environments.wrappers:RepeatActions",
    },
    aliases={
        "gymnasium": "gym",
        "openai_gym": "gym",
        "OpenAIGym": "gym",
        "tensorforce.contrib.openai_gym.OpenAIGym": "gym",
        "MinimalTest": "minimal_test",
        "multi_state": "multi",
    },
)


def make(spec: object, **kwargs: object) -> Environment:
    """``Environment.from_spec(spec, kwargs)``: ``make("CartPole-v1", max_episode_timesteps=100)``,
    ``make(gymnasium.make("CartPole-v1"), seed=0)``, ``make("my_module:MyEnv", size=5)``."""
    return Environment.from_spec(spec, kwargs or None)


OpenAIGym = Gym  # TensorForce 0.4's name of the Gym adapter (tensorforce.contrib.openai_gym)


def __getattr__(name: str) -> Any:
    """``Atari`` and ``atari_env``, imported when asked: their wrappers import Gymnasium, which the package itself
    leaves until an environment needs it."""
    if name in ("Atari", "atari_env"):
        from torchforce.environments import atari

        return getattr(atari, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENVIRONMENTS",
    "Atari",
    "Environment",
    "Gym",
    "OpenAIGym",
    "Minimal",
    "MinimalTest",
    "MultiState",
    "VectorEnvironment",
    "VectorEnvironmentError",
    "VectorStep",
    "atari_env",
    "make",
    "make_vector",
]
