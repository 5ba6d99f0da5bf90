"""Networks: every layer type, shapes (TF padding), multi-input nets, recurrence, init options, regularization,
user modules, the shipped example networks, and every spec error with its message."""

from __future__ import annotations

import json
import math
import re
import sys
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchforce.core.networks import LAYERS, Network, build_network, shipped_networks
from torchforce.core.networks.network import ModuleNetwork, has_penalties, penalized
from torchforce.spec import SpecError, normalize_states


def states_of(spec):
    return normalize_states(spec)[0]


def batch(states, size=3, seed=0):
    """A random batch for the state specs: float32, int64 in [0, num_values or 5), bool."""
    generator = torch.Generator().manual_seed(seed)
    out = {}
    for name, spec in states.items():
        shape = (size, *spec.shape)
        if spec.type == "int":
            out[name] = torch.randint(0, spec.num_values or 5, shape, generator=generator)
        elif spec.type == "bool":
            out[name] = torch.rand(shape, generator=generator) > 0.5
        else:
            out[name] = torch.rand(shape, generator=generator)
    return out


def run(layers, state_spec, size=3):
    states = states_of(state_spec)
    network = build_network(layers, states)
    output, internals = network(batch(states, size), network.initial_internals(size))
    assert output.shape == (size, network.output_size)
    assert output.dtype == torch.float32
    return network, output, internals


def shapes(network):
    return [network.get_submodule(name).output.shape for name in network.layer_names]


# ----------------------------------------------------------------------------------------------------------------
# every layer type


@pytest.mark.parametrize(
    ("state", "layers", "size"),
    [
        ({"shape": 5}, [{"type": "dense", "size": 7}], 7),
        ({"shape": 5}, [{"type": "dense"}], 5),
        ({"shape": 5}, [{"type": "dense", "skip": True, "activation": "tanh"}], 5),
        ({"shape": 5}, [{"type": "linear", "size": 3}], 3),
        ({"shape": [10, 3]}, [{"type": "conv1d", "size": 4, "window": 3, "stride": 2}], 5 * 4),
        ({"shape": [10, 3]}, [{"type": "conv1d", "size": 4, "padding": "VALID"}], 8 * 4),
        ({"shape": [9, 7, 2]}, [{"type": "conv2d", "size": 4, "window": [3, 2], "stride": [2, 1]}], 5 * 7 * 4),
        ({"shape": [9, 7, 2]}, [{"type": "pool2d"}], 5 * 4 * 2),
        ({"shape": [9, 7, 2]}, [{"type": "pool2d", "pooling_type": "average", "padding": "VALID"}], 4 * 3 * 2),
        ({"shape": [2, 3, 4]}, [{"type": "flatten"}], 24),
        ({"type": "int", "shape": [2], "num_values": 7}, [{"type": "embedding", "size": 3}], 6),
        ({"type": "bool", "shape": [2]}, [{"type": "embedding", "size": 3}], 6),
        ({"shape": 5}, [{"type": "dropout", "rate": 0.5}], 5),
        ({"shape": 5}, [{"type": "nonlinearity", "name": "crelu"}], 10),
        ({"shape": 5}, [{"type": "dueling", "size": 4}], 4),
        ({"shape": [6, 3]}, [{"type": "lstm", "size": 4}], 8),
        ({"shape": [6, 3]}, [{"type": "lstm", "size": 4, "return_final_state": False}], 24),
        ({"shape": 5}, [{"type": "internal_lstm", "size": 4}], 4),
        ({"shape": 5}, [{"type": "input", "names": "state"}, {"type": "output", "name": "x"}], 5),
        ({"shape": 5}, [{"type": "tf_layer", "layer": "dense", "units": 3}], 3),
        ({"shape": [3, 4]}, [], 12),
    ],
)
def test_every_layer_type_builds_and_runs(state, layers, size):
    network, _, _ = run(layers, state)
    assert network.output_size == size


def test_every_registered_layer_type_is_covered():
    assert LAYERS.names() == sorted(
        ["conv1d", "conv2d", "dense", "divide", "dropout", "dueling", "embedding", "flatten", "input", "internal_lstm"]
        + ["linear", "lstm", "nonlinearity", "output", "pool2d", "tf_layer"]
    )


def test_module_names_and_state_dict_keys_are_2018_scopes():
    network = build_network("cnn_dqn_network", {"shape": [84, 84, 4]})
    assert network.layer_names == ["conv2d0", "conv2d1", "conv2d2", "flatten0", "dense0"]
    assert list(network.state_dict()) == [
        f"{name}.{p}" for name in ("conv2d0", "conv2d1", "conv2d2", "dense0") for p in ("weight", "bias")
    ]


def test_dense_skip_is_a_residual_block():
    network, _, _ = run([{"type": "dense", "skip": True}], {"shape": 4})
    x = torch.randn(2, 4)
    layer = network.dense0
    hidden = torch.relu(F.linear(x, layer.weight, layer.bias))
    expected = torch.relu(F.linear(hidden, layer.skip.weight, layer.skip.bias) + x)
    torch.testing.assert_close(network({"state": x})[0], expected)


