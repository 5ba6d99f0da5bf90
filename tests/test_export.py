"""torchforce.export: the exported acting policy computes what ``agent.act(states, deterministic=True)`` does, as
TorchScript (loaded back with torch.jit.load) and as ONNX (run with onnxruntime, or ONNX's reference evaluator),
on batches of another size than the one it was traced with; and what it cannot export, it refuses clearly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.durable import unwritable
from torchforce.environments import make
from torchforce.export import ActingPolicy, ExportError, ExportWarning, export_format, export_policy, onnx_names

MLP = [{"type": "dense", "size": 16, "activation": "tanh"}]
PPO = {"type": "ppo", "network": MLP, "update_mode": {"unit": "timesteps", "batch_size": 16}, "seed": 3}
# a Gaussian head for the bounded action (PPO's default there is a Beta), on a ReLU layer whose outputs grow with the
# states: big states push its mean out of the bounds, so the clipping is part of what is compared
PPO_GAUSSIAN = {**PPO, "network": [{"type": "dense", "size": 16}], "distributions": {"action": {"type": "gaussian"}}}
DDPG = {"type": "ddpg", "network": MLP, "seed": 3}
NAF = {"type": "naf", "network": MLP, "seed": 3}
DQN = {"type": "dqn", "network": MLP, "seed": 3}


def agent_for(spec: dict, environment: str | dict):
    env = make(environment)
    return create_agent(spec, states=env.states, actions=env.actions), env


def random_states(spec: dict, rows: int, scale: float = 1.0, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).normal(size=(rows, *spec["shape"])) * scale).astype(np.float32)


def run_torchscript(path, *states: np.ndarray) -> list[np.ndarray]:
    outputs = torch.jit.load(str(path))(*(torch.from_numpy(state) for state in states))
    return [o.numpy() for o in (outputs if isinstance(outputs, tuple) else (outputs,))]


def run_onnx(path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The ONNX model's outputs: onnxruntime when it is installed, else ONNX's reference evaluator."""
    try:
        import onnxruntime
    except ImportError:
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(str(path)).run(None, feeds))
    return list(onnxruntime.InferenceSession(str(path)).run(None, feeds))


def onnx_available() -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")


# ---------------------------------------------------------------------------------------------- one action


@pytest.mark.parametrize(
    ("spec", "environment", "scale"),
    [
        (PPO, "CartPole-v1", 1.0),  # discrete: the argmax of the logits
        (DQN, "CartPole-v1", 1.0),  # discrete: the argmax of the Q-values
        (PPO, "Pendulum-v1", 3.0),  # continuous: the Beta's mean, scaled into [-2, 2]
        (PPO_GAUSSIAN, "Pendulum-v1", 30.0),  # continuous: the Gaussian's mean, clipped into [-2, 2]
        (DDPG, "Pendulum-v1", 30.0),  # continuous: mu(s), tanh-scaled into [-2, 2]
        (NAF, "Pendulum-v1", 3.0),  # continuous: NAF's mu(s)
    ],
    ids=["ppo-cartpole", "dqn-cartpole", "ppo-beta-pendulum", "ppo-gaussian-pendulum", "ddpg-pendulum", "naf-pendulum"],
)
def test_torchscript_acts_as_the_agent(tmp_path, spec, environment, scale):
    agent, env = agent_for(spec, environment)
    path = export_policy(agent, tmp_path / "policy.pt")
    assert path == tmp_path / "policy.pt" and [p.name for p in tmp_path.iterdir()] == ["policy.pt"]
    for rows in (5, 64):  # traced with 2 rows: the batch size stays free
        states = random_states(env.states, rows, scale, seed=rows)
        expected = agent.act(states, deterministic=True, independent=True)
        (actions,) = run_torchscript(path, states)
        assert actions.dtype == expected.dtype and actions.shape == expected.shape == (rows, *expected.shape[1:])
        if expected.dtype == np.int64:
            np.testing.assert_array_equal(actions, expected)
            assert set(expected.tolist()) == {0, 1}  # both actions occur: the comparison means something
        else:
            np.testing.assert_allclose(actions, expected, rtol=0, atol=1e-6)
    if spec is PPO_GAUSSIAN:
        clipped = agent.act(random_states(env.states, 64, scale, seed=64), deterministic=True, independent=True)
        assert 0 < (np.abs(clipped) == 2.0).sum() < 64  # some means were clipped, not all


