"""Distributions: shapes, sampling, and log_prob/entropy/KL against torch.distributions as the reference."""

import math

import pytest
import torch
from torch import distributions as reference

from torchforce.core.distributions import DISTRIBUTIONS, Distribution, build_distribution
from torchforce.core.distributions.beta import standard_gamma
from torchforce.core.distributions.gaussian import LOG_STD_BOUND
from torchforce.spec import ActionSpec, SpecError

BOOL = ActionSpec("press", "bool", (2, 3))
INT = ActionSpec("move", "int", (2, 3), num_actions=4)
FLOAT = ActionSpec("force", "float", (2, 3))
BOUNDED = ActionSpec("steer", "float", (2, 3), min_value=-2.0, max_value=3.0)


def build(action, spec=None, input_size=5):
    return build_distribution(action, input_size, spec, path=f"distributions.{action.name}")


def params_of(distribution, batch=4, seed=0):
    torch.manual_seed(seed)
    return distribution(torch.randn(batch, distribution.input_size) * 2.0)


def test_default_types_by_action():
    assert type(build(BOOL)).__name__ == "Bernoulli"
    assert type(build(INT)).__name__ == "Categorical"
    assert type(build(FLOAT)).__name__ == "Gaussian"
    assert type(build(BOUNDED)).__name__ == "Beta"
    assert DISTRIBUTIONS.names() == ["bernoulli", "beta", "categorical", "deterministic", "gaussian"]
    assert type(build(BOUNDED, "gaussian")).__name__ == "Gaussian"
    ready = build(INT)
    assert build(INT, ready) is ready and isinstance(ready, Distribution)


@pytest.mark.parametrize(
    ("action", "param_shapes", "dtype"),
    [
        (BOOL, [(4, 2, 3)], torch.bool),
        (INT, [(4, 2, 3, 4)], torch.int64),
        (FLOAT, [(4, 2, 3), (4, 2, 3)], torch.float32),
        (BOUNDED, [(4, 2, 3), (4, 2, 3)], torch.float32),
    ],
)
def test_shapes_and_dtypes(action, param_shapes, dtype):
    distribution = build(action)
    params = params_of(distribution)
    assert [tuple(p.shape) for p in params] == param_shapes
    for deterministic in (False, True):
        sample = distribution.sample(params, deterministic)
        assert sample.shape == (4, 2, 3) and sample.dtype == dtype
        for value in (distribution.log_prob(params, sample), distribution.entropy(params)):
            assert value.shape == (4, 2, 3) and torch.isfinite(value).all()
    assert distribution.kl_divergence(params, params).shape == (4, 2, 3)


def test_scalar_action_shape():
    distribution = build(ActionSpec("a", "int", (), num_actions=3))
    params = params_of(distribution, batch=1)
    assert params[0].shape == (1, 3)
    assert distribution.sample(params).shape == (1,)
    assert distribution.q_values(params).shape == (1, 3)


def test_categorical_against_torch():
    distribution = build(INT)
    params, other = params_of(distribution, seed=0), params_of(distribution, seed=1)
    (logits,) = params
    torch_a, torch_b = reference.Categorical(logits=logits), reference.Categorical(logits=other[0])
    action = distribution.sample(params)
    torch.testing.assert_close(distribution.log_prob(params, action), torch_a.log_prob(action))
    torch.testing.assert_close(distribution.entropy(params), torch_a.entropy())
    torch.testing.assert_close(distribution.kl_divergence(params, other), reference.kl_divergence(torch_a, torch_b))
    torch.testing.assert_close(distribution.probabilities(params), torch_a.probs)
    assert distribution.q_values(params) is logits
    assert torch.equal(distribution.sample(params, deterministic=True), logits.argmax(-1))


@pytest.mark.parametrize("action", [ActionSpec("move", "int", (), num_actions=3), INT], ids=["scalar", "shaped"])
def test_categorical_samples_are_the_gumbel_max_of_the_generator_s_uniforms(action):
    """A sample is argmax(logits - log(-log U)) of the uniforms U the global generator draws next, index for index
    (ties and -inf logits included): a seeded run acts as it did when the sample was computed that way."""
    distribution = build(action)
    (logits,) = params_of(distribution, batch=512)
    assert logits.shape == (512, *action.shape, action.num_values)
    logits[::3, ..., 1] = logits[::3, ..., 0]  # ties
    logits[::5, ..., 2] = -math.inf
    torch.manual_seed(7)
    samples = distribution.sample((logits,))
    torch.manual_seed(7)
    expected = (logits - torch.rand_like(logits).log_().neg_().log_()).argmax(dim=-1)
    assert torch.equal(samples, expected)
    assert (samples[::5] != 2).all()


