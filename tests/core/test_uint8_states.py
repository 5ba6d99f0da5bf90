"""uint8 states (images kept as bytes) and the ``divide`` layer that turns them into floats inside the network."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.core.networks import build_network
from torchforce.export import export_policy
from torchforce.spec import SpecError, normalize_actions, normalize_states

IMAGE = {"type": "uint8", "shape": (12, 12, 2)}


def test_uint8_is_a_state_type_not_an_action_type():
    states, single = normalize_states(IMAGE)
    assert single and states["state"].type == "uint8" and states["state"].shape == (12, 12, 2)
    with pytest.raises(SpecError, match="unknown") as error:
        normalize_actions({"type": "uint8", "shape": ()})
    assert error.value.path == "actions.type"


def test_divide_layer_scales_bytes_to_floats():
    network = build_network([{"type": "divide", "scale": 255}, {"type": "flatten"}], IMAGE)
    x = torch.randint(0, 256, (3, 12, 12, 2), dtype=torch.uint8)
    y, _ = network({"state": x})
    assert y.dtype == torch.float32 and y.shape == (3, 288)
    torch.testing.assert_close(y, x.reshape(3, -1).float() / 255)
    floats, _ = build_network([{"type": "divide", "scale": -2}], {"type": "float", "shape": (2,)})({"state": y[:, :2]})
    torch.testing.assert_close(floats, y[:, :2] / -2)
    with pytest.raises(SpecError, match="too close to zero") as error:
        build_network([{"type": "divide", "scale": 0}], IMAGE)
    assert error.value.path == "network[0].scale"


def test_layers_take_uint8_inputs_without_a_divide_layer():
    conv = build_network([{"type": "conv2d", "size": 4, "window": 3}, {"type": "flatten"}], IMAGE)
    y, _ = conv({"state": torch.full((2, 12, 12, 2), 200, dtype=torch.uint8)})
    assert y.dtype == torch.float32 and y.shape == (2, 576)
    embedding = build_network([{"type": "embedding", "size": 3}], {"type": "uint8", "shape": (5,)})
    assert embedding.embedding0.weight.shape == (256, 3)  # one row per byte value
    y, _ = embedding({"state": torch.tensor([[0, 1, 254, 255, 7]], dtype=torch.uint8)})
    assert y.shape == (1, 15)


def test_an_agent_keeps_uint8_states_as_bytes_in_memory_and_updates(tmp_path):
    agent = create_agent(
        {
            "type": "dqn",
            "network": [
                {"type": "divide", "scale": 255},
                {"type": "conv2d", "size": 4, "window": 3},
                {"type": "flatten"},
            ],
            "memory": {"type": "replay", "capacity": 64},
            "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4},
            "seed": 0,
        },
        states=IMAGE,
        actions={"type": "int", "num_actions": 3},
    )
    assert agent.memory.fields["states/state"].dtype == np.uint8
    assert agent.memory.fields["next_states/state"].dtype == np.uint8
    rng = np.random.default_rng(0)
    for step in range(24):
        frames = rng.integers(0, 256, size=(2, 12, 12, 2), dtype=np.uint8)
        actions = agent.act(frames)
        assert actions.shape == (2,) and ((0 <= actions) & (actions < 3)).all()
        agent.observe(terminal=[int(step % 6 == 5)] * 2, reward=[1.0, 0.0])
    assert agent.updates >= 1
    stored = agent.memory.retrieve_timesteps(8)["states/state"]
    assert stored.dtype == np.uint8 and stored.shape == (8, 12, 12, 2) and stored.max() > 1
    # the exported policy takes the bytes too, and acts as the agent does
    policy = torch.jit.load(str(export_policy(agent, tmp_path / "policy.pt")))
    frames = rng.integers(0, 256, size=(5, 12, 12, 2), dtype=np.uint8)
    expected = agent.act(frames, deterministic=True, independent=True)
    np.testing.assert_array_equal(policy(torch.from_numpy(frames)).numpy(), expected)
