"""Schedules: a number or a linear schedule over the agent's timesteps, for learning rates and PPO's clipping."""

import pytest
import torch

from tests.agents.test_dqn import run
from torchforce.agents import create_agent
from torchforce.core.optimizers import build_optimizer
from torchforce.core.schedules import Schedule, build_schedule
from torchforce.core.summaries import learning_rate
from torchforce.environments import make
from torchforce.spec import SpecError

LINEAR = {"type": "linear", "initial": 1e-3, "final": 0.0, "timesteps": 1000}


def test_a_linear_schedule_goes_from_initial_to_final_then_stays():
    schedule = build_schedule(LINEAR, "learning_rate")
    assert [schedule.value(t) for t in (0, 250, 500, 1000, 5000)] == pytest.approx([1e-3, 7.5e-4, 5e-4, 0.0, 0.0])
    rising = build_schedule({"type": "linear", "initial": 0.1, "final": 0.3, "timesteps": 4}, "x")
    assert [rising.value(t) for t in range(6)] == pytest.approx([0.1, 0.15, 0.2, 0.25, 0.3, 0.3])
    assert build_schedule(0.2, "x") == Schedule(0.2, 0.2) and build_schedule(0.2, "x").constant


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        ("fast", "lr", "not a number or a schedule"),
        ({"type": "cosine", "initial": 1, "final": 0, "timesteps": 5}, "lr.type", "unknown schedule type"),
        ({"type": "linear", "initial": 1, "final": 0}, "lr.timesteps", "missing"),
        ({"type": "linear", "initial": 1, "final": 0, "timesteps": 5, "steps": 5}, "lr.steps", "unknown key"),
        ({"type": "linear", "initial": 1, "final": -1, "timesteps": 5}, "lr.final", "out of range"),
        ({"type": "linear", "initial": 1, "final": 0, "timesteps": 0}, "lr.timesteps", "out of range"),
        ({"type": "linear", "initial": 0, "final": 0, "timesteps": 5}, "lr.initial", "must be above 0"),
        (0.0, "lr", "must be above 0"),
    ],
)
def test_schedule_errors_name_the_key(spec, path, message):
    with pytest.raises(SpecError) as error:
        build_schedule(spec, "lr", positive=True)
    assert error.value.path == path and message in str(error.value)


def test_an_optimizer_with_a_scheduled_learning_rate_steps_at_the_rate_of_the_timestep():
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = build_optimizer({"type": "gradient_descent", "learning_rate": LINEAR}, [weight])
    assert learning_rate(optimizer) == pytest.approx(1e-3)
    for timestep, rate in ((0, 1e-3), (500, 5e-4), (2000, 0.0)):
        optimizer.at_timestep(timestep)
        before = weight.item()
        optimizer.minimize((weight - 1.0).pow(2).sum() / 2)  # gradient -(1 - w): a step of rate * (1 - w)
        assert weight.item() - before == pytest.approx(rate * (1.0 - before))
    nested = build_optimizer({"type": "multi_step", "optimizer": {"type": "adam", "learning_rate": LINEAR}}, [weight])
    nested.at_timestep(750)
    assert learning_rate(nested) == pytest.approx(2.5e-4)
    with pytest.raises(SpecError, match=r"optimizer\.learning_rate\.final: out of range"):
        build_optimizer({"type": "adam", "learning_rate": {**LINEAR, "final": -1.0}}, [weight])


def ppo(**options):
    env = make("minimal", action_type="int")
    spec = {
        "type": "ppo",
        "network": [{"type": "dense", "size": 8}],
        "update_mode": {"unit": "timesteps", "batch_size": 20, "frequency": 20},
        "memory": {"type": "latest", "capacity": 40},
        "epochs": 1,
        "seed": 0,
        **options,
    }
    return create_agent(spec, states=env.states, actions=env.actions), env


def recorded(agent):
    """(timestep, clipping, learning rate) of each update of ``agent``, as the update used them."""
    seen = []
    update = agent._update

    def recording(batch):
        info = update(batch)
        assert info["likelihood_ratio_clipping"] == agent.clipping  # reported with the update, for TensorBoard
        seen.append((agent.timestep, agent.clipping, learning_rate(agent.optimizer)))
        return info

    agent._update = recording
    return seen


def test_ppo_follows_its_learning_rate_and_clipping_schedules_and_resumes_them(tmp_path):
    rate = {"type": "linear", "initial": 1e-2, "final": 0, "timesteps": 100}
    schedules = {
        "step_optimizer": {"type": "adam", "learning_rate": rate},
        "likelihood_ratio_clipping": {"type": "linear", "initial": 0.2, "final": 0.0, "timesteps": 100},
    }
    agent, env = ppo(**schedules)
    seen = recorded(agent)
    run(agent, env, 60)
    assert [t for t, _, _ in seen] == [20, 40, 60]
    for timestep, clipping, rate in seen:  # set from the timestep before each update
        assert clipping == pytest.approx(0.2 * (1 - timestep / 100))
        assert rate == pytest.approx(1e-2 * (1 - timestep / 100))
    path = agent.save_model(str(tmp_path))
    run(agent, env, 60)
    assert seen[-1] == (120, 0.0, 0.0)  # past the schedules' end
    restored, env = ppo(**schedules)
    restored.restore_model(file=path)
    seen = recorded(restored)
    run(restored, env, 20)
    assert seen == [(80, pytest.approx(0.04), pytest.approx(2e-3))]  # the schedules go on from the checkpoint


def test_a_clipping_schedule_is_checked_with_the_agent_spec():
    with pytest.raises(SpecError) as error:
        ppo(likelihood_ratio_clipping={"type": "linear", "initial": 0.2, "final": -0.1, "timesteps": 10})
    assert error.value.path == "agent.likelihood_ratio_clipping.final" and "out of range" in str(error.value)
