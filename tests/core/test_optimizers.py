"""Optimizers: torch wrappers against torch.optim, meta optimizers, natural gradient, synchronization, spec errors."""

from __future__ import annotations

import copy

import pytest
import torch

from torchforce.core.optimizers import (
    Optimizer,
    Synchronization,
    Update,
    backtracking_line_search,
    build_optimizer,
    build_synchronization,
    conjugate_gradient,
)
from torchforce.spec import SpecError

# -- a tiny regression problem ----------------------------------------------------------------------------------


def make_problem(seed: int = 0, batch_size: int = 16):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.nn.Parameter(torch.randn(3, 2, generator=generator))
    bias = torch.nn.Parameter(torch.randn(2, generator=generator))
    batch = {"x": torch.randn(batch_size, 3, generator=generator), "y": torch.randn(batch_size, 2, generator=generator)}
    return [weight, bias], batch


def regression_loss(parameters):
    weight, bias = parameters

    def loss_fn(batch, reference):
        return ((batch["x"] @ weight + bias - batch["y"]) ** 2).mean()

    return loss_fn


def clone_parameters(parameters):
    return [torch.nn.Parameter(parameter.detach().clone()) for parameter in parameters]


def assert_same(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        assert torch.equal(a.detach(), e.detach())


# -- torch wrappers -----------------------------------------------------------------------------------------------

WRAPPERS = [
    (
        {"type": "adam", "learning_rate": 0.01, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6},
        torch.optim.Adam,
        {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6},
    ),
    (
        {"type": "nadam", "learning_rate": 0.02, "beta1": 0.85, "beta2": 0.98, "epsilon": 1e-7},
        torch.optim.NAdam,
        {"lr": 0.02, "betas": (0.85, 0.98), "eps": 1e-7},
    ),
    ({"type": "gradient_descent", "learning_rate": 0.1}, torch.optim.SGD, {"lr": 0.1}),
    ({"type": "momentum", "learning_rate": 0.05, "momentum": 0.9}, torch.optim.SGD, {"lr": 0.05, "momentum": 0.9}),
    (
        {"type": "momentum", "learning_rate": 0.05, "momentum": 0.8, "use_nesterov": True},
        torch.optim.SGD,
        {"lr": 0.05, "momentum": 0.8, "nesterov": True},
    ),
    (
        {"type": "rmsprop", "learning_rate": 0.01, "decay": 0.8, "momentum": 0.5, "epsilon": 1e-6, "centered": True},
        torch.optim.RMSprop,
        {"lr": 0.01, "alpha": 0.8, "momentum": 0.5, "eps": 1e-6, "centered": True},
    ),
    ({"type": "rmsprop", "learning_rate": 0.01}, torch.optim.RMSprop, {"lr": 0.01, "alpha": 0.9, "eps": 1e-10}),
    (
        {"type": "adagrad", "learning_rate": 0.1, "initial_accumulator_value": 0.2},
        torch.optim.Adagrad,
        {"lr": 0.1, "initial_accumulator_value": 0.2},
    ),
    ({"type": "adagrad", "learning_rate": 0.1}, torch.optim.Adagrad, {"lr": 0.1, "initial_accumulator_value": 0.1}),
    (
        {"type": "adadelta", "learning_rate": 0.5, "rho": 0.9, "epsilon": 1e-5},
        torch.optim.Adadelta,
        {"lr": 0.5, "rho": 0.9, "eps": 1e-5},
    ),
    ({"type": "adadelta"}, torch.optim.Adadelta, {"lr": 0.001, "rho": 0.95, "eps": 1e-8}),
    ({"type": "adam"}, torch.optim.Adam, {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8}),
]


@pytest.mark.parametrize(("spec", "torch_class", "torch_kwargs"), WRAPPERS, ids=lambda v: getattr(v, "__name__", None))
def test_wrapper_matches_torch_optim(spec, torch_class, torch_kwargs):
    parameters, batch = make_problem()
    expected = clone_parameters(parameters)
    optimizer = build_optimizer(spec, parameters)
    reference_optimizer = torch_class(expected, **torch_kwargs)
    for _ in range(5):
        info = optimizer.step(regression_loss(parameters), batch)
        reference_optimizer.zero_grad()
        loss = regression_loss(expected)(batch, None)
        loss.backward()
        reference_optimizer.step()
        assert info["loss"] == pytest.approx(loss.item())
    assert_same(parameters, expected)
    assert all(parameter.grad is None for parameter in parameters)


def test_adam_state_and_skipped_parameters_match_torch_fused_adam():
    """Adam calls the fused kernel itself: its state (step counts, moments) is torch's own, and a parameter without
    a gradient is left alone, moments and step count included, as torch.optim.Adam leaves it."""
    parameters, batch = make_problem()
    unused = torch.nn.Parameter(torch.ones(4))
    expected = clone_parameters([*parameters, unused])
    optimizer = build_optimizer({"type": "adam", "learning_rate": 0.01, "clip_grad_norm": 0.5}, [*parameters, unused])
    reference = torch.optim.Adam(expected, lr=0.01, fused=True)
    for _ in range(4):
        optimizer.step(regression_loss(parameters), batch)
        reference.zero_grad(set_to_none=True)
        regression_loss(expected[:2])(batch, None).backward()
        torch.nn.utils.clip_grad_norm_(expected[:2], 0.5)
        reference.step()
    assert_same([*parameters, unused], expected)
    assert_state_equal(optimizer.state_dict()["torch"], reference.state_dict())


@pytest.mark.parametrize("spec", [spec for spec, _, _ in WRAPPERS[:3]], ids=lambda s: s["type"])
def test_a_step_counts_in_the_versions_of_the_parameters_it_moves(spec):
    """Every in-place write of a tensor counts in its version, which autograd's check of saved tensors and the
    layers' cast copies (``Layer.weight_and_bias``) rely on; torch's fused Adam kernel alone does not count its
    writes, so torchforce's Adam counts them itself. A parameter without a gradient keeps its version."""
    parameters, batch = make_problem()
    unused = torch.nn.Parameter(torch.ones(4))
    optimizer = build_optimizer(spec, [*parameters, unused])
    before = [parameter._version for parameter in (*parameters, unused)]
    optimizer.step(regression_loss(parameters), batch)
    assert [parameter._version > version for parameter, version in zip(parameters, before[:2], strict=True)] == [
        True,
        True,
    ]
    assert unused._version == before[2]


@pytest.mark.parametrize("spec", [{"type": "adam"}, {"type": "nadam"}], ids=lambda s: s["type"])
def test_a_conv_weight_with_a_channels_last_gradient_steps_as_torchs_unfused_optimizer(spec):
    """A conv weight's gradient from channels-last inputs (torchforce's image layout) comes out channels-last while
    the weight is contiguous. Each element must still move by its own gradient: torch's fused Adam kernel walks
    both in memory order, and fed such a gradient it steps every element with another's (found on Atari PPO, whose
    CNN learned far less than SB3's on the same updates)."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 8, 3)
    images = torch.randn(16, 4, 9, 9).contiguous(memory_format=torch.channels_last)
    probe = torch.autograd.grad(conv(images).square().sum(), conv.weight)[0]
    assert probe.stride() != conv.weight.stride(), "the setup no longer yields a channels-last weight gradient"
    reference = copy.deepcopy(conv)
    optimizer = build_optimizer({**spec, "learning_rate": 0.1}, list(conv.parameters()))
    torch_class = {"adam": torch.optim.Adam, "nadam": torch.optim.NAdam}[spec["type"]]
    expected = torch_class(reference.parameters(), lr=0.1, foreach=False)
    for _ in range(3):
        optimizer.minimize(conv(images).square().mean())
        expected.zero_grad()
        reference(images).square().mean().backward()
        expected.step()
    torch.testing.assert_close(conv.weight, reference.weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(conv.bias, reference.bias, rtol=1e-5, atol=1e-6)


def test_clip_grad_norm_clips_the_global_gradient_norm():
    parameters, batch = make_problem()
    before = [parameter.detach().clone() for parameter in parameters]
    optimizer = build_optimizer({"type": "gradient_descent", "learning_rate": 1.0, "clip_grad_norm": 0.1}, parameters)
    info = optimizer.step(regression_loss(parameters), batch)
    step_norm = torch.linalg.vector_norm(
        torch.cat([(p.detach() - b).reshape(-1) for p, b in zip(parameters, before, strict=True)])
    )
    assert info["grad_norm"] > 0.1
    assert float(step_norm) == pytest.approx(0.1, rel=1e-5)


def test_clipping_scales_a_gradient_tensor_two_parameters_share_once():
    # autograd hands the same tensor to both terms of a sum (as torch's fused LSTM backward does for its two biases)
    first, second = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(3))
    optimizer = build_optimizer(
        {"type": "gradient_descent", "learning_rate": 1.0, "clip_grad_norm": 1.0}, [first, second]
    )
    target = torch.tensor([1.0, 2.0, 3.0])
    optimizer.minimize(((first + second) * target).sum())  # each gradient is target: norm sqrt(2) * |target|
    expected = -target / (2**0.5 * float(torch.linalg.vector_norm(target)) + 1e-6)
    torch.testing.assert_close(first.detach(), expected)
    torch.testing.assert_close(second.detach(), expected)


def test_momentum_nesterov_needs_momentum():
    parameters, _ = make_problem()
    with pytest.raises(SpecError, match="Nesterov"):
        build_optimizer({"type": "momentum", "learning_rate": 0.1, "momentum": 0.0, "use_nesterov": True}, parameters)


# -- multi_step, subsampling_step, clipped_step ----------------------------------------------------------------


def test_multi_step_computes_the_reference_once_and_steps_num_steps_times():
    parameters, batch = make_problem()
    calls = {"reference": 0, "loss": 0}
    loss = regression_loss(parameters)

    def reference_fn(batch):
        calls["reference"] += 1
        return batch["y"] * 2.0

    def loss_fn(batch, reference):
        calls["loss"] += 1
        assert torch.equal(reference, batch["y"] * 2.0)
        return loss(batch, reference)

    expected = clone_parameters(parameters)
    optimizer = build_optimizer(
        {"type": "multi_step", "num_steps": 7, "optimizer": {"type": "gradient_descent", "learning_rate": 0.1}},
        parameters,
    )
    info = optimizer.step(loss_fn, batch, reference_fn=reference_fn)
    assert calls == {"reference": 1, "loss": 7}
    assert info["num_steps"] == 7.0 and info["last_loss"] < info["loss"]
    sgd = torch.optim.SGD(expected, lr=0.1)
    for _ in range(7):
        sgd.zero_grad()
        regression_loss(expected)(batch, None).backward()
        sgd.step()
    assert_same(parameters, expected)


@pytest.mark.parametrize(("fraction", "size"), [(0.1, 5), (0.5, 25), (1.0, 50), (0.01, 1), (0.001, 1)])
def test_subsampling_size(fraction, size):
    parameters, batch = make_problem(batch_size=50)
    seen = []
    loss = regression_loss(parameters)

    def loss_fn(batch, reference):
        seen.append((batch["x"].shape[0], batch["y"].shape[0]))
        return loss(batch, reference)

    optimizer = build_optimizer(
        {
            "type": "subsampling_step",
            "fraction": fraction,
            "optimizer": {"type": "gradient_descent", "learning_rate": 0.1},
        },
        parameters,
    )
    info = optimizer.step(loss_fn, batch)
    assert seen == [(size, size)]
    assert info["subsample_size"] == size


def test_subsampling_takes_the_same_rows_with_replacement_from_batch_and_reference():
    parameters, _ = make_problem()
    weight = parameters[0]
    batch = {"index": torch.arange(8), "nested": {"twice": torch.arange(8) * 2}}
    drawn = []

    def reference_fn(batch):
        return {"rows": batch["index"] * 10, "scalar": torch.tensor(3.0), "other": torch.zeros(5)}

    def loss_fn(batch, reference):
        assert torch.equal(reference["rows"], batch["index"] * 10)
        assert torch.equal(batch["nested"]["twice"], batch["index"] * 2)
        assert torch.equal(reference["scalar"], torch.tensor(3.0)) and reference["other"].shape == (5,)
        drawn.append(batch["index"].clone())
        return weight.sum() * batch["index"].float().mean()

    subsampling = {
        "type": "subsampling_step",
        "fraction": 1.0,
        "optimizer": {"type": "gradient_descent", "learning_rate": 0.01},
    }
    optimizer = build_optimizer({"type": "multi_step", "num_steps": 20, "optimizer": subsampling}, parameters)
    torch.manual_seed(3)
    optimizer.step(loss_fn, batch, reference_fn=reference_fn)
    assert len(drawn) == 20 and all(rows.shape == (8,) for rows in drawn)
    assert any(len(set(rows.tolist())) < 8 for rows in drawn)  # with replacement: repeats occur
    torch.manual_seed(3)
    assert torch.equal(drawn[0], torch.randint(8, (8,)))  # torch's global RNG


def test_subsampling_passes_on_the_inner_steps_predicted_improvement():
    # optimized_step(subsampling_step(natural_gradient)): the line search judges by natural_gradient's prediction
    from torchforce.core.optimizers.base import Objective

    weight, batch, reference_fn, loss_fn, kl_fn = softmax_policy()
    spec = {"type": "natural_gradient", "learning_rate": 1e-3, "cg_max_iterations": 50}
    subsampling = build_optimizer({"type": "subsampling_step", "fraction": 0.5, "optimizer": spec}, [weight])
    update = subsampling.apply_update(Objective(loss_fn, kl_fn), batch, reference_fn(batch).detach())
    assert update.estimated_improvement is not None and update.estimated_improvement > 0
    assert update.estimated_improvement == update.info["estimated_improvement"]


def test_subsampling_rejects_ragged_batches():
    parameters, batch = make_problem()
    batch["y"] = batch["y"][:3]
    optimizer = build_optimizer(
        {"type": "subsampling_step", "optimizer": {"type": "gradient_descent", "learning_rate": 0.1}}, parameters
    )
    with pytest.raises(ValueError, match="leading batch size"):
        optimizer.step(regression_loss(parameters), batch)


def test_clipped_step_clips_the_applied_deltas_elementwise():
    parameter = torch.nn.Parameter(torch.zeros(5))
    coefficients = torch.tensor([-2.0, -0.3, 0.0, 0.2, 5.0])
    optimizer = build_optimizer(
        {
            "type": "clipped_step",
            "clipping_value": 0.25,
            "optimizer": {"type": "gradient_descent", "learning_rate": 1.0},
        },
        [parameter],
    )
    deltas = optimizer.compute_deltas(lambda batch, reference: (coefficients * parameter).sum(), {})
    assert torch.equal(deltas[0], torch.tensor([0.25, 0.25, 0.0, -0.2, -0.25]))
    optimizer.step(lambda batch, reference: (coefficients * parameter).sum(), {})
    assert torch.equal(parameter.detach(), torch.tensor([0.25, 0.25, 0.0, -0.2, -0.25]))


# -- compute_deltas / apply_deltas / state ---------------------------------------------------------------------

PPO_LIKE = {
    "type": "multi_step",
    "num_steps": 3,
    "optimizer": {"type": "subsampling_step", "fraction": 0.5, "optimizer": {"type": "adam", "learning_rate": 0.01}},
}


@pytest.mark.parametrize("spec", [{"type": "adam", "learning_rate": 0.01}, PPO_LIKE], ids=["adam", "ppo_like"])
def test_compute_deltas_leaves_everything_unchanged_and_apply_deltas_equals_step(spec):
    parameters, batch = make_problem()
    stepped = clone_parameters(parameters)
    optimizer = build_optimizer(spec, parameters)
    step_optimizer = build_optimizer(spec, stepped)
    torch.manual_seed(0)
    optimizer.step(regression_loss(parameters), batch)  # some moments first
    torch.manual_seed(0)
    step_optimizer.step(regression_loss(stepped), batch)
    parameters[0].grad = torch.ones_like(parameters[0])
    before = [parameter.detach().clone() for parameter in parameters]
    state = copy.deepcopy(optimizer.state_dict())

    torch.manual_seed(1)
    deltas = optimizer.compute_deltas(regression_loss(parameters), batch)
    assert_same(parameters, before)
    assert torch.equal(parameters[0].grad, torch.ones_like(parameters[0])) and parameters[1].grad is None
    assert_state_equal(optimizer.state_dict(), state)

    torch.manual_seed(1)
    step_optimizer.step(regression_loss(stepped), batch)
    optimizer.apply_deltas(deltas)
    torch.testing.assert_close([p.detach() for p in parameters], [p.detach() for p in stepped], rtol=0, atol=1e-7)


def test_compute_deltas_keep_state_advances_the_moments_like_step():
    parameters, batch = make_problem()
    stepped = clone_parameters(parameters)
    optimizer = build_optimizer({"type": "adam", "learning_rate": 0.01}, parameters)
    step_optimizer = build_optimizer({"type": "adam", "learning_rate": 0.01}, stepped)
    for _ in range(3):
        optimizer.apply_deltas(optimizer.compute_deltas(regression_loss(parameters), batch, keep_state=True))
        step_optimizer.step(regression_loss(stepped), batch)
    assert_state_equal(optimizer.state_dict(), step_optimizer.state_dict())
    torch.testing.assert_close([p.detach() for p in parameters], [p.detach() for p in stepped], rtol=0, atol=1e-7)


def test_apply_deltas_checks_count_and_shapes():
    parameters, _ = make_problem()
    optimizer = build_optimizer("adam", parameters)
    with pytest.raises(ValueError, match="expected 2 deltas"):
        optimizer.apply_deltas([torch.zeros(3, 2)])
    with pytest.raises(ValueError, match="shape"):
        optimizer.apply_deltas([torch.zeros(3, 2), torch.zeros(3)])


def assert_state_equal(actual, expected):
    if isinstance(expected, torch.Tensor):
        assert torch.equal(actual, expected)
    elif isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for key in expected:
            assert_state_equal(actual[key], expected[key])
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_state_equal(a, e)
    else:
        assert actual == expected


@pytest.mark.parametrize("spec", [{"type": "adam", "learning_rate": 0.01}, PPO_LIKE], ids=["adam", "ppo_like"])
def test_state_dict_round_trip_restores_the_moments_exactly(spec):
    parameters, batch = make_problem()
    optimizer = build_optimizer(spec, parameters)
    for _ in range(3):
        optimizer.step(regression_loss(parameters), batch)
    state = copy.deepcopy(optimizer.state_dict())
    restored_parameters = clone_parameters(parameters)
    restored = build_optimizer(spec, restored_parameters)
    restored.load_state_dict(state)
    assert_state_equal(restored.state_dict(), optimizer.state_dict())
    adam_state = state["torch"] if "torch" in state else state["optimizer"]["optimizer"]["torch"]
    assert adam_state["state"][0]["exp_avg"].abs().sum() > 0
    torch.manual_seed(5)
    optimizer.step(regression_loss(parameters), batch)
    torch.manual_seed(5)
    restored.step(regression_loss(restored_parameters), batch)
    assert_same(restored_parameters, parameters)


# -- natural gradient ------------------------------------------------------------------------------------------


def softmax_policy(seed: int = 0):
    """A linear softmax policy over 3 actions, a batch of 12 states, PPO/TRPO-style callbacks."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.nn.Parameter(0.5 * torch.randn(4, 3, generator=generator))
    batch = {
        "states": torch.randn(12, 4, generator=generator),
        "actions": torch.randint(3, (12,), generator=generator),
        "advantages": torch.randn(12, generator=generator),
    }

    def log_probs(batch):
        return torch.log_softmax(batch["states"] @ weight, dim=-1)

    def reference_fn(batch):
        return log_probs(batch)

    def loss_fn(batch, reference):
        new = log_probs(batch).gather(1, batch["actions"][:, None])[:, 0]
        old = reference.gather(1, batch["actions"][:, None])[:, 0]
        return -(torch.exp(new - old) * batch["advantages"]).mean()

    def kl_fn(batch, reference):
        return (reference.exp() * (reference - log_probs(batch))).sum(-1).mean()

    return weight, batch, reference_fn, loss_fn, kl_fn


def test_conjugate_gradient_solves_a_known_spd_system():
    generator = torch.Generator().manual_seed(0)
    m = torch.randn(6, 6, generator=generator, dtype=torch.float64)
    a = m @ m.T + torch.eye(6, dtype=torch.float64)
    b = torch.randn(6, generator=generator, dtype=torch.float64)
    x = conjugate_gradient(lambda v: a @ v, b, max_iterations=20)
    torch.testing.assert_close(x, torch.linalg.solve(a, b), rtol=1e-8, atol=1e-8)
    assert torch.equal(
        conjugate_gradient(lambda v: a @ v, torch.zeros(6, dtype=torch.float64), max_iterations=5), b * 0
    )


def test_natural_gradient_step_meets_the_kl_bound():
    weight, batch, reference_fn, loss_fn, kl_fn = softmax_policy()
    before = weight.detach().clone()
    reference = reference_fn(batch).detach()
    optimizer = build_optimizer({"type": "natural_gradient", "learning_rate": 1e-3, "cg_max_iterations": 50}, [weight])
    info = optimizer.step(loss_fn, batch, reference_fn=reference_fn, kl_fn=kl_fn)
    step = (weight.detach() - before).reshape(-1)

    def kl_of(flat):
        logp = torch.log_softmax(batch["states"] @ flat.reshape(4, 3), dim=-1)
        return (reference.exp() * (reference - logp)).sum(-1).mean()

    fisher = torch.autograd.functional.hessian(kl_of, before.reshape(-1))
    assert float(0.5 * step @ fisher @ step) == pytest.approx(1e-3, rel=1e-4)
    assert info["kl_estimate"] == 1e-3
    assert kl_fn(batch, reference).item() == pytest.approx(1e-3, rel=0.1)  # the quadratic model holds for small steps
    assert info["estimated_improvement"] > 0
    assert loss_fn(batch, reference).item() < info["loss"]


def test_natural_gradient_zero_step_without_curvature_and_needs_kl_fn():
    parameter = torch.nn.Parameter(torch.ones(3))
    optimizer = build_optimizer({"type": "natural_gradient", "learning_rate": 0.01}, [parameter])
    info = optimizer.step(lambda b, r: (parameter**2).sum(), {}, kl_fn=lambda b, r: (parameter * 0.0).sum())
    assert torch.equal(parameter.detach(), torch.ones(3)) and info["kl_estimate"] == 0.0
    with pytest.raises(ValueError, match="kl_fn"):
        optimizer.step(lambda b, r: (parameter**2).sum(), {})


def test_trpo_like_optimized_natural_gradient_improves_the_surrogate():
    weight, batch, reference_fn, loss_fn, kl_fn = softmax_policy(seed=1)
    optimizer = build_optimizer(
        {
            "type": "optimized_step",
            "ls_max_iterations": 10,
            "ls_accept_ratio": 0.9,
            "ls_unroll_loop": True,
            "optimizer": {"type": "natural_gradient", "learning_rate": 0.01, "cg_unroll_loop": False},
        },
        [weight],
    )
    info = optimizer.step(loss_fn, batch, reference_fn=reference_fn, kl_fn=kl_fn)
    assert info["loss_after"] < info["loss"]
    assert 0.0 < info["ls_scale"] <= 1.0


# -- optimized_step / line search ------------------------------------------------------------------------------


class Uphill(Optimizer):
    """Steps along +gradient: always makes a convex loss worse."""

    def apply_update(self, objective, batch, reference):
        loss = objective.loss(batch, reference)
        grads = torch.autograd.grad(loss, self.parameters)
        with torch.no_grad():
            for parameter, grad in zip(self.parameters, grads, strict=True):
                parameter.add_(grad)
        return Update([g.clone() for g in grads], {"loss": loss.item()})


@pytest.mark.parametrize(("mode", "parameter"), [("exponential", 0.5), ("linear", 0.25)])
def test_optimized_step_backtracks_an_overshooting_step(mode, parameter):
    point = torch.nn.Parameter(torch.ones(2))
    optimizer = build_optimizer(
        {
            "type": "optimized_step",
            "ls_mode": mode,
            "ls_parameter": parameter,
            "optimizer": {"type": "gradient_descent", "learning_rate": 3.0},
        },
        [point],
    )
    info = optimizer.step(lambda b, r: 0.5 * (point**2).sum(), {})
    # the full step lands at -2 (loss 4 > 0.5); half of it lands at -0.5 (loss 0.125)
    assert torch.allclose(point.detach(), torch.full((2,), -0.5))
    assert info["ls_scale"] == 0.5 and info["loss"] == 1.0 and info["loss_after"] == pytest.approx(0.25)


def test_optimized_step_undoes_a_step_that_never_improves():
    point = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    optimizer = build_optimizer({"type": "optimized_step", "optimizer": Uphill([point])}, [point])
    info = optimizer.step(lambda b, r: 0.5 * (point**2).sum(), {})
    assert torch.equal(point.detach(), torch.tensor([1.0, -2.0]))
    assert info["ls_scale"] == 0.0 and info["ls_iterations"] == 10


def test_optimized_step_with_a_kl_bound_rejects_fractions_outside_it():
    # gradient descent from 1 with step 1.5 lands at -0.5 (loss .125 < .5: accepted without a bound). The "KL" here is
    # the squared distance from the start, 2.25 for the full step: a bound of 1.0 rejects it and half of it (0.5625)
    # is accepted.
    point = torch.nn.Parameter(torch.ones(1))
    spec = {"type": "optimized_step", "ls_max_kl": 1.0, "optimizer": {"type": "gradient_descent", "learning_rate": 1.5}}
    optimizer = build_optimizer(spec, [point])
    info = optimizer.step(
        lambda b, r: 0.5 * (point**2).sum(),
        {},
        reference_fn=lambda b: point.detach().clone(),
        kl_fn=lambda b, start: ((point - start) ** 2).sum(),
    )
    assert info["ls_scale"] == 0.5 and torch.allclose(point.detach(), torch.tensor([0.25]))
    unbounded = torch.nn.Parameter(torch.ones(1))
    spec.pop("ls_max_kl")
    build_optimizer(spec, [unbounded]).step(lambda b, r: 0.5 * (unbounded**2).sum(), {})
    assert torch.allclose(unbounded.detach(), torch.tensor([-0.5]))


def test_line_search_uses_the_estimated_improvement():
    # the loss falls by (0.5 - 0.2 s) of the predicted amount at fraction s: the ratio rises as the step shrinks
    # but never reaches 0.9, so nothing is accepted and the best fraction (the full step) is kept; at ratio 0.2 the
    # full step (0.3) is accepted at once
    def evaluate(scale):
        return 1.0 - scale * (0.5 - 0.2 * scale)

    kwargs = {"base_value": 1.0, "full_step_value": 0.7, "estimated_improvement": 1.0, "max_iterations": 4}
    result = backtracking_line_search(evaluate, accept_ratio=0.9, **kwargs)
    assert (result.scale, result.accepted, result.iterations) == (1.0, False, 4)
    result = backtracking_line_search(evaluate, accept_ratio=0.2, **kwargs)
    assert (result.scale, result.accepted, result.iterations) == (1.0, True, 0)
    tried = []  # linear fractions; none improves, so all are tried and the step is undone
    kwargs["full_step_value"] = 2.0
    result = backtracking_line_search(
        lambda s: tried.append(s) or 2.0, accept_ratio=0.9, mode="linear", parameter=0.3, **kwargs
    )
    assert tried == pytest.approx([0.7, 0.4, 0.1]) and (result.scale, result.accepted) == (0.0, False)


@pytest.mark.parametrize(
    ("ratios", "scale", "iterations"),
    [
        ([0.3, 0.2], 1.0, 1),  # halving lowers the ratio: the full step is kept (TRPO's usual case)
        ([0.3, 0.5, 0.6, 0.55], 0.25, 3),  # it rises twice, then falls: back to the quarter step
        ([-1.0, 0.3, 0.2], 0.5, 2),  # the full step worsens the loss: never kept, the ratio-stop starts at 1/2
        ([0.3, -1.0], 1.0, 1),  # a fraction that worsens the loss stops the search too
        ([0.3, 0.3], 1.0, 1),  # an equal ratio is no rise
    ],
)
def test_line_search_stops_once_shrinking_no_longer_raises_the_ratio(ratios, scale, iterations):
    # 2018's rule (spec 1.6: "it stops ... when there is no improvement (it then undoes the last step)"), without
    # which a 0.9 accept ratio halves every natural-gradient step down to where the surrogate is linear
    fractions = [0.5**k for k in range(len(ratios))]
    values = {s: 1.0 - r * s * 0.1 for s, r in zip(fractions, ratios, strict=True)}  # estimated improvement 0.1
    tried = []

    def evaluate(s):
        tried.append(s)
        return values[s] if s in values else 1.0 - 0.9 * s * 0.1  # past the list: accepted

    result = backtracking_line_search(
        evaluate,
        base_value=1.0,
        full_step_value=values[1.0],
        estimated_improvement=0.1,
        max_iterations=10,
        accept_ratio=0.9,
    )
    assert (result.scale, result.iterations, result.accepted) == (scale, iterations, True)
    assert result.value == pytest.approx(values[scale])
    assert tried == fractions[1 : iterations + 1]


def test_line_search_without_an_estimate_takes_the_first_improving_fraction():
    result = backtracking_line_search(
        lambda s: {0.5: 1.5, 0.25: 0.9}[s],
        base_value=1.0,
        full_step_value=3.0,
        estimated_improvement=None,
        max_iterations=10,
        accept_ratio=0.9,
    )
    assert (result.scale, result.value, result.iterations, result.accepted) == (0.25, 0.9, 2, True)


# -- evolutionary ----------------------------------------------------------------------------------------------


def test_evolutionary_keeps_signed_perturbations():
    point = torch.nn.Parameter(torch.ones(4))
    optimizer = build_optimizer({"type": "evolutionary", "learning_rate": 0.1}, [point])
    torch.manual_seed(0)
    info = optimizer.step(lambda b, r: (point**2).sum(), {})
    torch.manual_seed(0)
    perturbation = torch.randn(4) * 0.1
    sign = 1.0 if float(((1 + perturbation) ** 2).sum()) < 4.0 else -1.0
    torch.testing.assert_close(point.detach(), 1 + sign * perturbation)
    assert info["loss"] == 4.0


def test_evolutionary_decreases_a_quadratic():
    point = torch.nn.Parameter(torch.ones(10))
    optimizer = build_optimizer({"type": "evolutionary", "learning_rate": 0.05, "num_samples": 4}, [point])
    torch.manual_seed(0)
    for _ in range(100):
        optimizer.step(lambda b, r: (point**2).sum(), {})
    assert (point**2).sum().item() < 1.0  # from 10.0


# -- synchronization -------------------------------------------------------------------------------------------


def test_synchronization_timing_and_weights():
    source = [torch.full((2,), 4.0), torch.full((3,), -2.0)]
    target = [torch.zeros(2), torch.zeros(3)]
    sync = Synchronization(source, target, sync_frequency=3, update_weight=0.5)
    assert [sync.sync(time) for time in range(7)] == [True, False, False, True, False, False, True]
    assert torch.equal(target[0], torch.full((2,), 3.5)) and torch.equal(target[1], torch.full((3,), -1.75))
    assert sync.state_dict() == {"last_sync": 6}
    other = Synchronization(source, [t.clone() for t in target], sync_frequency=3, update_weight=0.5)
    other.load_state_dict(sync.state_dict())
    assert not other.sync(8) and other.sync(9)


def test_synchronization_hard_copy_and_spec():
    source = [torch.nn.Parameter(torch.randn(3))]
    target = [torch.nn.Parameter(torch.zeros(3))]
    sync = build_synchronization({"type": "synchronization", "sync_frequency": 10}, source, target)
    assert sync.sync(0) and torch.equal(target[0].detach(), source[0].detach())
    with pytest.raises(SpecError) as error:
        build_synchronization({"sync_frequency": 10, "update_weigth": 0.5}, source, target)
    assert error.value.path == "synchronization.update_weigth" and "update_weight" in str(error.value)
    with pytest.raises(SpecError) as error:
        build_synchronization({"update_weight": 0.0}, source, target, path="agent.target")
    assert error.value.path == "agent.target.update_weight"
    with pytest.raises(ValueError, match="shape"):
        Synchronization(source, [torch.zeros(4)])


# -- specs and errors ------------------------------------------------------------------------------------------


def spec_error(spec, parameters=None):
    parameters = parameters or make_problem()[0]
    with pytest.raises(SpecError) as error:
        build_optimizer(spec, parameters)
    return error.value


def test_unknown_optimizer_suggests_the_closest_name():
    error = spec_error({"type": "adma", "learning_rate": 0.1})
    assert error.path == "optimizer.type"
    assert 'unknown optimizer "adma"' in str(error) and "Did you mean 'adam'?" in str(error)
    assert "natural_gradient" in str(error)  # the known names are listed
    assert spec_error("rmsprob").path == "optimizer"


def test_unknown_kwarg_suggests_the_closest_name():
    error = spec_error({"type": "rmsprop", "learning_rate": 0.1, "decai": 0.9})
    assert error.path == "optimizer.decai" and "unknown argument" in str(error) and "'decay'" in str(error)
    error = spec_error({"type": "multi_step", "optimizer": "adam", "num_step": 5})
    assert error.path == "optimizer.num_step" and "'num_steps'" in str(error)


def test_missing_nested_optimizer():
    error = spec_error({"type": "multi_step", "num_steps": 5})
    assert error.path == "optimizer.optimizer" and "needs a nested optimizer" in str(error)
    error = spec_error({"type": "optimized_step", "optimizer": {"type": "clipped_step", "clipping_value": 1.0}})
    assert error.path == "optimizer.optimizer.optimizer"


def test_negative_learning_rate_and_other_bad_values():
    error = spec_error({"type": "adam", "learning_rate": -0.1})
    assert error.path == "optimizer.learning_rate" and "> 0" in str(error) and "-0.1" in str(error)
    nested = {"type": "multi_step", "optimizer": {"type": "subsampling_step", "optimizer": {"type": "adam"}}}
    nested["optimizer"]["optimizer"]["learning_rate"] = 0
    assert spec_error(nested).path == "optimizer.optimizer.optimizer.learning_rate"
    assert spec_error({"type": "multi_step", "optimizer": {"type": "adma"}}).path == "optimizer.optimizer.type"
    assert spec_error({"type": "gradient_descent"}).path == "optimizer" and "learning_rate" in str(
        spec_error({"type": "gradient_descent"})
    )
    assert spec_error({"type": "rmsprop", "learning_rate": 0.1, "decay": 1.5}).path == "optimizer.decay"
    assert spec_error({"type": "adam", "beta1": 1.0}).path == "optimizer.beta1"
    assert spec_error({"type": "adam", "clip_grad_norm": -1.0}).path == "optimizer.clip_grad_norm"
    assert spec_error({"type": "subsampling_step", "fraction": 0.0, "optimizer": "adam"}).path == "optimizer.fraction"
    assert spec_error({"type": "multi_step", "num_steps": 0, "optimizer": "adam"}).path == "optimizer.num_steps"
    assert spec_error({"type": "clipped_step", "clipping_value": -1, "optimizer": "adam"}).path == (
        "optimizer.clipping_value"
    )
    error = spec_error({"type": "optimized_step", "ls_mode": "expo", "optimizer": "adam"})
    assert error.path == "optimizer.ls_mode" and "exponential" in str(error)
    assert spec_error({"type": "natural_gradient", "learning_rate": 0.01, "cg_damping": -1}).path == (
        "optimizer.cg_damping"
    )
    assert spec_error({"type": "evolutionary", "learning_rate": 0.1, "num_samples": 0}).path == "optimizer.num_samples"
    error = spec_error({"type": "synchronization"})
    assert error.path == "optimizer.type" and "target_sync_frequency" in str(error)


def test_specs_of_2018_configs_build():
    parameters, batch = make_problem()
    for spec in [
        PPO_LIKE,
        {"type": "global_optimizer", "optimizer": {"type": "evolutionary", "learning_rate": 0.01, "unroll_loop": True}},
        {"type": "multi_step", "num_steps": 2, "unroll_loop": False, "optimizer": "adam"},
        {"type": "optimized_step", "optimizer": {"type": "natural_gradient", "learning_rate": 0.01}},
    ]:
        assert isinstance(build_optimizer(spec, parameters), Optimizer)
    ready = build_optimizer("adam", parameters)
    assert build_optimizer(ready, parameters) is ready
    from torchforce.core.optimizers import Adam, GlobalOptimizer

    assert isinstance(build_optimizer(Adam, parameters), Adam)
    assert isinstance(build_optimizer("torchforce.core.optimizers:Adam", parameters), Adam)
    assert isinstance(build_optimizer({"type": Adam, "learning_rate": 0.1}, parameters), Adam)
    assert spec_error({"type": torch.optim.Adam}).path == "optimizer.type"
    wrapped = build_optimizer({"type": "global_optimizer", "optimizer": {"type": "adam"}}, parameters)
    assert isinstance(wrapped, GlobalOptimizer)
    assert wrapped.step(regression_loss(parameters), batch)["loss"] > 0


@pytest.mark.parametrize("kernel", ["unverified", "refusing"])
def test_adam_takes_the_public_step_without_a_verified_fused_kernel(monkeypatch, kernel):
    """On a torch version the fast path was not verified on, or when the private kernel refuses its arguments, Adam
    steps through torch.optim.Adam's public step, with the same results and state as the fast path."""
    from torchforce.core.optimizers import torch_optimizers

    def refuse(*args, **kwargs):
        raise TypeError("_fused_adam_() got an unexpected keyword argument")

    parameters, batch = make_problem()
    expected = clone_parameters(parameters)
    fast = build_optimizer({"type": "adam", "learning_rate": 0.01}, expected)
    if kernel == "unverified":
        monkeypatch.setattr(torch_optimizers, "FUSED_ADAM_VERIFIED", ("0.1",))
    optimizer = build_optimizer({"type": "adam", "learning_rate": 0.01}, parameters)
    if kernel == "refusing":
        optimizer._kernel = refuse
    else:
        assert optimizer._kernel is None
    for _ in range(3):
        optimizer.step(regression_loss(parameters), batch)
        fast.step(regression_loss(expected), batch)
    assert optimizer._kernel is None and fast._kernel is not None
    assert_same(parameters, expected)
    assert_state_equal(optimizer.state_dict()["torch"], fast.state_dict()["torch"])


def test_plain_optimizers_minimize_a_loss_and_only_the_others_need_the_closure():
    parameters, batch = make_problem()
    expected = clone_parameters(parameters)
    plain = build_optimizer({"type": "adam", "learning_rate": 0.01}, parameters)
    stepped = build_optimizer({"type": "adam", "learning_rate": 0.01}, expected)
    for _ in range(3):
        info = plain.minimize(regression_loss(parameters)(batch, None))
        assert stepped.step(regression_loss(expected), batch) == info
    assert_same(parameters, expected)
    assert not plain.needs_closure
    for spec in (
        {"type": "multi_step", "optimizer": {"type": "adam"}, "num_steps": 2},
        {"type": "evolutionary", "learning_rate": 0.1},
    ):
        assert build_optimizer(spec, parameters).needs_closure


# -- building and training without torch's compiler ---------------------------------------------------------------

WITHOUT_THE_COMPILER = """
import json, sys
import torch
from torchforce.core.optimizers.torch_optimizers import without_the_compiler
from torchforce.execution.training import train

method = torch.optim.Optimizer.add_param_group.__wrapped__
with without_the_compiler():
    agent, result = train(sys.argv[1], "CartPole-v1", num_timesteps=300, seed=0)
    inside = {"imported": "torch._dynamo" in sys.modules, "updates": agent.updates}
after = {"unmarked": not hasattr(method, "__dynamo_disable")}
torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))])  # as torch marks it: with its compiler
after["marked_by_torch"] = "torch._dynamo" in sys.modules and method.__dynamo_disable is not method
print(json.dumps({"inside": inside, "after": after}))
"""


def test_an_agent_trains_without_importing_the_compiler_and_torch_marks_its_optimizers_after(tmp_path):
    """``without_the_compiler`` (tfcli's spec checks and workers): an agent is built and updated without
    ``torch._dynamo`` (seconds of import); after the block, torch's own mark comes back."""
    import json
    import subprocess
    import sys

    from torchforce.configs import shipped

    config = tmp_path / "vpg.json"
    spec = json.loads(shipped("agents", "vpg_cartpole").read_text())
    config.write_text(json.dumps({**spec, "update_mode": {"unit": "episodes", "batch_size": 2}}))
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_COMPILER, str(config)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["inside"]["imported"] is False and result["inside"]["updates"] > 0, result
    assert result["after"] == {"unmarked": True, "marked_by_torch": True}, result