def test_int_and_bool_states_are_cast_to_float_for_dense():
    for spec in ({"type": "int", "shape": 3}, {"type": "bool", "shape": 3}):
        network = build_network([{"type": "linear", "size": 2, "weights": 1.0}], spec)
        x = batch(states_of(spec))["state"]
        torch.testing.assert_close(network({"state": x})[0], x.float().sum(1, keepdim=True).expand(-1, 2))


def test_embedding_looks_up_rows():
    network = build_network([{"type": "embedding", "size": 3}], {"type": "int", "shape": 2, "num_values": 7})
    assert network.embedding0.weight.shape == (7, 3)
    x = torch.tensor([[0, 6], [3, 3]])
    torch.testing.assert_close(network({"state": x})[0], network.embedding0.weight[x].reshape(2, 6))


def test_dropout_only_in_training_mode():
    network = build_network([{"type": "dropout", "rate": 0.5}], {"shape": 1000})
    x = {"state": torch.ones(2, 1000)}
    torch.testing.assert_close(network.eval()(x)[0], x["state"])
    output = network.train()(x)[0]
    assert set(output.unique().tolist()) == {0.0, 2.0}


def test_lstm_final_state_is_c_then_h():
    network = build_network([{"type": "lstm", "size": 4}], {"shape": [6, 3]})
    x = torch.randn(2, 6, 3)
    sequence, (h, c) = network.lstm0.lstm(x)
    output = network({"state": x})[0]
    torch.testing.assert_close(output, torch.cat((c[0], h[0]), 1))
    torch.testing.assert_close(output[:, 4:], sequence[:, -1])


# ----------------------------------------------------------------------------------------------------------------
# padding, pooling and layout


def test_same_padding_matches_tensorflow_on_odd_sizes():
    # 3x3 input, window 2, stride 2, SAME: TF pads 0 before and 1 after (not torch's symmetric padding)
    network = build_network(
        [{"type": "conv2d", "size": 1, "window": 2, "stride": 2, "bias": False, "activation": "none"}],
        {"shape": [3, 3, 1]},
    )
    with torch.no_grad():
        network.conv2d0.weight.fill_(1.0)
    x = torch.arange(1.0, 10.0).reshape(1, 3, 3, 1)
    assert network({"state": x})[0].tolist() == [[12.0, 9.0, 15.0, 9.0]]


def test_pool2d_same_ignores_padding():
    x = {"state": torch.arange(1.0, 10.0).reshape(1, 3, 3, 1)}
    maximum = build_network([{"type": "pool2d"}], {"shape": [3, 3, 1]})
    assert maximum(x)[0].tolist() == [[5.0, 6.0, 8.0, 9.0]]
    average = build_network([{"type": "pool2d", "pooling_type": "average"}], {"shape": [3, 3, 1]})
    assert average(x)[0].tolist() == [[3.0, 4.5, 7.5, 9.0]]


def test_same_padding_stride_2_odd_input_agrees_with_explicit_padding():
    network = build_network([{"type": "conv2d", "size": 3, "window": 4, "stride": 2}], {"shape": [21, 21, 5]})
    layer = network.conv2d0
    assert layer.pad == (1, 2, 1, 2)  # total 3: one before, two after
    x = torch.randn(2, 21, 21, 5)
    expected = F.conv2d(F.pad(x.permute(0, 3, 1, 2), (1, 2, 1, 2)), layer.weight, layer.bias, 2)
    torch.testing.assert_close(network({"state": x})[0], torch.relu(expected).permute(0, 2, 3, 1).reshape(2, -1))


def test_dqn_networks_have_the_known_sizes_on_84x84():
    nature = build_network("cnn_dqn_network", {"shape": [84, 84, 4]})
    assert shapes(nature) == [(21, 21, 32), (11, 11, 64), (11, 11, 64), (7744,), (512,)]
    nips = build_network("cnn_dqn2013_network", {"shape": [84, 84, 4]})
    assert shapes(nips) == [(20, 20, 16), (9, 9, 32), (2592,), (256,)]
    assert nips({"state": torch.rand(2, 84, 84, 4)})[0].shape == (2, 256)


def test_flatten_keeps_nhwc_order_and_the_output_is_flattened():
    network = build_network([], {"shape": [2, 3, 4]})
    x = torch.randn(2, 2, 3, 4)
    torch.testing.assert_close(network({"state": x})[0], x.reshape(2, 24))
    conv = build_network([{"type": "conv2d", "size": 2, "window": 1, "activation": "none"}], {"shape": [3, 3, 1]})
    with torch.no_grad():
        conv.conv2d0.weight.copy_(torch.tensor([1.0, -1.0]).reshape(2, 1, 1, 1))
    x = torch.randn(1, 3, 3, 1)
    torch.testing.assert_close(conv({"state": x})[0], torch.cat((x, -x), dim=3).reshape(1, 18))


# ----------------------------------------------------------------------------------------------------------------
# nonlinearities