def test_bernoulli_against_torch():
    distribution = build(BOOL)
    params, other = params_of(distribution, seed=0), params_of(distribution, seed=1)
    torch_a, torch_b = reference.Bernoulli(logits=params[0]), reference.Bernoulli(logits=other[0])
    action = distribution.sample(params)
    torch.testing.assert_close(distribution.log_prob(params, action), torch_a.log_prob(action.float()))
    torch.testing.assert_close(distribution.entropy(params), torch_a.entropy())
    torch.testing.assert_close(distribution.kl_divergence(params, other), reference.kl_divergence(torch_a, torch_b))
    assert torch.equal(distribution.sample(params, deterministic=True), torch_a.probs > 0.5)


def test_categorical_over_a_bool_action_is_a_two_logit_bernoulli():
    # values False, True at indices 0, 1: P(True) = sigmoid(logit_True - logit_False); samples are bools
    distribution = build(BOOL, "categorical")
    params, other = params_of(distribution, seed=0), params_of(distribution, seed=1)
    (logits,) = params
    assert logits.shape == (4, 2, 3, 2) and distribution.q_values(params) is logits
    difference = logits[..., 1] - logits[..., 0]
    torch_a = reference.Bernoulli(logits=difference)
    torch_b = reference.Bernoulli(logits=other[0][..., 1] - other[0][..., 0])
    for deterministic in (False, True):
        assert distribution.sample(params, deterministic).dtype == torch.bool
    action = distribution.sample(params)
    torch.testing.assert_close(distribution.log_prob(params, action), torch_a.log_prob(action.float()))
    torch.testing.assert_close(distribution.entropy(params), torch_a.entropy())
    torch.testing.assert_close(distribution.kl_divergence(params, other), reference.kl_divergence(torch_a, torch_b))
    torch.testing.assert_close(distribution.probabilities(params)[..., 1], torch_a.probs)
    assert torch.equal(distribution.sample(params, deterministic=True), difference > 0)
    torch.manual_seed(0)
    n = 20000
    drawn = distribution.sample((torch.log(torch.tensor([0.75, 0.25])).expand(n, 2),))
    assert drawn.shape == (n,) and abs(drawn.float().mean().item() - 0.25) < 0.015
    initial = build(BOOL, {"type": "categorical", "probabilities": [0.2, 0.8]})
    torch.testing.assert_close(initial.probabilities(initial(torch.zeros(1, 5)))[..., 1], torch.full((1, 2, 3), 0.8))


def test_gaussian_against_torch():
    distribution = build(FLOAT)
    params, other = params_of(distribution, seed=0), params_of(distribution, seed=1)
    (mean, log_std), (mean_b, log_std_b) = params, other
    torch_a, torch_b = reference.Normal(mean, log_std.exp()), reference.Normal(mean_b, log_std_b.exp())
    action = distribution.sample(params)
    torch.testing.assert_close(distribution.log_prob(params, action), torch_a.log_prob(action))
    torch.testing.assert_close(distribution.entropy(params), torch_a.entropy())
    torch.testing.assert_close(distribution.kl_divergence(params, other), reference.kl_divergence(torch_a, torch_b))
    assert torch.equal(distribution.sample(params, deterministic=True), mean)


def test_beta_against_torch_on_the_unit_interval():
    distribution = build(BOUNDED)
    params, other = params_of(distribution, seed=0), params_of(distribution, seed=1)
    (alpha, beta), (alpha_b, beta_b) = params, other
    assert (alpha >= 1).all() and (beta >= 1).all()
    torch_a, torch_b = reference.Beta(alpha, beta), reference.Beta(alpha_b, beta_b)
    action = distribution.sample(params)
    unit = (action + 2.0) / 5.0
    torch.testing.assert_close(distribution.log_prob(params, action), torch_a.log_prob(unit))
    torch.testing.assert_close(distribution.entropy(params), torch_a.entropy())
    torch.testing.assert_close(distribution.kl_divergence(params, other), reference.kl_divergence(torch_a, torch_b))
    torch.testing.assert_close(distribution.sample(params, deterministic=True), -2.0 + 5.0 * alpha / (alpha + beta))
    # a sample on a bound still has a finite log-probability
    assert torch.isfinite(distribution.log_prob(params, torch.full_like(action, 3.0))).all()