@pytest.mark.parametrize(("spec", "environment"), [(PPO, "CartPole-v1"), (PPO, "Pendulum-v1"), (DDPG, "Pendulum-v1")])
def test_onnx_acts_as_the_agent(tmp_path, spec, environment):
    onnx_available()
    agent, env = agent_for(spec, environment)
    path = export_policy(agent, tmp_path / "policy.onnx")
    for rows in (3, 50):
        states = random_states(env.states, rows, 30.0 if environment == "Pendulum-v1" else 1.0, seed=rows)
        expected = agent.act(states, deterministic=True, independent=True)
        (actions,) = run_onnx(path, {"state": states})
        assert actions.dtype == expected.dtype and actions.shape == expected.shape
        np.testing.assert_allclose(actions, expected, rtol=0, atol=1e-5)
    import onnx
    from onnx.reference import ReferenceEvaluator

    states = random_states(env.states, 4, seed=4)  # ONNX's own reference evaluator agrees too
    (reference,) = ReferenceEvaluator(str(path)).run(None, {"state": states})
    expected = agent.act(states, deterministic=True, independent=True)
    np.testing.assert_allclose(reference, expected, rtol=0, atol=1e-5)
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == ["state"] and [o.name for o in model.graph.output] == ["action"]
    metadata = json.loads({p.key: p.value for p in model.metadata_props}["torchforce"])
    assert metadata["inputs"] == [
        {"name": "state", "state": "state", "shape": list(env.states["shape"]), "dtype": "float32"}
    ]
    assert metadata["outputs"][0]["action"] == "action" and metadata["single_output"] is True


# ---------------------------------------------------------------------------------------------- named, several


MULTI_NETWORK = [
    [
        {"type": "input", "names": "int"},
        {"type": "embedding", "indices": 3, "size": 4},
        {"type": "output", "name": "int_embedding"},
    ],
    [{"type": "input", "names": ["float", "int_embedding"]}, {"type": "dense", "size": 16}],
]


