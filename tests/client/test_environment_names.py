"""``tfcli experiment new -E NAME``: a file or a config in configs/environments/ first, else any environment name (a
Gymnasium id, ``module:Class``, an environment type), stored in experiment.json as the spec it stands for, so that
the worker builds the same environment; an unknown name suggests among the configs and the registered ids."""

from __future__ import annotations

import json

import pytest

from tests.client.test_bad_input import bad
from torchforce.client.cli import main
from torchforce.environments import make

CHEAP = ["-A", "ppo_cartpole", "-t", "1000"]


def new(project, capsys, name: str, environment: str) -> dict:
    """``tfcli experiment new -n NAME -E ENVIRONMENT``; returns the stored experiment.json."""
    assert main(["experiment", "new", "-n", name, "-E", environment, *CHEAP]) == 0, capsys.readouterr()
    capsys.readouterr()
    return json.loads((project.root / "experiments" / name / "experiment.json").read_text())


@pytest.mark.parametrize(
    ("environment", "stored"),
    [
        ("HalfCheetah-v5", {"type": "gym", "gym_id": "HalfCheetah-v5"}),
        ("Acrobot-v1", {"type": "gym", "gym_id": "Acrobot-v1"}),
        ("minimal", {"type": "minimal"}),
        (
            "gymnasium.envs.classic_control.cartpole:CartPoleEnv",
            {"type": "gym", "gym_id": "gymnasium.envs.classic_control.cartpole:CartPoleEnv"},
        ),
        ("torchforce.environments.minimal:Minimal", {"type": "torchforce.environments.minimal:Minimal"}),
    ],
)
def test_a_name_that_is_no_config_is_stored_as_the_spec_it_stands_for(project, capsys, environment, stored):
    spec = new(project, capsys, "named", environment)
    assert spec["environment"] == stored and spec["sources"]["environment"] is None
    built = make(spec["environment"])  # what the worker does with it
    assert type(built).__name__ == ("Gym" if stored["type"] == "gym" else "Minimal")
    built.close()


def test_a_config_of_the_name_comes_first(project, capsys):
    (project.root / "configs" / "environments" / "Acrobot-v1.json").write_text(
        json.dumps({"type": "gym", "gym_id": "Acrobot-v1", "max_episode_timesteps": 50})
    )
    spec = new(project, capsys, "configured", "Acrobot-v1")
    assert spec["environment"] == {"type": "gym", "gym_id": "Acrobot-v1", "max_episode_timesteps": 50}
    assert spec["sources"]["environment"] == "configs/environments/Acrobot-v1.json"
    assert new(project, capsys, "shipped", "cartpole")["environment"] == {"type": "gym", "gym_id": "CartPole-v1"}


@pytest.mark.parametrize(
    ("environment", "message", "guess"),
    [
        (
            "cartpol",
            "experiment.environment: no environment config named 'cartpol', nor a Gymnasium id or environment type "
            "of that name.",
            "cartpole",
        ),
        (
            "HalfCheeta-v5",
            "experiment.environment: no environment config named 'HalfCheeta-v5', nor a Gymnasium id of that name.",
            "HalfCheetah-v5",
        ),
        (
            "pendulm",
            "experiment.environment: no environment config named 'pendulm', nor a Gymnasium id or environment type "
            "of that name.",
            "pendulum",
        ),
    ],
)
def test_an_unknown_name_suggests_among_configs_and_ids(project, capsys, environment, message, guess):
    err = bad(project.root, capsys, "experiment", "new", "-n", "typo", "-E", environment, *CHEAP)
    first, hint = err.rstrip("\n").split("\n")
    assert first == f"tfcli: {message}"
    assert hint.endswith(f"Did you mean '{guess}'?"), hint


def test_an_unknown_name_lists_the_configs(project, capsys):
    err = bad(project.root, capsys, "experiment", "new", "-n", "typo", "-E", "zzzzzzzz", *CHEAP)
    assert "Environment configs: breakout, cartpole, halfcheetah, hopper, openai_space_invaders, pendulum, pong." in err
    assert "gymnasium.pprint_registry()" in err


def test_a_missing_file_and_a_folder_stay_what_they_are(project, capsys):
    err = bad(project.root, capsys, "experiment", "new", "-n", "typo", "-E", "mine/env.json", *CHEAP)
    assert "experiment.environment: file not found: 'mine/env.json'" in err
    err = bad(project.root, capsys, "experiment", "new", "-n", "typo", "-E", "configs", *CHEAP)
    assert "experiment.environment: 'configs' is a folder, not a file" in err


def test_a_module_name_is_checked_before_it_is_imported(project, capsys):
    err = bad(project.root, capsys, "experiment", "new", "-n", "typo", "-E", "os:system", *CHEAP)
    assert "experiment.environment: module 'os' belongs to Python's standard library" in err
