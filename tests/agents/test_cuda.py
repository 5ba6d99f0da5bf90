"""Agents on a GPU (``device="cuda"``): modules and optimizer state live on the device, memories stay in numpy,
checkpoints move between devices, the fused Adam path gives torch's own results there, and acting waits for the
device at most once a step (torch's sync debug mode counts the waits). Skipped without CUDA (CI has none; these run
on a lent GPU machine)."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.agents.test_host_reads import IMAGE_PPO
from torchforce.agents import create_agent
from torchforce.core.optimizers import build_optimizer
from torchforce.environments import make
from torchforce.execution.training import train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")

MLP = [{"type": "dense", "size": 16}]
PPO = {
    "type": "ppo",
    "network": MLP,
    "update_mode": {"unit": "episodes", "batch_size": 2},
    "epochs": 2,
    "baseline_mode": "states",
    "baseline": {"type": "mlp", "sizes": [16]},
    "gae_lambda": 0.95,
}
DQN = {
    "type": "dqn",
    "network": MLP,
    "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 2},
    "memory": {"type": "prioritized_replay", "capacity": 256},
    "target_sync_frequency": 10,
    "double_q_model": True,
    "actions_exploration": {"type": "epsilon_decay", "timesteps": 100},
}


def host_waits(caught):
    """The host's waits for the GPU among warnings that torch's sync debug mode raised: one "called a synchronizing
    CUDA operation" each (the mode's first use in a process also says it is a "prototype feature": not a wait)."""
    return sum("called a synchronizing CUDA operation" in str(warning.message) for warning in caught)


def run_episodes(agent, env, episodes):
    for _ in range(episodes):
        state, terminal = env.reset(), 0
        while not terminal:
            action = agent.act(state)
            state, terminal, reward = env.execute(action)
            agent.observe(terminal, reward)


@pytest.mark.parametrize("spec, action_type", [(PPO, "int"), (PPO, "float"), (PPO, "bool"), (DQN, "int")])
def test_agents_act_and_learn_on_the_gpu(spec, action_type):
    env = make("minimal", action_type=action_type)
    agent = create_agent(spec, states=env.states, actions=env.actions, device="cuda", seed=0)
    run_episodes(agent, env, 12)
    assert agent.updates > 0
    assert all(parameter.is_cuda for module in agent.trainable_modules().values() for parameter in module.parameters())
    action = agent.act(env.reset(), deterministic=True, independent=True)
    assert isinstance(action, (np.ndarray, np.generic, int, float, bool))


@pytest.mark.parametrize("spec", [PPO, DQN])
def test_a_gpu_checkpoint_restores_on_the_cpu_and_back(tmp_path, spec):
    env = make("minimal", action_type="int")
    on_gpu = create_agent(spec, states=env.states, actions=env.actions, device="cuda", seed=1)
    run_episodes(on_gpu, env, 8)
    on_gpu.save_model(tmp_path / "gpu")
    states = [env.reset() for _ in range(10)]
    expected = [on_gpu.act(state, deterministic=True, independent=True) for state in states]

    on_cpu = create_agent(spec, states=env.states, actions=env.actions, device="cpu")
    on_cpu.restore_model(tmp_path / "gpu")
    assert (on_cpu.timestep, on_cpu.episode, on_cpu.updates) == (on_gpu.timestep, on_gpu.episode, on_gpu.updates)
    assert [on_cpu.act(state, deterministic=True, independent=True) for state in states] == expected
    on_cpu.save_model(tmp_path / "cpu")

    back = create_agent(spec, states=env.states, actions=env.actions, device="cuda")
    back.restore_model(tmp_path / "cpu")
    for name, value in on_gpu.get_parameters().items():
        assert torch.equal(back.get_parameters()[name], value)
    run_episodes(back, env, 2)  # optimizer state restored onto the device: updates keep working


def test_fused_adam_on_the_gpu_matches_torch():
    generator = torch.Generator().manual_seed(0)
    parameters = [
        torch.nn.Parameter(torch.randn(5, 3, generator=generator).cuda()),
        torch.nn.Parameter(torch.randn(3, generator=generator).cuda()),
    ]
    expected = [torch.nn.Parameter(p.detach().clone()) for p in parameters]
    x, y = torch.randn(32, 5, generator=generator).cuda(), torch.randn(32, 3, generator=generator).cuda()

    def loss_fn(batch, reference, weights=parameters):
        return ((batch["x"] @ weights[0] + weights[1] - batch["y"]) ** 2).mean()

    optimizer = build_optimizer({"type": "adam", "learning_rate": 0.01}, parameters)
    reference = torch.optim.Adam(expected, lr=0.01, fused=True)
    for _ in range(5):
        optimizer.step(loss_fn, {"x": x, "y": y})
        reference.zero_grad()
        loss_fn({"x": x, "y": y}, None, expected).backward()
        reference.step()
    for actual, wanted in zip(parameters, expected, strict=True):
        torch.testing.assert_close(actual, wanted)