@pytest.mark.parametrize(
    ("spec", "reference"),
    [
        ("elu", F.elu),
        ("relu", torch.relu),
        ("selu", torch.selu),
        ("sigmoid", torch.sigmoid),
        ("swish", lambda x: x * torch.sigmoid(x)),
        ("lrelu", lambda x: F.leaky_relu(x, 0.2)),
        ({"name": "leaky_relu", "alpha": 0.1}, lambda x: F.leaky_relu(x, 0.1)),
        ("crelu", lambda x: torch.cat((torch.relu(x), torch.relu(-x)), -1)),
        ("softmax", lambda x: torch.softmax(x, -1)),
        ("softplus", F.softplus),
        ("softsign", F.softsign),
        ("tanh", torch.tanh),
        ("none", lambda x: x),
        ({"name": "relu", "beta": 2.0}, lambda x: torch.relu(2 * x)),
        ({"name": "swish", "beta": 2.0}, lambda x: x * torch.sigmoid(2 * x)),
        ({"name": "none", "max": 0.5, "min": -0.25}, lambda x: x.clamp(-0.25, 0.5)),
    ],
)
def test_nonlinearities(spec, reference):
    kwargs = {"name": spec} if isinstance(spec, str) else spec
    network = build_network([{"type": "nonlinearity", **kwargs}], {"shape": 6})
    x = torch.randn(4, 6)
    torch.testing.assert_close(network({"state": x})[0], reference(x))
    dense = build_network([{"type": "dense", "size": 6, "activation": spec}], {"shape": 6})
    linear = F.linear(x, dense.dense0.weight, dense.dense0.bias)
    torch.testing.assert_close(dense({"state": x})[0], reference(linear))


def test_learned_beta_is_a_parameter():
    network = build_network(
        [{"type": "dense", "size": 3, "activation": {"name": "tanh", "beta": "learn"}}], {"shape": 2}
    )
    assert "dense0.activation.beta" in network.state_dict()
    with torch.no_grad():
        network.dense0.activation.beta.fill_(3.0)
    x = torch.randn(2, 2)
    linear = F.linear(x, network.dense0.weight, network.dense0.bias)
    torch.testing.assert_close(network({"state": x})[0], torch.tanh(3.0 * linear))


def test_activation_null_means_none():
    network = build_network([{"type": "dense", "size": 3, "activation": None}], {"shape": 2})
    x = torch.randn(2, 2)
    torch.testing.assert_close(network({"state": x})[0], F.linear(x, network.dense0.weight, network.dense0.bias))


# ----------------------------------------------------------------------------------------------------------------
# dueling


def test_dueling_math_and_named_outputs():
    layers = [
        {"type": "dueling", "size": 3, "output": ["expectation", "advantage", "mean_advantage"]},
        {"type": "output", "name": "q"},
        {"type": "input", "names": ["q", "expectation", "advantage", "mean_advantage"]},
    ]
    network = build_network(layers, {"shape": 2})
    with torch.no_grad():
        network.dueling0.expectation.weight.copy_(torch.tensor([[1.0, 1.0]]))
        network.dueling0.advantage.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    output = network({"state": torch.tensor([[1.0, 2.0]])})[0]
    # E = 3, A = [1, 2, 3], mean(A) = 2: Q = E + A - mean(A) = [2, 3, 4]
    assert output.tolist() == [[2.0, 3.0, 4.0, 3.0, -1.0, 0.0, 1.0, 2.0]]


# ----------------------------------------------------------------------------------------------------------------
# multiple inputs


def test_reference_multi_input_example_builds_on_bool_int_float_bounded():
    states = {
        "bool": {"type": "bool", "shape": 2},
        "int": {"type": "int", "shape": 3, "num_values": 4},
        "float": {"type": "float", "shape": 4},
        "bounded": {"type": "float", "shape": 5, "min_value": -1.0, "max_value": 1.0},
    }

    def branch(name):
        return [
            {"type": "input", "names": name},
            {"type": "dense", "size": 16},
            {"type": "dense", "size": 16},
            {"type": "output", "name": f"{name}-emb"},
        ]

    join = {
        "type": "input",
        "names": ["bool-emb", "int-emb", "float-emb", "bounded-emb"],
        "aggregation_type": "product",
    }
    spec = [branch("bool"), branch("int"), branch("float"), branch("bounded"), [join, {"type": "dense", "size": 16}]]
    network, output, internals = run(spec, states, size=5)
    assert network.output_size == 16 and internals == {}
    assert network.layer_names[:5] == ["input0", "dense0", "dense1", "output0", "input1"]


