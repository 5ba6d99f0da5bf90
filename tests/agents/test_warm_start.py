"""``Agent.warm_start``: a new agent begins from a checkpoint's networks and run-wide preprocessing statistics, and
from nothing else of it (counters, optimizers, memory, explorations, random state start afresh); a checkpoint that
does not fit changes nothing. The agents and the stream of states are those of ``test_checkpoint.py``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.agents.test_checkpoint import CASES, PPO, STATES, assert_trees_equal, build, drive
from torchforce.agents import create_agent
from torchforce.agents.checkpoint import CheckpointError
from torchforce.core.preprocessors import RunningReturnScale, RunningStandardize
from torchforce.environments import make

RUN_WIDE = {
    **PPO,
    "states_preprocessing": [{"type": "clip", "min_value": -5.0, "max_value": 5.0}, {"type": "running_standardize"}],
    "reward_preprocessing": {"type": "running_return_scale"},
}
RUN_WIDE["states_preprocessing"][1]["reset_after_batch"] = False


def parameters_equal(a, b) -> bool:
    first, second = a.get_parameters(), b.get_parameters()
    return first.keys() == second.keys() and all(torch.equal(first[name], second[name]) for name in first)


@pytest.mark.parametrize("case", list(CASES))
def test_a_warm_start_takes_the_networks_and_nothing_of_the_run(case, tmp_path):
    trained = build(case)
    drive(trained, 0, 40, rows=2)
    assert trained.updates > 0
    trained.save_model(tmp_path, append_timestep=False)

    fresh, warm = build(case), build(case)
    warm.warm_start(tmp_path, "model")
    assert parameters_equal(warm, trained) and not parameters_equal(fresh, trained)
    assert (warm.timestep, warm.episode, warm.updates) == (0, 0, 0)
    assert len(warm.memory) == 0
    assert_trees_equal(warm.state_dict()["optimizers"], fresh.state_dict()["optimizers"])  # no moments come along
    assert_trees_equal(warm.state_dict()["explorations"], fresh.state_dict()["explorations"])
    drive(warm, 0, 40, rows=2)  # it learns on, from there
    assert warm.updates > 0


def test_run_wide_statistics_come_along_and_per_row_state_does_not(tmp_path):
    env = make("minimal", action_type="int")
    trained = create_agent(RUN_WIDE, states=env.states, actions=env.actions)
    drive(trained, 0, 30, rows=2)
    trained.save_model(tmp_path, append_timestep=False)
    warm = create_agent(RUN_WIDE, states=env.states, actions=env.actions)
    warm.warm_start(tmp_path, "model")

    (standardize,) = [s for s in warm.preprocessing["state"].preprocessors if isinstance(s, RunningStandardize)]
    (source,) = [s for s in trained.preprocessing["state"].preprocessors if isinstance(s, RunningStandardize)]
    assert standardize.state_dict()["count"] == source.state_dict()["count"] > 0
    np.testing.assert_array_equal(standardize.state_dict()["mean"], source.state_dict()["mean"])
    (scale,) = warm.reward_preprocessing.preprocessors
    (scaled,) = trained.reward_preprocessing.preprocessors
    assert isinstance(scale, RunningReturnScale)
    own, theirs = scale.state_dict(), scaled.state_dict()
    assert (own["count"], own["mean"], own["variance"]) == (theirs["count"], theirs["mean"], theirs["variance"])
    assert len(theirs["returns"]) == 2 and len(own["returns"]) == 0  # each row's return starts at zero
    # the warm agent acts on states as the trained one saw them: the same deterministic actions
    probes = STATES[40, :2]
    np.testing.assert_array_equal(
        warm.act(probes, deterministic=True, independent=True),
        trained.act(probes, deterministic=True, independent=True),
    )


def test_a_checkpoint_that_does_not_fit_changes_nothing(tmp_path):
    trained = build("ppo")
    drive(trained, 0, 20)
    trained.save_model(tmp_path, append_timestep=False)

    env = make("minimal", action_type="int")
    wider = create_agent({**PPO, "network": [{"type": "dense", "size": 9}]}, states=env.states, actions=env.actions)
    before = wider.get_parameters()
    with pytest.raises(ValueError, match="shape"):
        wider.warm_start(tmp_path, "model")
    assert all(torch.equal(value, before[name]) for name, value in wider.get_parameters().items())

    other_kind = build("dqn-replay")
    with pytest.raises(ValueError, match="the checkpoint is of a 'ppo' agent; it cannot be restored into a 'dqn' one"):
        other_kind.warm_start(tmp_path, "model")

    standardized = create_agent(RUN_WIDE, states=env.states, actions=env.actions)
    with pytest.raises(ValueError, match="preprocessed its states with other steps"):
        standardized.warm_start(tmp_path, "model")

    acted = build("ppo")
    drive(acted, 0, 3)
    with pytest.raises(ValueError, match="for an agent that has not acted yet; this one is at timestep 3"):
        acted.warm_start(tmp_path, "model")

    random = create_agent({"type": "random"}, states=env.states, actions=env.actions)
    with pytest.raises(ValueError, match="a random agent learns nothing"):
        random.warm_start(tmp_path, "model")
    with pytest.raises((FileNotFoundError, CheckpointError)):
        build("ppo").warm_start(tmp_path, "elsewhere")