def test_kl_of_a_distribution_with_itself_is_zero():
    for action in (BOOL, INT, FLOAT, BOUNDED):
        distribution = build(action)
        params = params_of(distribution)
        torch.testing.assert_close(distribution.kl_divergence(params, params), torch.zeros(4, 2, 3), atol=1e-5, rtol=0)


def test_sample_frequencies_match_the_distribution():
    torch.manual_seed(0)
    n = 20000
    categorical = build(ActionSpec("a", "int", (), num_actions=3))
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]])).expand(n, 3)
    counts = torch.bincount(categorical.sample((logits,)), minlength=3) / n
    torch.testing.assert_close(counts, torch.tensor([0.2, 0.5, 0.3]), atol=0.015, rtol=0)
    bernoulli = build(ActionSpec("b", "bool"))
    assert abs(bernoulli.sample((torch.full((n,), math.log(0.25 / 0.75)),)).float().mean().item() - 0.25) < 0.015
    beta = build(ActionSpec("c", "float", (), min_value=0.0, max_value=1.0))
    alpha, b = torch.full((n,), 2.0), torch.full((n,), 5.0)
    sample = beta.sample((alpha, b))
    assert abs(sample.mean().item() - 2 / 7) < 0.01
    assert abs(sample.var().item() - 2 * 5 / (7**2 * 8)) < 0.002


def test_standard_gamma_moments():
    torch.manual_seed(1)
    concentration = torch.tensor([1.0, 1.5, 7.0]).repeat(20000, 1)
    samples = standard_gamma(concentration)
    torch.testing.assert_close(samples.mean(0), torch.tensor([1.0, 1.5, 7.0]), atol=0.06, rtol=0)
    torch.testing.assert_close(samples.var(0), torch.tensor([1.0, 1.5, 7.0]), atol=0.0, rtol=0.06)


def test_bounded_samples_stay_in_bounds():
    torch.manual_seed(2)
    beta = build(BOUNDED)
    alpha, b = torch.tensor([1.0, 1.0, 50.0, 1.0]), torch.tensor([1.0, 50.0, 1.0, 1000.0])
    samples = torch.stack([beta.sample((alpha, b)) for _ in range(500)])
    assert samples.min() >= -2.0 and samples.max() <= 3.0
    gaussian = build(BOUNDED, "gaussian")
    mean, log_std = torch.zeros(1000, 2, 3), torch.full((1000, 2, 3), 2.0)
    samples = gaussian.sample((mean, log_std))
    assert samples.min() == -2.0 and samples.max() == 3.0
    assert torch.equal(gaussian.sample((mean + 10.0, log_std), deterministic=True), torch.full((1000, 2, 3), 3.0))


def test_sampling_uses_the_global_torch_rng():
    distribution = build(INT)
    params = params_of(distribution, batch=64)
    torch.manual_seed(7)
    first = distribution.sample(params)
    torch.manual_seed(7)
    assert torch.equal(distribution.sample(params), first)


def test_gaussian_log_std_is_state_dependent_and_clipped():
    distribution = build(FLOAT, {"type": "gaussian", "mean": 1.5, "log_stddev": -0.5})
    _, log_std = distribution(torch.randn(3, 5))
    assert not torch.allclose(log_std[0], log_std[1])  # a Linear head, not a free parameter
    with torch.no_grad():
        distribution.log_stddev.bias.fill_(100.0)
    _, log_std = distribution(torch.zeros(1, 5))
    assert torch.equal(log_std, torch.full((1, 2, 3), LOG_STD_BOUND))
    assert abs(LOG_STD_BOUND - 13.8155) < 1e-4