@pytest.mark.parametrize(
    ("aggregation", "axis", "expected"),
    [
        ("concat", 1, lambda a, b: torch.cat((a, b), 1)),
        ("concat", -1, lambda a, b: torch.cat((a, b), 2)),
        ("stack", 1, lambda a, b: torch.stack((a, b), 1)),
        ("stack", -1, lambda a, b: torch.stack((a, b), 3)),
        ("sum", 1, lambda a, b: a + b),
        ("product", 1, lambda a, b: a * b),
    ],
)
def test_input_aggregations(aggregation, axis, expected):
    states = states_of({"a": {"shape": [2, 3]}, "b": {"shape": [2, 3]}})
    spec = [{"type": "input", "names": ["a", "b"], "aggregation_type": aggregation, "axis": axis}]
    network = build_network(spec, states)
    x = batch(states, 4)
    reference = expected(x["a"], x["b"]).reshape(4, -1)
    assert network.output_size == reference.shape[1]
    torch.testing.assert_close(network(x)[0], reference)


def test_input_previous_and_mixed_dtypes():
    states = states_of({"image": {"shape": [4]}, "flag": {"type": "bool", "shape": [1]}})
    spec = [
        {"type": "input", "names": "image"},
        {"type": "dense", "size": 3},
        {"type": "input", "names": ["previous", "flag"]},
    ]
    network = build_network(spec, states)
    x = batch(states)
    output = network(x)[0]
    assert network.output_size == 4
    torch.testing.assert_close(output[:, 3:], x["flag"].float())


def test_states_dict_is_not_modified():
    states = states_of({"a": {"shape": 2}, "b": {"shape": 2}})
    network = build_network([{"type": "input", "names": "a"}, {"type": "output", "name": "c"}], states)
    x = batch(states)
    network(x)
    assert set(x) == {"a", "b"}


# ----------------------------------------------------------------------------------------------------------------
# recurrence


def test_internal_lstm_state_starts_at_zero_and_changes():
    network = build_network("mlp2_lstm_network", {"shape": 4})
    assert network.internals == {"internal_lstm0": (2, 32)}
    internals = network.initial_internals(3)
    assert internals["internal_lstm0"].shape == (3, 2, 32) and not internals["internal_lstm0"].any()
    x = {"state": torch.randn(3, 4)}
    first, internals = network(x, internals)
    assert internals["internal_lstm0"].shape == (3, 2, 32) and internals["internal_lstm0"].abs().sum() > 0
    torch.testing.assert_close(internals["internal_lstm0"][:, 1], first)  # h is the output
    second, later = network(x, internals)
    assert not torch.allclose(first, second)
    assert not torch.allclose(internals["internal_lstm0"], later["internal_lstm0"])
    torch.testing.assert_close(network(x, None)[0], first)  # no internals: zeros


# ----------------------------------------------------------------------------------------------------------------
# initialization and regularization


def test_weight_and_bias_options():
    states = {"shape": 3}
    constant = build_network([{"type": "linear", "size": 2, "weights": 0.5, "bias": 1.5}], states).linear0
    assert constant.weight.eq(0.5).all() and constant.bias.eq(1.5).all()
    weights = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]  # [in, out], 2018 layout
    listed = build_network([{"type": "linear", "size": 2, "weights": weights, "bias": [7.0, 8.0]}], states)
    assert listed.linear0.weight.tolist() == [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]
    assert listed({"state": torch.tensor([[1.0, 0.0, 0.0]])})[0].tolist() == [[8.0, 10.0]]
    unbiased = build_network([{"type": "linear", "size": 2, "bias": False}], states).linear0
    assert unbiased.bias is None and list(unbiased.state_dict()) == ["weight"]


@pytest.mark.parametrize(
    ("weights", "fan_in", "size", "std"),
    [
        (None, 100, 100, 0.1),  # min(0.1, sqrt(2 / 200))
        (None, 400, 400, math.sqrt(2 / 800)),
        # 2018's dict form: 2 / (1 + slope^2) * 2 / (in + out), slope 0.25 unless given
        ({"name": "msra", "slope": 1.0}, 50, 400, math.sqrt(2 / 2 * 2 / 450)),
        ({"name": "msra"}, 4, 256, math.sqrt(2 / 1.0625 * 2 / 260)),
        ("msra", 50, 400, math.sqrt(2 / 50)),  # the name alone: He's, fan in only
        ("xavier", 100, 300, math.sqrt(2 / 400)),
    ],
)
def test_weight_init_scales(weights, fan_in, size, std):
    torch.manual_seed(0)
    network = build_network([{"type": "linear", "size": size, "weights": weights}], {"shape": fan_in})
    assert network.linear0.weight.std().item() == pytest.approx(std, rel=0.05)
    assert network.linear0.bias.eq(0).all()


def test_orthogonal_weights_have_orthonormal_rows_times_the_gain():
    torch.manual_seed(0)
    dense = build_network([{"type": "dense", "size": 8, "weights": {"name": "orthogonal", "gain": 2.0}}], {"shape": 32})
    weight = dense.dense0.weight  # [8, 32]: 8 orthonormal rows
    torch.testing.assert_close(weight @ weight.T, 4.0 * torch.eye(8), atol=1e-5, rtol=0)
    image = {"shape": [12, 12, 3]}
    conv = build_network([{"type": "conv2d", "size": 4, "window": 3, "weights": "orthogonal"}], image).conv2d0
    rows = conv.weight.reshape(4, -1)  # [out, in * window]: orthonormal rows at gain 1
    torch.testing.assert_close(rows @ rows.T, torch.eye(4), atol=1e-5, rtol=0)
    assert conv.bias.eq(0).all()