def test_ppo_learns_cartpole_on_the_gpu():
    from torchforce.configs import shipped

    _, result = train(
        str(shipped("agents", "ppo_cartpole")),
        "CartPole-v1",
        num_environments=8,
        seed=0,
        num_timesteps=100_000,
        threshold=475.0,
        eval_every=2_500,
        agent_kwargs={"device": "cuda"},
    )
    assert result.solved, result.evaluations[-3:]


def test_arrays_go_through_pinned_memory_and_come_back_in_one_wait():
    from torchforce.agents.transfer import to_device, to_host

    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = to_device(array, torch.device("cuda"))
    assert tensor.is_cuda and torch.equal(tensor.cpu(), torch.from_numpy(array))
    groups = [{"a": tensor * 2}, {"b": tensor.sum(1), "c": tensor.long()}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            first, second = to_host(*groups)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert host_waits(caught) <= 1
    np.testing.assert_array_equal(first["a"], array * 2)
    np.testing.assert_array_equal(second["b"], array.sum(1))
    assert second["c"].dtype == np.int64


def test_an_image_ppo_agent_waits_for_the_gpu_at_most_once_an_act():
    """log pi(a|s) and V(s), kept from acting for the update, come back with the actions (``transfer.to_host``)."""
    image = {"type": "uint8", "shape": (32, 32, 4)}
    agent = create_agent(IMAGE_PPO, states=image, actions={"type": "int", "num_actions": 3}, device="cuda")
    assert agent._records_acting
    agent._maybe_update = lambda: None  # acting only
    generator = np.random.default_rng(0)

    def step():
        agent.act(generator.integers(0, 256, (3, 32, 32, 4), dtype=np.uint8))
        agent.observe(terminal=np.zeros(3, dtype=np.int8), reward=np.ones(3, dtype=np.float32))

    step()  # allocations, cuDNN's choices
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(4):
                step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert host_waits(caught) <= 4


def tfcli_lifecycle(root: Path, device: str) -> None:
    """What a user of tfcli does with a run whose agent computes on ``device``: create it, train it in a worker
    process, train it longer from its checkpoint, evaluate it and export it; every command succeeds, and the
    continued run ends at its new budget."""

    def tfcli(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "torchforce", *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, "HOME": str(root)},
        )
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    tfcli("init", "-n", "devices")
    device_set = f"agent.device={device}"
    tfcli("experiment", "new", "-n", "g", "-A", "ppo_cartpole", "-E", "cartpole", "-t", "2048", "--set", device_set)
    tfcli("experiment", "start", "-e", "g", "--follow")
    tfcli("experiment", "start", "-e", "g", "--resume", "-t", "4096", "--follow")
    progress = json.loads((root / "experiments" / "g" / "results" / "progress.json").read_text())
    assert (progress["state"], progress["timesteps"]) == ("finished", 4096), progress
    assert "Traceback" not in (root / "experiments" / "g" / "results" / "worker.log").read_text()
    assert "mean return" in tfcli("experiment", "evaluate", "-e", "g", "--episodes", "2").lower()
    tfcli("experiment", "export", "-e", "g", "--format", "torchscript", "-o", str(root / "g.pt"))
    assert (root / "g.pt").stat().st_size > 0


def test_the_tfcli_lifecycle_of_a_run_on_the_gpu(tmp_path):
    # the client's whole path (spec check, worker, checkpoint, resume, evaluation, export) with the agent on cuda;
    # tests/client runs the same path on the CPU
    isolated = subprocess.run([sys.executable, "-I", "-c", "import torchforce, gymnasium"], capture_output=True)
    if isolated.returncode:  # (bench/gpu_check.sh puts them there: gpu_lib.sh's isolated_path)
        pytest.skip("torchforce or Gymnasium is on PYTHONPATH only, which tfcli's worker (python -I) ignores")
    tfcli_lifecycle(tmp_path, "cuda")