def test_gaussian_with_a_state_independent_log_std():
    distribution = build(FLOAT, {"type": "gaussian", "log_stddev": -2.0, "state_dependent_std": False})
    assert dict(distribution.named_parameters())["log_stddev"].shape == (6,)  # one per element, SB3's log_std_init
    mean, log_std = distribution(torch.randn(3, 5))
    assert torch.equal(log_std, torch.full((3, 2, 3), -2.0)) and not torch.allclose(mean[0], mean[1])
    # it learns: the entropy's gradient reaches the parameter
    distribution.entropy((mean, log_std)).sum().backward()
    assert torch.equal(distribution.log_stddev.grad, torch.full((6,), 3.0))
    with torch.no_grad():
        distribution.log_stddev.fill_(-100.0)
    assert torch.equal(distribution(torch.zeros(1, 5))[1], torch.full((1, 2, 3), -LOG_STD_BOUND))
    scalar = build(ActionSpec("x", "float", ()), {"type": "gaussian", "state_dependent_std": False})
    assert torch.equal(scalar(torch.zeros(2, 5))[1], torch.zeros(2))
    with pytest.raises(SpecError, match="state_dependent_std"):
        build(FLOAT, {"type": "gaussian", "state_dependent_std": "no"})


def test_2018_kwargs_are_initial_biases():
    embedding = torch.zeros(1, 5)  # zero input: the outputs are the biases
    categorical = build(
        ActionSpec("a", "int", (2,), num_actions=3), {"type": "categorical", "probabilities": [0.1, 0.6, 0.3]}
    )
    torch.testing.assert_close(categorical.probabilities(categorical(embedding)), torch.tensor([[[0.1, 0.6, 0.3]] * 2]))
    bernoulli = build(BOOL, {"type": "bernoulli", "probability": 0.8})
    torch.testing.assert_close(bernoulli.probabilities(bernoulli(embedding)), torch.full((1, 2, 3), 0.8))
    mean, log_std = build(FLOAT, {"type": "gaussian", "mean": 1.5, "log_stddev": -0.5})(embedding)
    assert torch.equal(mean, torch.full((1, 2, 3), 1.5)) and torch.equal(log_std, torch.full((1, 2, 3), -0.5))
    alpha, beta = build(BOUNDED, {"type": "beta", "alpha": 0.0, "beta": 2.0})(embedding)
    torch.testing.assert_close(alpha, torch.full((1, 2, 3), math.log(2.0) + 1.0))
    torch.testing.assert_close(beta, torch.full((1, 2, 3), math.log1p(math.exp(2.0)) + 1.0))


@pytest.mark.parametrize(
    ("action", "spec", "heads"),
    [
        (INT, {"type": "categorical"}, ("logits",)),
        (BOOL, {"type": "bernoulli"}, ("logit",)),
        (FLOAT, {"type": "gaussian"}, ("mean", "log_stddev")),
        (BOUNDED, {"type": "beta"}, ("alpha", "beta")),
        (FLOAT, {"type": "deterministic"}, ("mean",)),
    ],
)
def test_weights_initialize_every_linear_map_of_a_head(action, spec, heads):
    torch.manual_seed(0)
    head = build(action, {**spec, "weights": {"name": "orthogonal", "gain": 0.01}}, input_size=64)
    for name in heads:
        weight = getattr(head, name).weight
        rows = weight @ weight.T  # [out, 64] with orthonormal rows times 0.01
        torch.testing.assert_close(rows, 1e-4 * torch.eye(weight.shape[0]), atol=1e-7, rtol=0)
    constant = build(action, {**spec, "weights": 0.25})
    assert all(getattr(constant, name).weight.eq(0.25).all() for name in heads)
    torch.manual_seed(0)
    default = build(action, spec, input_size=64)
    torch.manual_seed(0)
    nothing = build(action, {**spec, "weights": None}, input_size=64)
    bound = 1.0 / math.sqrt(64)  # torch's nn.Linear default: U(-1/sqrt(in), 1/sqrt(in))
    for name in heads:
        weight = getattr(default, name).weight
        assert weight.abs().max() <= bound and weight.std() > 0.5 * bound / math.sqrt(3)
        assert torch.equal(weight, getattr(nothing, name).weight)


def test_a_near_zero_head_starts_near_uniform():
    embedding = torch.randn(256, 512).relu() * 3.0
    spread = {}
    for weights in (None, {"name": "orthogonal", "gain": 0.01}):
        torch.manual_seed(0)
        head = build(ActionSpec("a", "int", (), num_actions=4), {"type": "categorical", "weights": weights}, 512)
        spread[str(weights)] = head.probabilities(head(embedding)).max(-1).values.mean().item()
    assert spread[str({"name": "orthogonal", "gain": 0.01})] == pytest.approx(0.25, abs=0.01)
    assert spread["None"] > 0.4  # torch's default leaves logits a unit or so apart on such an embedding