def test_conv_weights_options():
    image = {"shape": [6, 6, 2]}
    torch.manual_seed(0)
    default = build_network([{"type": "conv2d", "size": 50, "window": 3}], image).conv2d0.weight
    torch.manual_seed(0)
    given_null = build_network([{"type": "conv2d", "size": 50, "window": 3, "weights": None}], image).conv2d0.weight
    assert torch.equal(default, given_null)  # 2018's N(0, min(0.1, sqrt(2 / size))) stays the default
    assert default.std().item() == pytest.approx(0.1, rel=0.05)
    msra = build_network([{"type": "conv2d", "size": 400, "window": 3, "weights": "msra"}], image).conv2d0.weight
    assert msra.std().item() == pytest.approx(math.sqrt(2 / (3 * 3 * 2)), rel=0.05)  # fan in counts the window
    filters = torch.arange(2 * 2 * 2 * 3, dtype=torch.float32).reshape(2, 2, 2, 3)  # TF's [height, width, in, out]
    conv = build_network([{"type": "conv2d", "size": 3, "window": 2, "weights": filters.tolist()}], image).conv2d0
    assert torch.equal(conv.weight, filters.permute(3, 2, 0, 1))
    x = torch.randn(1, 6, 6, 2)
    expected = torch.einsum("bhwc,hwco->bo", x[:, :2, :2, :], filters)  # the first output cell, by hand
    torch.testing.assert_close(conv(x)[0, 0, 0], expected[0].relu())
    line = build_network([{"type": "conv1d", "size": 2, "window": 3, "weights": 0.5}], {"shape": [5, 4]}).conv1d0
    assert line.weight.shape == (2, 4, 3) and line.weight.eq(0.5).all()
    with pytest.raises(SpecError, match=r"network\[0\]\.weights: weights of shape \[2, 2\] do not fit"):
        build_network([{"type": "conv2d", "size": 3, "window": 2, "weights": [[1.0, 2.0], [3.0, 4.0]]}], image)


def test_regularization_loss():
    layers = [
        {"type": "linear", "size": 2, "weights": 0.5, "bias": 1.0, "l2_regularization": 0.1, "l1_regularization": 0.01},
        {"type": "dense", "size": 2, "weights": -1.0, "bias": False, "l1_regularization": 0.5},
        {"type": "dense", "size": 2},
    ]
    network = build_network(layers, {"shape": 3})
    # l2 * (sum w^2 + sum b^2) / 2 + l1 * (sum |w| + sum |b|), then 0.5 * sum |w| of the 2x2 dense
    expected = 0.1 * (6 * 0.25 + 2 * 1.0) / 2 + 0.01 * (6 * 0.5 + 2 * 1.0) + 0.5 * 4
    assert network.regularization_loss().item() == pytest.approx(expected)
    network.regularization_loss().backward()
    assert network.linear0.weight.grad is not None
    plain = build_network("mlp2_network", {"shape": 3}).regularization_loss()
    assert plain.shape == () and plain.item() == 0.0


def test_a_loss_is_penalized_only_by_networks_with_penalties():
    """``penalized`` adds a network's weight penalties to a loss, and hands the loss back as it is where there are
    none (adding their zero would change no number); a subclass that overrides ``regularization_loss``, and a user's
    module that has one, count as penalized."""
    loss = torch.tensor(2.0, requires_grad=True)
    regularized = build_network([{"type": "dense", "size": 2, "l2_regularization": 0.1}], {"shape": 3})
    assert regularized.has_penalties
    assert penalized(loss, regularized).item() == pytest.approx(2.0 + regularized.regularization_loss().item())
    plain = build_network("mlp2_network", {"shape": 3})
    assert not plain.has_penalties and penalized(loss, plain) is loss

    class Penalized(Network):
        def regularization_loss(self) -> torch.Tensor:
            return torch.tensor(3.0)

    assert Penalized().has_penalties and penalized(loss, Penalized()).item() == 5.0

    class Module(nn.Module):
        output_size = 2

        def forward(self, states):
            return states["state"]

    class ModulePenalized(Module):
        def regularization_loss(self) -> torch.Tensor:
            return torch.tensor(1.0)

    assert not ModuleNetwork(Module()).has_penalties
    assert penalized(loss, ModuleNetwork(ModulePenalized())).item() == 3.0
    assert has_penalties(nn.Linear(2, 2))  # a module that does not say: its regularization_loss is asked


# ----------------------------------------------------------------------------------------------------------------
# tf_layer


