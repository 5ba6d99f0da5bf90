"""``compile: true``: the losses an agent's optimizers step on run through torch.compile (TorchInductor). A compiled
agent updates as the uncompiled one does, up to the last bits of the fused kernels' arithmetic; it resumes from a
checkpoint exactly, as every agent does; and where TorchInductor has no C++ compiler it says so and trains
uncompiled. Each compile takes seconds, so the cases are few and the runs short (TorchInductor keeps what it
compiled on disk, so later runs of the suite take less)."""

import re
import warnings

import pytest
import torch

import torchforce.agents.compute
from tests.agents.test_checkpoint import assert_parameters_equal, assert_trees_equal, build, drive
from torchforce.agents import create_agent

# one agent of each loss the agents have: PPO's two, VPG's and TRPO's policy-gradient losses (TRPO's through the
# natural gradient, which differentiates its KL twice, uncompiled), the Q-learning losses, DQFD's margin loss,
# DDPG's actor through its critic, NAF's advantage
CASES = ["ppo", "vpg-float-gae", "trpo-gae", "dqn-replay", "dqfd", "ddpg", "naf"]
NO_COMPILER = "compile: TorchInductor needs a C++ compiler"


def compiled(agent) -> list[bool]:
    """For each of the agent's losses, whether it is torch.compile's wrapper (and not the method itself)."""
    return [hasattr(getattr(agent, name), "_torchdynamo_orig_callable") for name in agent.losses]


@pytest.mark.parametrize("case", CASES)
def test_a_compiled_agent_updates_as_the_uncompiled_one(case):
    """The same rows and seed with and without ``compile``: the same number of updates, and parameters that agree
    to float32's rounding after them (inductor fuses and reorders sums, so the last bits may differ)."""
    initial = build(case).get_parameters()
    # each agent built and driven before the next is built: building seeds torch's global generator
    eager = build(case)
    drive(eager, 0, 23)
    fused = build(case, compile=True)
    assert compiled(eager) == [False] * len(eager.losses)
    assert compiled(fused) == [True] * len(fused.losses) and fused.losses
    torch._dynamo.utils.counters.clear()
    drive(fused, 0, 23)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # something was compiled, and ran
    assert fused.updates == eager.updates > 0
    ours, theirs = fused.get_parameters(), eager.get_parameters()
    for name, value in theirs.items():
        torch.testing.assert_close(ours[name], value, rtol=1e-4, atol=1e-5, msg=f"{case}: {name}")
    assert any(not torch.equal(value, initial[name]) for name, value in theirs.items())  # the updates moved them
    assert fused.spec["compile"] is True and eager.spec["compile"] is False


def test_a_compiled_run_resumes_exactly(tmp_path):
    """Saved halfway, restored into a fresh compiled agent, continued: the same parameters and state, bit for bit,
    as the run that went on uninterrupted (both compiled)."""
    whole = build("ppo", compile=True)
    drive(whole, 0, 46)
    first = build("ppo", compile=True)
    drive(first, 0, 23)
    first.save_model(tmp_path)
    second = build("ppo", compile=True)
    second.restore_model(tmp_path)
    drive(second, 23, 46)
    assert second.updates == whole.updates > first.updates
    assert_parameters_equal(whole, second)
    assert_trees_equal(whole.state_dict(), second.state_dict())


def test_without_a_cpp_compiler_the_agent_says_so_and_trains_uncompiled(monkeypatch):
    monkeypatch.setattr(torchforce.agents.compute, "cpp_compiler_found", lambda: False)
    with pytest.warns(UserWarning, match=re.escape(NO_COMPILER)) as caught:
        agent = build("dqn-replay", compile=True)
    assert "apt install g++" in str(caught[0].message)
    assert compiled(agent) == [False]
    drive(agent, 0, 23)
    assert agent.updates > 0
    with warnings.catch_warnings():  # uncompiled agents never look for a compiler
        warnings.simplefilter("error")
        build("dqn-replay")


def test_compile_is_a_checked_option():
    from torchforce.spec import SpecError

    with pytest.raises(SpecError) as error:
        build("ppo", compile="yes")
    assert error.value.path == "agent.compile"


def space(environment) -> dict:
    return {"states": environment.states, "actions": environment.actions}


def test_compiled_workers_train_one_shared_model_in_threads():
    """Three PPO workers sharing one compiled model, each in its own thread (the ThreadedRunner): every worker's
    losses are compiled, the threads' updates run through them, and the shared model learns from all three."""
    from torchforce.environments import make
    from torchforce.execution import ThreadedRunner, clone_worker_agent

    spec = {"network": [{"type": "dense", "size": 8}], "update_mode": {"unit": "episodes", "batch_size": 2}}
    environments = [make("minimal", action_type="int", seed=index) for index in range(3)]
    main = create_agent({"type": "ppo", **spec, "compile": True, "seed": 0}, **space(environments[0]))
    agents = clone_worker_agent(main, 3, environments[0], spec["network"], {**spec, "compile": True})
    initial = main.get_parameters()
    assert [compiled(agent) for agent in agents] == [[True, True]] * 3
    torch._dynamo.utils.counters.clear()
    runner = ThreadedRunner(agents, environments)
    runner.run(num_episodes=24)
    assert runner.global_episode == 24
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
    assert all(agent.updates > 0 for agent in agents)  # each thread updated the shared model
    assert any(not torch.equal(value, initial[name]) for name, value in main.get_parameters().items())
    for worker in agents[1:]:  # one model: every worker holds the main agent's parameters
        assert_parameters_equal(main, worker)
