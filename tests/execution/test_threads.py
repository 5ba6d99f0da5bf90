"""The runners' torch thread policy (docs/internals.md, Torch threads): ``run`` uses ``torch_threads`` intra-op
threads (1 by default) in the thread that runs it and in the threads it starts, and sets torch's count back when it
returns, raises or is interrupted; None leaves torch's setting alone. Speed figures are in bench/README.md."""

import threading

import pytest
import torch

from torchforce.agents import create_agent
from torchforce.environments import make, make_vector
from torchforce.execution import Runner, ThreadedRunner
from torchforce.execution.training import train
from torchforce.spec import SpecError

BEFORE = 3  # a count no runner default produces, so that "set back" and "left alone" are both visible


@pytest.fixture(autouse=True)
def _threads_before():
    torch.set_num_threads(BEFORE)
    yield
    torch.set_num_threads(1)


def ppo(env):
    network = [{"type": "dense", "size": 8}]
    spec = {"type": "ppo", "network": network, "update_mode": {"unit": "timesteps", "batch_size": 20}, "seed": 0}
    return create_agent(spec, states=env.states, actions=env.actions)


def threads_in_run(runner, **run_kwargs) -> list[int]:
    """torch's thread count after each step of ``runner.run``."""
    seen: list[int] = []

    def step_finished(_runner):
        seen.append(torch.get_num_threads())
        return True

    runner.run(step_finished=step_finished, **run_kwargs)
    return seen


@pytest.mark.parametrize("vectorized", [False, True])
def test_run_uses_one_thread_by_default_and_sets_the_count_back(vectorized):
    env = make_vector("CartPole-v1", 2, seed=0) if vectorized else make("CartPole-v1")
    runner = Runner(ppo(env), env)
    assert runner.torch_threads == 1
    seen = threads_in_run(runner, num_timesteps=60)
    assert set(seen) == {1} and len(seen) == (30 if vectorized else 60)
    assert runner.agent.timestep == 60 and runner.agent.updates > 0  # updates ran inside the one-thread block
    assert torch.get_num_threads() == BEFORE
    runner.close()


def test_a_given_count_is_used_and_none_leaves_torch_alone():
    env = make("CartPole-v1")
    assert set(threads_in_run(Runner(ppo(env), env, torch_threads=2), num_timesteps=20)) == {2}
    assert torch.get_num_threads() == BEFORE
    assert set(threads_in_run(Runner(ppo(env), env, torch_threads=None), num_timesteps=20)) == {BEFORE}
    assert torch.get_num_threads() == BEFORE
    env.close()


def test_the_count_is_set_back_when_the_run_raises():
    env = make("CartPole-v1")
    runner = Runner(ppo(env), env)

    def fail(_runner):
        assert torch.get_num_threads() == 1
        raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        runner.run(num_timesteps=10, step_finished=fail)
    assert torch.get_num_threads() == BEFORE
    runner.close()


def test_threaded_runner_workers_run_on_one_thread_each():
    environments = [make("CartPole-v1") for _ in range(2)]
    agents = [ppo(environments[0]), ppo(environments[1])]
    runner = ThreadedRunner(agents, environments)
    seen: dict[int, set[int]] = {0: set(), 1: set()}
    names: set[str] = set()

    def step_finished(_runner, worker):
        seen[worker].add(torch.get_num_threads())
        names.add(threading.current_thread().name)
        return True

    runner.run(num_timesteps=40, step_finished=step_finished)
    assert seen == {0: {1}, 1: {1}}
    assert names == {"torchforce-worker-0", "torchforce-worker-1"}  # measured in the workers' own threads
    assert torch.get_num_threads() == BEFORE
    assert all(worker.torch_threads is None for worker in runner.runners)  # the ThreadedRunner sets it, once
    runner.close()


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_a_bad_count_is_refused_by_name(bad):
    env = make("CartPole-v1")
    with pytest.raises(SpecError, match="torch_threads"):
        Runner(ppo(env), env, torch_threads=bad)
    with pytest.raises(SpecError, match="torch_threads"):
        ThreadedRunner([ppo(env)], [env], torch_threads=bad)
    env.close()


def test_train_refuses_a_bad_count_before_building_anything(monkeypatch):
    built = []
    monkeypatch.setattr("torchforce.execution.training.make_vector", lambda *a, **k: built.append(a))
    with pytest.raises(SpecError, match="torch_threads"):
        train("ppo_cartpole", "CartPole-v1", num_timesteps=100, torch_threads=0)
    assert built == []