def test_tf_layer_mappings():
    image = {"shape": [8, 8, 3]}
    conv = build_network([{"type": "tf_layer", "layer": "conv2d", "filters": 4, "kernel_size": 3}], image)
    assert conv.tf_layer0.output.shape == (6, 6, 4) and conv.tf_layer0.activation_name == "none"
    conv = build_network(
        [{"type": "tf_layer", "layer": "conv2d", "filters": 4, "kernel_size": [3, 3], "strides": 2, "padding": "same"}],
        image,
    )
    assert conv.tf_layer0.output.shape == (4, 4, 4)
    for layer in ("max_pooling2d", "average_pooling2d"):
        pool = build_network([{"type": "tf_layer", "layer": layer, "pool_size": 2, "strides": 2}], image)
        assert pool.output_size == 4 * 4 * 3
    dense = build_network([{"type": "tf_layer", "layer": "dense", "units": 5, "activation": "tanh"}], {"shape": 3})
    assert dense.output_size == 5 and dense.tf_layer0.activation_name == "tanh"
    dropout = build_network([{"type": "tf_layer", "layer": "dropout"}], {"shape": 3})
    assert dropout.tf_layer0.rate == 0.5
    flat = build_network([{"type": "tf_layer", "layer": "flatten"}], image)
    assert flat.output_size == 192


def test_tf_batch_normalization_train_and_eval():
    network = build_network([{"type": "tf_layer", "layer": "batch_normalization"}], {"shape": [2, 3]})
    x = {"state": torch.randn(64, 2, 3) * 4 + 2}
    output = network.train()(x)[0].reshape(64, 2, 3)
    torch.testing.assert_close(output.mean((0, 1)), torch.zeros(3), atol=1e-5, rtol=0)
    assert network.tf_layer0.running_mean.abs().sum() > 0  # moving averages were updated (momentum 0.99)
    fresh = build_network([{"type": "tf_layer", "layer": "batch_normalization"}], {"shape": 3}).eval()
    y = torch.randn(2, 3)
    torch.testing.assert_close(fresh({"state": y})[0], y / math.sqrt(1 + 1e-3))


# ----------------------------------------------------------------------------------------------------------------
# user modules and other spec forms


class MyNet(nn.Module):
    def __init__(self, *, states, hidden=8):
        super().__init__()
        self.body = nn.Linear(sum(spec.size for spec in states.values()), hidden)
        self.output_size = hidden

    def forward(self, states):
        return self.body(torch.cat([states[name].float().flatten(1) for name in sorted(states)], 1))


class MyRecurrentNet(nn.Module):
    internals = {"count": (1,)}
    output_size = 2

    def __init__(self, *, states):
        super().__init__()

    def forward(self, states, internals):
        count = internals["count"] + 1
        return count.expand(-1, 2).reshape(-1, 1, 2), {"count": count}


class NoSize(nn.Module):
    def __init__(self, *, states):
        super().__init__()


@pytest.fixture
def user_module(monkeypatch):
    module = types.ModuleType("user_networks")
    module.MyNet, module.MyRecurrentNet, module.NoSize = MyNet, MyRecurrentNet, NoSize
    monkeypatch.setitem(sys.modules, "user_networks", module)
    return module


def test_user_module_by_path(user_module):
    states = states_of({"a": {"shape": 2}, "b": {"type": "int", "shape": [3]}})
    network = build_network("user_networks:MyNet", states)
    assert isinstance(network, Network) and network.output_size == 8 and network.internals == {}
    assert network(batch(states))[0].shape == (3, 8)
    network = build_network({"type": "user_networks:MyNet", "hidden": 5}, states)
    assert network.output_size == 5 and "module.body.weight" in network.state_dict()
    assert build_network({"type": "user_networks.MyNet", "hidden": 5}, states).output_size == 5


def test_user_module_with_internals(user_module):
    network = build_network("user_networks:MyRecurrentNet", {"shape": 1})
    assert network.internals == {"count": (1,)}
    internals = network.initial_internals(2)
    output, internals = network({"state": torch.zeros(2, 1)}, internals)
    output, internals = network({"state": torch.zeros(2, 1)}, internals)
    assert output.tolist() == [[2.0, 2.0], [2.0, 2.0]] and internals["count"].tolist() == [[2.0], [2.0]]


def test_instances_and_files(tmp_path):
    states = states_of({"shape": 4})
    network = build_network("mlp2_network", states)
    assert build_network(network, states) is network
    wrapped = build_network(MyNet(states=states), states)
    assert wrapped.output_size == 8
    (tmp_path / "net.json").write_text(json.dumps([[{"type": "dense", "size": 3}], {"type": "dense", "size": 2}]))
    assert build_network(str(tmp_path / "net.json"), states).layer_names == ["dense0", "dense1"]
    (tmp_path / "net.yaml").write_text("- type: dense\n  size: 6\n")
    assert build_network(tmp_path / "net.yaml", states).output_size == 6
    assert build_network({"type": "dense", "size": 3}, states).output_size == 3
    assert build_network([], {"shape": 4, "type": "int"})({"state": torch.ones(1, 4, dtype=torch.long)})[0].dtype == (
        torch.float32
    )