def multi_states(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(rows)
    return {
        "bool": rng.random(rows) < 0.5,
        "float": rng.uniform(-3, 3, size=(rows, 2)).astype(np.float32),
        "int": rng.integers(0, 3, size=rows),
    }


def test_named_states_and_several_actions_come_in_and_out_in_name_order(tmp_path):
    agent, env = agent_for({**PPO, "network": MULTI_NETWORK}, "multi")
    module = ActingPolicy(agent)
    assert module.state_names == ["bool", "float", "int"]
    assert module.action_names == ["bool", "bounded", "float", "int"]
    # the names clash (a state and an action both called "int"): ONNX names are prefixed
    assert onnx_names(module.state_names, module.action_names) == (
        ["states/bool", "states/float", "states/int"],
        ["actions/bool", "actions/bounded", "actions/float", "actions/int"],
    )
    path = export_policy(agent, tmp_path / "multi.pt")
    states = multi_states(9)
    expected = agent.act(states, deterministic=True, independent=True)
    outputs = run_torchscript(path, states["bool"], states["float"], states["int"])
    assert [o.dtype for o in outputs] == [np.bool_, np.float32, np.float32, np.int64]
    for name, output in zip(module.action_names, outputs, strict=True):
        np.testing.assert_allclose(output, expected[name], rtol=0, atol=1e-6, err_msg=name)
    extra = {"torchforce.json": ""}
    torch.jit.load(str(path), _extra_files=extra)
    described = json.loads(extra["torchforce.json"])
    assert [entry["state"] for entry in described["inputs"]] == ["bool", "float", "int"]
    assert [(entry["action"], entry["dtype"]) for entry in described["outputs"]] == [
        ("bool", "bool"),
        ("bounded", "float32"),
        ("float", "float32"),
        ("int", "int64"),
    ]
    assert described["single_output"] is False


def test_onnx_with_named_states_and_several_actions(tmp_path):
    onnx_available()
    agent, _ = agent_for({**PPO, "network": MULTI_NETWORK}, "multi")
    path = export_policy(agent, tmp_path / "multi.onnx")
    states = multi_states(7)
    expected = agent.act(states, deterministic=True, independent=True)
    outputs = run_onnx(path, {f"states/{name}": value for name, value in states.items()})
    for name, output in zip(["bool", "bounded", "float", "int"], outputs, strict=True):
        np.testing.assert_allclose(output, expected[name], rtol=0, atol=1e-5, err_msg=name)


# ---------------------------------------------------------------------------------------------- preprocessing


def test_state_preprocessing_is_part_of_the_module(tmp_path):
    preprocessing = [
        {"type": "clip", "min_value": -2.0, "max_value": 2.5},
        {"type": "divide", "scale": 0.5},
        {"type": "expand_dims", "axis": 0},
        {"type": "flatten"},
        {"type": "standardize"},
    ]
    agent, env = agent_for({**PPO, "states_preprocessing": preprocessing}, "CartPole-v1")
    path = export_policy(agent, tmp_path / "policy.pt")
    states = random_states(env.states, 40, 3.0)
    expected = agent.act(states, deterministic=True, independent=True)
    np.testing.assert_array_equal(run_torchscript(path, states)[0], expected)
    assert set(expected.tolist()) == {0, 1}
    with torch.no_grad():  # the network on the raw states acts otherwise: the steps really are in the module
        raw = agent.policy.act({"state": torch.from_numpy(states)}, {}, True)[0]["action"].numpy()
    assert not np.array_equal(raw, expected)


@pytest.mark.parametrize("step", ["standardize", "flatten", "normalize"])
def test_preprocessing_of_a_scalar_state_exports_as_the_agent_applies_it(tmp_path, step):
    """A scalar state's batch is ``[batch]``: standardizing each instance gives 0 (not the batch standardized), and
    flattening gives one column."""
    spec = {
        **PPO,
        "network": [{"type": "flatten"}, {"type": "dense", "size": 8}],
        "states_preprocessing": [{"type": step}],
    }
    agent = create_agent(spec, states={"type": "float", "shape": ()}, actions={"type": "int", "num_actions": 3})
    states = np.random.default_rng(1).normal(size=32).astype(np.float32) * 3
    expected = agent.act(states, deterministic=True, independent=True)
    path = export_policy(agent, tmp_path / "policy.pt")
    np.testing.assert_array_equal(run_torchscript(path, states)[0], expected)


@pytest.mark.parametrize(
    ("preprocessing", "message"),
    [
        ({"type": "running_standardize"}, r"step 0 \(RunningStandardize\) cannot be exported: its statistics are each"),
        ({"type": "sequence", "length": 2}, r"step 0 \(Sequence\) cannot be exported: it stacks the last frames"),
        (
            [{"type": "clip", "min_value": -1, "max_value": 1}, {"type": "normalize"}, {"type": "running_standardize"}],
            r"states_preprocessing of 'state', step 2 \(RunningStandardize\)",
        ),
    ],
)
def test_preprocessing_that_keeps_state_is_refused(tmp_path, preprocessing, message):
    agent, _ = agent_for({**PPO, "states_preprocessing": preprocessing}, "CartPole-v1")
    with pytest.raises(ExportError, match=message):
        export_policy(agent, tmp_path / "policy.pt")
    assert list(tmp_path.iterdir()) == []


RUN_LONG = [  # the MuJoCo PPO configs' state normalization (ppo_halfcheetah, ppo_hopper)
    {"type": "running_standardize", "reset_after_batch": False},
    {"type": "clip", "min_value": -10.0, "max_value": 10.0},
]


def see(agent, states: np.ndarray) -> None:
    """A training step on ``states`` (one per row): their statistics go into the agent's running_standardize."""
    agent.act(states)
    agent.observe(terminal=np.zeros(len(states), dtype=bool), reward=np.zeros(len(states)))


@pytest.mark.parametrize("format", ["torchscript", "onnx"])
def test_run_long_statistics_are_exported_frozen_as_act_applies_them(tmp_path, format):
    if format == "onnx":
        onnx_available()
    agent, env = agent_for({**PPO_GAUSSIAN, "states_preprocessing": RUN_LONG}, "Pendulum-v1")
    for seed in range(3):  # statistics from states around 5 +- 3: raw states would act otherwise
        see(agent, 5.0 + random_states(env.states, 8, 3.0, seed=100 + seed))
    path = export_policy(agent, tmp_path / f"policy{'.onnx' if format == 'onnx' else '.pt'}")
    states = 5.0 + random_states(env.states, 64, 3.0, seed=7)

    def exported() -> np.ndarray:
        return run_torchscript(path, states)[0] if format == "torchscript" else run_onnx(path, {"state": states})[0]

    expected = agent.act(states, deterministic=True, independent=True)
    np.testing.assert_allclose(exported(), expected, rtol=0, atol=1e-6)
    assert len(np.unique(expected)) > 10  # the actions vary: the comparison means something
    see(agent, -20.0 + random_states(env.states, 8, seed=9))  # the agent's statistics move on; the file's do not
    moved = agent.act(states, deterministic=True, independent=True)
    assert not np.allclose(moved, expected, atol=1e-3)
    np.testing.assert_allclose(exported(), expected, rtol=0, atol=1e-6)


def test_run_long_statistics_before_a_second_state_pass_states_through(tmp_path):
    agent, env = agent_for({**PPO_GAUSSIAN, "states_preprocessing": RUN_LONG}, "Pendulum-v1")
    path = export_policy(agent, tmp_path / "policy.pt")  # no state seen yet: nothing to standardize by
    states = random_states(env.states, 16, 3.0, seed=2)
    expected = agent.act(states, deterministic=True, independent=True)
    np.testing.assert_allclose(run_torchscript(path, states)[0], expected, rtol=0, atol=1e-6)


def test_normalize_and_grayscale_images(tmp_path):
    states = {"type": "float", "shape": (6, 5, 3)}
    agent = create_agent(
        {
            **PPO,
            "seed": 0,
            "network": [{"type": "flatten"}, *MLP],
            "states_preprocessing": [{"type": "grayscale"}, {"type": "normalize"}],
        },
        states=states,
        actions={"type": "int", "num_actions": 4},
    )
    batch = np.random.default_rng(1).uniform(0, 255, size=(64, 6, 5, 3)).astype(np.float32)
    expected = agent.act(batch, deterministic=True, independent=True)
    path = export_policy(agent, tmp_path / "policy.pt")
    np.testing.assert_array_equal(run_torchscript(path, batch)[0], expected)
    assert len(set(expected.tolist())) > 1


# ---------------------------------------------------------------------------------------------- refused


def test_recurrent_policies_and_agents_without_a_network_are_refused(tmp_path):
    lstm, _ = agent_for({**PPO, "network": [{"type": "internal_lstm", "size": 8}]}, "CartPole-v1")
    with pytest.raises(ExportError, match=r"the ppo agent's network is recurrent \(its internal state internal_lstm"):
        export_policy(lstm, tmp_path / "policy.onnx")
    random_agent, _ = agent_for({"type": "random"}, "CartPole-v1")
    with pytest.raises(ExportError, match="the random agent has no policy network to export"):
        export_policy(random_agent, tmp_path / "policy.pt")
    assert list(tmp_path.iterdir()) == []


BATCH_AS_A_CONSTANT = """
import torch


class ScaledByBatch(torch.nn.Module):
    output_size = 3

    def __init__(self, states=None):
        super().__init__()

    def forward(self, states):
        x = states["state"]
        return x * float(len(x))  # a Python number: tracing keeps the batch size it saw
"""


def test_a_network_that_takes_the_batch_size_as_a_constant_is_refused(tmp_path, monkeypatch):
    (tmp_path / "batchnet.py").write_text(BATCH_AS_A_CONSTANT)
    monkeypatch.syspath_prepend(str(tmp_path))
    agent, _ = agent_for({**DDPG, "network": {"type": "batchnet:ScaledByBatch"}}, "Pendulum-v1")
    with (
        pytest.warns(torch.jit.TracerWarning),
        pytest.raises(ExportError, match="the traced policy acts otherwise on 5 rows than the policy itself"),
    ):
        export_policy(agent, tmp_path / "policy.pt")
    assert [p.name for p in tmp_path.iterdir() if p.name != "__pycache__"] == ["batchnet.py"]  # no file


def test_onnx_without_its_packages_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if not installed: importing it raises ImportError
    agent, _ = agent_for(PPO, "CartPole-v1")
    expected = r"^exporting ONNX needs the onnx package .*: pip install 'torchforce\[export\]'$"
    with pytest.raises(ExportError, match=expected):
        export_policy(agent, tmp_path / "policy.onnx")
    assert list(tmp_path.iterdir()) == []


def test_formats_and_paths_are_checked(tmp_path):
    assert export_format("a.onnx") == "onnx" and export_format("a.PT") == "torchscript"
    assert export_format("a.bin", "onnx") == "onnx"
    with pytest.raises(ExportError, match=r"cannot tell the export format from 'a.bin': name it '.onnx'"):
        export_format("a.bin")
    with pytest.raises(ExportError, match="unknown export format 'tflite': choose torchscript or onnx"):
        export_format("a.onnx", "tflite")
    agent, _ = agent_for(PPO, "CartPole-v1")
    with pytest.raises(ExportError, match="the folder '.*missing' does not exist"):
        export_policy(agent, tmp_path / "missing" / "policy.pt")
    (tmp_path / "taken.pt").mkdir()  # a folder where the file goes: said so, not blamed on the exporter
    with pytest.raises(ExportError, match=r"cannot write '.*taken.pt': it is a folder; name the file to write"):
        export_policy(agent, tmp_path / "taken.pt")
    assert [path.name for path in tmp_path.iterdir()] == ["taken.pt"]
    if unwritable("/proc") is not None:  # a folder that takes no file, also for root: said so, before the tracing
        with pytest.raises(ExportError, match=r"cannot write '/proc/policy.pt': the folder '/proc' takes no new file"):
            export_policy(agent, Path("/proc/policy.pt"))


def test_a_mixed_precision_policy_exports_in_float32_with_a_warning(tmp_path):
    agent, _ = agent_for({**PPO, "mixed_precision": "bfloat16"}, "CartPole-v1")
    with pytest.warns(ExportWarning, match="acts in bfloat16 .* exports in float32"):
        module = ActingPolicy(agent)
    assert all(getattr(m, "autocast_dtype", None) is None for m in module.policy.modules())
    assert agent.policy.network.autocast_dtype == torch.bfloat16  # the agent's own policy is left as it is


def test_the_export_is_a_copy_on_the_cpu_that_later_training_does_not_change(tmp_path):
    agent, env = agent_for(PPO, "CartPole-v1")
    module = ActingPolicy(agent)
    assert not module.training and not any(p.requires_grad for p in module.parameters())
    theirs = dict(agent.policy.named_parameters())
    for name, parameter in module.policy.named_parameters():
        assert parameter.device.type == "cpu"
        assert parameter.data_ptr() != theirs[name].data_ptr()
        torch.testing.assert_close(parameter, theirs[name], rtol=0, atol=0)
    states = random_states(env.states, 8)
    before = module(torch.from_numpy(states)).numpy()
    with torch.no_grad():
        for parameter in agent.policy.parameters():
            parameter.add_(1.0)
    np.testing.assert_array_equal(module(torch.from_numpy(states)).numpy(), before)


def test_a_diverged_policy_is_named_as_such(tmp_path):
    agent, _ = agent_for(PPO_GAUSSIAN, "Pendulum-v1")
    agent.set_parameters({name: torch.full_like(value, float("nan")) for name, value in agent.get_parameters().items()})
    with pytest.raises(ExportError, match="actions are not finite"):
        export_policy(agent, tmp_path / "policy.pt")