def test_log_prob_has_gradients():
    distribution = build(BOUNDED)
    params = distribution(torch.randn(4, 5))
    distribution.log_prob(params, distribution.sample(params)).sum().backward()
    assert distribution.alpha.weight.grad is not None and distribution.beta.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("action", "spec", "message"),
    [
        (
            FLOAT,
            "categorical",
            "distributions.force.type: a categorical distribution cannot model float action 'force'",
        ),
        (INT, {"type": "gaussian"}, "distributions.move.type: a gaussian distribution cannot model int action"),
        (FLOAT, "beta", "distributions.force.type: a beta distribution needs a bounded action"),
        (
            FLOAT,
            "gausian",
            'unknown distribution "gausian".\n  Known: bernoulli, beta, categorical, deterministic, gaussian. '
            "Did you mean",
        ),
        (INT, {"type": "categorical", "probs": [0.5]}, "distributions.move.probs: unknown argument"),
        (INT, {"type": "categorical", "probabilities": [0.5, 0.5]}, "needs one probability per action value (4)"),
        (INT, {"type": "categorical", "probabilities": [0.5, 0.5, 0.5, 0.5]}, "must be positive and sum to 1"),
        (INT, {"type": "categorical", "probabilities": [1.0, 0.0, 0.0, 0.0]}, "must be positive and sum to 1"),
        (BOOL, {"type": "bernoulli", "probability": 1.5}, "distributions.press.probability: out of range"),
        (BOOL, {"type": "bernoulli", "probability": 1.0}, "must be strictly between 0 and 1"),
        (FLOAT, {"type": "gaussian", "log_stddev": 20}, "distributions.force.log_stddev: out of range"),
        (INT, {"type": "categorical", "weights": "orthogonall"}, "distributions.move.weights.name: "),
        (FLOAT, {"type": "gaussian", "weights": {"name": "orthogonal", "gain": -1}}, "weights.gain: out of range"),
        (FLOAT, {"type": "gaussian", "weights": {"name": "orthogonal", "slope": 1}}, "weights.slope: unknown key"),
    ],
)
def test_spec_errors(action, spec, message):
    with pytest.raises(SpecError) as error:
        build(action, spec)
    assert message in str(error.value)


def test_standard_gamma_passes_non_finite_concentrations_through():
    samples = standard_gamma(torch.tensor([float("nan"), float("inf"), 2.0]))
    assert samples[0].isnan() and samples[1].isinf() and samples[2].isfinite()


def test_a_bounded_gaussian_gives_an_action_at_a_bound_the_mass_of_the_tail_it_was_clipped_from():
    action = ActionSpec("force", "float", (3,), min_value=-1.0, max_value=1.0)
    gaussian = build(action, {"type": "gaussian"}, 4)
    mean = torch.tensor([[0.5, 3.0, -0.2]], requires_grad=True)
    log_std = torch.full((1, 3), math.log(0.1))
    taken = torch.tensor([[1.0, 1.0, -1.0]])  # the first two at the upper bound, the third at the lower
    got = gaussian.log_prob((mean, log_std), taken)
    from scipy.stats import norm

    normal = reference.Normal(mean.detach(), 0.1)
    expected = [
        norm.logsf(1.0, loc=0.5, scale=0.1),  # P(x >= 1) for mean 0.5
        norm.logsf(1.0, loc=3.0, scale=0.1),  # mean 3, far past the bound: almost 1
        norm.logcdf(-1.0, loc=-0.2, scale=0.1),  # P(x <= -1) for mean -0.2
    ]
    assert got.detach()[0].tolist() == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert got[0, 1].item() == pytest.approx(0.0, abs=1e-6)
    # the unclipped density there would be -196: its likelihood ratios overflow float32 after small mean changes
    inside = torch.tensor([[0.3, 0.9, 0.0]])
    density = normal.log_prob(inside)
    within = gaussian.log_prob((mean, log_std), inside).detach()[0].tolist()
    assert within == pytest.approx(density[0].tolist(), rel=1e-5)
    got.sum().backward()
    assert torch.isfinite(mean.grad).all() and mean.grad[0, 1].abs().item() < 1e-6
    unbounded = build(ActionSpec("force", "float", (3,)), {"type": "gaussian"}, 4)
    assert unbounded.log_prob((mean, log_std), taken).detach()[0, 1].item() == pytest.approx(
        reference.Normal(3.0, 0.1).log_prob(torch.tensor(1.0)).item(), rel=1e-5
    )