def test_copy_keeps_layers_consistent():
    import copy

    network = build_network(
        [{"type": "dense", "size": 3, "activation": {"name": "relu", "beta": "learn"}}], {"shape": 2}
    )
    clone = copy.deepcopy(network)
    with torch.no_grad():
        clone.dense0.weight.add_(1.0)
    x = {"state": torch.randn(2, 2)}
    assert not torch.allclose(clone(x)[0], network(x)[0])
    assert clone.dense0.act is clone.dense0.activation


# ----------------------------------------------------------------------------------------------------------------
# shipped example networks

SHIPPED = {
    "mlp2_network": ({"shape": 4}, 32),
    "mlp2_normalized_network": ({"shape": 4}, 64),
    "mlp2_embedding_network": ({"type": "int", "shape": [], "num_values": 100}, 32),
    "mlp2_lstm_network": ({"shape": 4}, 32),
    "cnn_dqn_network": ({"shape": [84, 84, 4]}, 512),
    "cnn_dqn2013_network": ({"shape": [84, 84, 1]}, 256),
    "cnn_network_2048": ({"shape": [4, 4, 1]}, 64),
    "cnn2x2_network": ({"shape": [16, 16, 3]}, 128),
}


def test_every_shipped_network_is_tested():
    assert shipped_networks() == sorted(SHIPPED)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_network_builds_and_runs(name):
    state, size = SHIPPED[name]
    network, _, _ = run(name, state, size=4)
    assert network.output_size == size
    network.train()
    output, _ = network(batch(states_of(state), 4), network.initial_internals(4))
    assert output.shape == (4, size)


# ----------------------------------------------------------------------------------------------------------------
# errors


def error_text(spec, states=None):
    with pytest.raises(SpecError) as info:
        build_network(spec, states or {"shape": 4})
    return str(info.value)


def test_unknown_layer_type():
    text = error_text([{"type": "dense", "size": 3}, {"type": "dens", "size": 4}])
    assert text.startswith('network[1].type: unknown layer "dens".')
    assert "Known: conv1d, conv2d, dense" in text and "Did you mean 'dense'?" in text


def test_unknown_key():
    text = error_text([{"type": "dense", "size": 3, "activaton": "tanh"}])
    assert text.startswith("network[0].activaton: unknown argument for layer 'dense'")
    assert "Did you mean 'activation'?" in text


def test_missing_required_key_message():
    text = error_text([{"type": "dense", "size": 3}, {"type": "dense"}, {"type": "linear", "bias": False}])
    assert text == """network[2]: layer 'linear' needs 'size'; got {"type": "linear", "bias": false}."""


@pytest.mark.parametrize(
    ("spec", "states", "pattern"),
    [
        (
            [{"type": "dense", "size": 3}],
            {"a": {"shape": 2}, "b": {"shape": 2}},
            r"network\[0\]: layer 'dense' has no input: 2 states \(a, b\).*\n  Start each branch with",
        ),
        ([[{"type": "dense", "size": 2}], [{"type": "dens"}]], None, r"network\[1\]\[0\]\.type: unknown layer"),
        ([{"type": "input", "names": "stat"}], None, r"network\[0\]\.names: unknown input \"stat\".*'state'"),
        ([{"type": "input", "names": "*"}], {"a": {"shape": 2}, "b": {"shape": 2}}, r"there is none yet"),
        (
            [{"type": "dense", "size": 3}],
            {"shape": [4, 4, 1]},
            r"network\[0\]: layer 'dense' needs an input of shape \[features\].*\n  An image wants convolutions: the "
            r"shipped configs ppo_atari, dqn_atari.*flatten",
        ),
        (
            [{"type": "dense", "size": 3}],
            {"shape": [4, 4]},
            r"layer 'dense' needs an input of shape \[features\].*\n  Add \{\"type\": \"flatten\"\} before it",
        ),
        ([{"type": "conv2d", "size": 3}], None, r"layer 'conv2d' needs an input of shape \[height, width, channels\]"),
        ([{"type": "dense", "size": 3, "activation": "relux"}], None, r"network\[0\]\.activation\.name: unknown.*relu"),
        ([{"type": "dense", "activation": {"nam": "relu"}}], None, r"network\[0\]\.activation\.nam: unknown key"),
        ([{"type": "nonlinearity", "name": "tanh", "alpha": 0.1}], None, r"only lrelu, leaky_relu and elu take alpha"),
        ([{"type": "dense", "size": 0}], None, r"network\[0\]\.size: out of range"),
        ([{"type": "dense", "size": 3, "skip": True}], None, r"network\[0\]\.size: a dense layer with skip=true"),
        ([{"type": "linear", "size": 2, "weights": [[1.0, 2.0]]}], None, r"network\[0\]\.weights: weights of shape"),
        ([{"type": "linear", "size": 2, "weights": "zeros"}], None, r"network\[0\]\.weights\.name: unknown value"),
        ([{"type": "linear", "size": 2, "bias": "yes"}], None, r"network\[0\]\.bias: not a bias"),
        ([{"type": "embedding", "size": 3}], None, r"looks up int or bool values; its input here is float"),
        ([{"type": "embedding", "size": 3}], {"type": "int", "shape": 1}, r"layer 'embedding' needs 'indices'"),
        (
            [{"type": "embedding", "size": 3, "indices": 2}],
            {"type": "int", "shape": 1, "num_values": 5},
            r"indices: fewer than the 5 values",
        ),
        ([{"type": "pool2d", "padding": "SAMEE"}], {"shape": [4, 4, 1]}, r"padding: unknown value.*'SAME'"),
        ([{"type": "pool2d", "window": 5, "padding": "VALID"}], {"shape": [4, 4, 1]}, r"window \(5\) is larger"),
        ([{"type": "conv2d", "size": 2, "window": [1, 2, 3]}], {"shape": [4, 4, 1]}, r"window: not an int or a pair"),
        ([{"type": "pool2d", "pooling_type": "min"}], {"shape": [4, 4, 1]}, r"pooling_type: unknown value"),
        ([{"type": "dropout", "rate": 1.5}], None, r"network\[0\]\.rate: out of range"),
        ([{"type": "output", "name": "state"}], None, r"the name 'state' is already taken by a state"),
        (
            [{"type": "output", "name": "x"}, {"type": "output", "name": "x"}],
            None,
            r"network\[1\]: the name 'x' is already taken by an earlier output",
        ),
        (
            [{"type": "input", "names": ["a", "b"]}],
            {"a": {"shape": 2}, "b": {"shape": [2, 1]}},
            r"cannot concatenate shapes \[\(2,\), \(2, 1\)\]",
        ),
        (
            [{"type": "input", "names": ["a", "b"], "aggregation_type": "sum"}],
            {"a": {"shape": 2}, "b": {"shape": 3}},
            r"cannot sum inputs of different shapes",
        ),
        ([{"type": "input", "names": ["state", "*"], "axis": 0}], None, r"axis: out of range"),
        ([{"type": "input", "names": "state", "aggregation_type": "mean"}], None, r"aggregation_type: unknown"),
        ([{"type": "dueling", "size": 2, "output": ["a", "b"]}], None, r"network\[0\]\.output: not three names"),
        ([{"type": "lstm", "size": 2}], None, r"layer 'lstm' needs an input of shape \[timesteps, features\]"),
        ([{"type": "internal_lstm", "size": 2, "lstmcell_args": {"use_peepholes": True}}], None, r"use_peepholes"),
        ([{"type": "tf_layer", "layer": "conv3d"}], None, r"tf_layer 'conv3d' is not available in torchforce"),
        ([{"type": "tf_layer", "layer": "dens"}], None, r"network\[0\]\.layer: unknown tf_layer.*'dense'"),
        ([{"type": "tf_layer", "layer": "dense", "unit": 3}], None, r"network\[0\]\.unit: .*Did you mean 'units'"),
        ([{"type": "tf_layer", "layer": "dense"}], None, r"tf_layer 'dense' needs 'units'"),
        ([{"type": "tf_layer", "layer": "dense", "units": -1}], None, r"network\[0\]\.units: out of range"),
        (
            [{"type": "tf_layer", "layer": "batch_normalization", "axis": 0}],
            None,
            r"only the last \(channels\) axis",
        ),
        ([{"size": 3}], None, r"network\[0\]: a layer spec needs 'type'"),
        (["dense"], None, r"network\[0\]: not a layer"),
        ([{"type": "dense", "incoming": 3}], None, r"network\[0\]\.incoming: set by torchforce"),
        ([{"type": "tests_no_such_module:Layer"}], None, r"network\[0\]\.type: cannot import"),
        ("mlp3_network", None, r"network: unknown network \"mlp3_network\".*Did you mean 'mlp2_network'"),
        ({"size": 3}, None, r"network: a network dict needs 'type'"),
        ({"type": "dence", "size": 3}, None, r"network\.type: unknown layer or network class.*'dense'"),
        (42, None, r"network: not a network spec"),
        ("no_such_file.json", None, r"network: spec file not found"),
    ],
)
def test_spec_errors(spec, states, pattern):
    assert re.search(pattern, error_text(spec, states), re.S), error_text(spec, states)


def test_user_class_errors(user_module):
    assert "network: the network NoSize does not say its output_size" in error_text("user_networks:NoSize")
    assert "network.hiden: unknown argument" in error_text({"type": "user_networks:MyNet", "hiden": 3})
    assert "module 'user_networks' has no attribute 'MyNte'" in error_text("user_networks:MyNte")
    user_module.NotAModule = dict
    assert error_text("user_networks:NotAModule") == (
        "network: 'user_networks:NotAModule' is not a network class; expected a subclass of torch.nn.Module, got the "
        "class dict."
    )


def test_errors_in_files_name_the_file(tmp_path):
    file = tmp_path / "bad_network.json"
    file.write_text(json.dumps([{"type": "dense", "size": 3}, {"type": "dense", "activation": "rleu"}]))
    text = error_text(str(file))
    assert text.startswith("network[1].activation.name: unknown value") and f"(in {file})" in text
