"""Explorations: schedules at chosen timesteps, how each applies to int/bool/float actions, per-action specs."""

import copy
import warnings

import numpy as np
import pytest

from torchforce.core.explorations import (
    EXPLORATIONS,
    Constant,
    EpsilonAnneal,
    EpsilonDecay,
    Exploration,
    GaussianNoise,
    OrnsteinUhlenbeck,
    build_explorations,
    explore,
)
from torchforce.spec import ActionSpec, SpecError, SpecWarning

INT = ActionSpec("move", "int", (3,), num_actions=5)
BOOL = ActionSpec("jump", "bool", ())
FLOAT = ActionSpec("force", "float", (2,))
BOUNDED = ActionSpec("steer", "float", (), min_value=-1.0, max_value=1.0)


def test_registry_names_and_linear_decay_alias():
    assert EXPLORATIONS.names() == [
        "constant",
        "epsilon_anneal",
        "epsilon_decay",
        "gaussian_noise",
        "ornstein_uhlenbeck",
    ]
    exploration = build_explorations({"type": "linear_decay", "timesteps": 10}, {"move": INT})["move"]
    assert type(exploration) is EpsilonAnneal


def test_epsilon_anneal_schedule():
    anneal = EpsilonAnneal(initial_epsilon=1.0, final_epsilon=0.2, timesteps=100, start_timestep=50)
    expected = {0: 1.0, 50: 1.0, 75: 0.8, 100: 0.6, 150: 0.2, 10_000: 0.2}
    assert {t: anneal.epsilon(t) for t in expected} == pytest.approx(expected)
    defaults = EpsilonAnneal()
    assert (defaults.initial_epsilon, defaults.final_epsilon, defaults.timesteps, defaults.start_timestep) == (
        1.0,
        0.1,
        10000,
        0,
    )


def test_epsilon_decay_schedule_is_continuous_at_the_horizon():
    decay = EpsilonDecay(initial_epsilon=1.0, final_epsilon=0.1, timesteps=1000, start_timestep=100, half_lives=10)
    # final + 2^(-(t - start) / (timesteps / half_lives)) * (initial - final), half-life 100 steps
    assert decay.epsilon(0) == 1.0
    assert decay.epsilon(100) == pytest.approx(1.0)
    assert decay.epsilon(200) == pytest.approx(0.1 + 0.5 * 0.9)
    assert decay.epsilon(400) == pytest.approx(0.1 + 0.125 * 0.9)
    at_horizon = 0.1 + 2.0**-10 * 0.9
    assert decay.epsilon(1100) == pytest.approx(at_horizon)  # 2018 jumped to 0.1 here
    assert 0.1 < decay.epsilon(1101) < at_horizon
    assert decay.epsilon(100_000) == pytest.approx(0.1)


def test_constant():
    assert Constant().epsilon(5) == 0.0
    assert Constant(constant=0.3).epsilon(10**9) == 0.3


def test_explore_int_replaces_elements_with_probability_epsilon():
    rng = np.random.default_rng(0)
    values = np.zeros((4000, 3), dtype=np.int64)
    explored = explore(INT, values, Constant(constant=0.5), timestep=0, rng=rng)
    assert explored.dtype == np.int64 and explored.shape == (4000, 3)
    assert values.sum() == 0  # the input is left alone
    # each element is replaced with prob 0.5 by a uniform action in 0..4 (so stays 0 with prob 0.5 + 0.1)
    assert abs((explored != 0).mean() - 0.4) < 0.02
    assert set(np.unique(explored)) == {0, 1, 2, 3, 4}
    # replacements are per element, not per row
    assert 0 < ((explored != 0).sum(axis=1) == 1).mean() < 1


def test_explore_bool_flips_coins_per_element():
    rng = np.random.default_rng(1)
    values = np.zeros(4000, dtype=bool)
    explored = explore(BOOL, values, Constant(constant=0.5), timestep=0, rng=rng)
    assert explored.dtype == np.bool_
    assert abs(explored.mean() - 0.25) < 0.02


def test_explore_bounded_float_with_epsilon_draws_uniform_values():
    rng = np.random.default_rng(2)
    values = np.full(4000, 0.5, dtype=np.float32)
    explored = explore(BOUNDED, values, Constant(constant=0.25), timestep=0, rng=rng)
    assert explored.dtype == np.float32
    replaced = explored != np.float32(0.5)
    assert abs(replaced.mean() - 0.25) < 0.02
    assert explored.min() >= -1.0 and explored.max() <= 1.0 and explored[replaced].min() < -0.9


def test_explore_follows_the_schedule_and_epsilon_zero_is_identity():
    rng = np.random.default_rng(3)
    anneal = EpsilonAnneal(initial_epsilon=1.0, final_epsilon=0.0, timesteps=10)
    values = np.zeros((2000, 3), dtype=np.int64)
    assert (explore(INT, values, anneal, timestep=0, rng=rng) != 0).mean() == pytest.approx(0.8, abs=0.02)
    assert np.array_equal(explore(INT, values, anneal, timestep=10, rng=rng), values)


def test_gaussian_noise_is_added_and_clipped():
    rng = np.random.default_rng(4)
    values = np.zeros((20000, 2), dtype=np.float32)
    explored = explore(FLOAT, values, GaussianNoise(sigma=0.5, mu=1.0), timestep=0, rng=rng)
    assert explored.dtype == np.float32 and explored.shape == (20000, 2)
    assert abs(explored.mean() - 1.0) < 0.02 and abs(explored.std() - 0.5) < 0.02
    clipped = explore(BOUNDED, np.zeros(20000, np.float32), GaussianNoise(sigma=2.0), timestep=0, rng=rng)
    assert clipped.min() == -1.0 and clipped.max() == 1.0


def test_noise_sigma_may_be_a_schedule_of_the_timestep():
    narrowing = {"type": "linear", "initial": 0.4, "final": 0.1, "timesteps": 1000}
    gaussian = GaussianNoise(sigma=narrowing)
    for timestep, sigma in ((0, 0.4), (500, 0.25), (1000, 0.1), (5000, 0.1)):
        explored = explore(
            FLOAT, np.zeros((20000, 2), np.float32), gaussian, timestep=timestep, rng=np.random.default_rng(1)
        )
        assert abs(explored.std() - sigma) < 0.01 * sigma / 0.1, (timestep, explored.std())
    # the same draws as a constant sigma, scaled: the schedule only changes the scale
    constant = explore(
        FLOAT, np.zeros((5, 2), np.float32), GaussianNoise(sigma=0.25), timestep=0, rng=np.random.default_rng(2)
    )
    scheduled = explore(FLOAT, np.zeros((5, 2), np.float32), gaussian, timestep=500, rng=np.random.default_rng(2))
    np.testing.assert_allclose(scheduled, constant, rtol=1e-6)
    # Ornstein-Uhlenbeck: x <- x + theta (mu - x) + sigma(t) N(0, 1), from x = mu
    process = OrnsteinUhlenbeck(sigma=narrowing, theta=0.0)
    first = process.noise((1, 1), np.random.default_rng(3), 0)
    second = process.noise((1, 1), np.random.default_rng(3), 1000)
    draw = np.random.default_rng(3).standard_normal((1, 1))
    np.testing.assert_allclose(first, 0.4 * draw)
    np.testing.assert_allclose(second, 0.5 * draw)  # 0.4 draw + 0.1 draw


def test_ornstein_uhlenbeck_process_and_per_row_reset():
    noise = OrnsteinUhlenbeck(sigma=0.0, mu=1.0, theta=0.5)
    rng = np.random.default_rng(5)
    # sigma 0: x moves halfway to mu each step from x = mu, so it stays at mu
    assert np.array_equal(noise.noise((2, 2), rng), np.ones((2, 2)))
    noise.state = np.array([[3.0, 3.0], [5.0, 5.0]])
    np.testing.assert_allclose(noise.noise((2, 2), rng), [[2.0, 2.0], [3.0, 3.0]])  # x + 0.5 * (1 - x)
    noise.reset([1])
    np.testing.assert_allclose(noise.state, [[2.0, 2.0], [1.0, 1.0]])
    np.testing.assert_allclose(noise.noise((2, 2), rng), [[1.5, 1.5], [1.0, 1.0]])
    noise.reset()
    assert noise.state is None


def test_ornstein_uhlenbeck_is_correlated_and_state_dict_round_trips():
    noise = OrnsteinUhlenbeck(sigma=0.3, mu=0.0, theta=0.15)
    rng = np.random.default_rng(6)
    samples = np.stack([noise.noise((1, 2), rng) for _ in range(3000)])[:, 0, 0]
    assert np.corrcoef(samples[:-1], samples[1:])[0, 1] > 0.7
    saved = copy.deepcopy(noise.state_dict())
    restored = OrnsteinUhlenbeck(sigma=0.3, mu=0.0, theta=0.15)
    restored.load_state_dict(saved)
    assert np.array_equal(
        restored.noise((1, 2), np.random.default_rng(7)), noise.noise((1, 2), np.random.default_rng(7))
    )
    empty = OrnsteinUhlenbeck()
    empty.load_state_dict(OrnsteinUhlenbeck().state_dict())
    assert empty.state is None


def test_build_none_shared_and_per_action_forms():
    actions = {"force": FLOAT, "move": INT}
    assert build_explorations(None, actions) == {}
    per_action = build_explorations(
        {"move": {"type": "epsilon_anneal", "initial_epsilon": 0.5}, "force": None}, actions
    )
    assert list(per_action) == ["move"] and per_action["move"].initial_epsilon == 0.5
    shared = build_explorations("ornstein_uhlenbeck", {"a": FLOAT, "b": BOUNDED})
    assert set(shared) == {"a", "b"} and shared["a"] is not shared["b"]  # each action keeps its own process
    ready = OrnsteinUhlenbeck()
    shared = build_explorations(ready, {"a": FLOAT, "b": BOUNDED})
    assert shared["a"] is not ready and shared["a"] is not shared["b"]


def test_per_action_exploration_applies_only_to_the_named_action():
    actions = {"move": INT, "other": ActionSpec("other", "int", (3,), num_actions=5)}
    explorations = build_explorations({"move": {"type": "constant", "constant": 1.0}}, actions)
    rng = np.random.default_rng(8)
    greedy = {name: np.zeros((500, 3), dtype=np.int64) for name in actions}
    acted = {
        name: explore(actions[name], values, explorations[name], timestep=0, rng=rng)
        if name in explorations
        else values
        for name, values in greedy.items()
    }
    assert (acted["move"] != 0).mean() > 0.7
    assert (acted["other"] == 0).all()


def test_shared_spec_skips_actions_it_does_not_fit_with_a_warning():
    actions = {"force": FLOAT, "move": INT}
    with pytest.warns(
        SpecWarning, match="actions_exploration: gaussian_noise adds noise to float actions, and action 'move' is int"
    ) as caught:
        explorations = build_explorations({"type": "gaussian_noise"}, actions)
    assert caught[0].filename == __file__
    assert list(explorations) == ["force"]
    with pytest.warns(UserWarning, match="float action 'force' has no min_value/max_value"):
        assert list(build_explorations("epsilon_decay", actions)) == ["move"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(build_explorations("epsilon_decay", {"steer": BOUNDED})) == ["steer"]


def test_explore_cheap_path_for_one_row():
    rng = np.random.default_rng(9)
    exploration = EpsilonAnneal(initial_epsilon=0.1)
    values = np.array([2])
    out = explore(ActionSpec("a", "int", (), num_actions=4), values, exploration, timestep=5, rng=rng)
    assert out.shape == (1,) and out is not values


def test_explore_rejects_a_mismatched_pair():
    with pytest.raises(ValueError, match="adds noise to float actions"):
        explore(INT, np.zeros((1, 3), np.int64), GaussianNoise(), timestep=0, rng=np.random.default_rng())
    with pytest.raises(ValueError, match="needs bounds"):
        explore(FLOAT, np.zeros((1, 2), np.float32), Constant(constant=0.1), timestep=0, rng=np.random.default_rng())


class Boost(Exploration):
    """A user exploration by class path."""

    def __init__(self, *, value: float = 0.5) -> None:
        self.value = value

    def epsilon(self, timestep: int) -> float:
        return self.value


def test_user_class_by_path():
    exploration = build_explorations({"type": f"{__name__}:Boost", "value": 0.2}, {"move": INT})["move"]
    assert isinstance(exploration, Boost) and exploration.epsilon(0) == 0.2


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"mvoe": "constant"},
            "actions_exploration.mvoe: unknown action \"mvoe\".\n  Known: force, move, steer. Did you mean 'move'?",
        ),
        ({"type": "epsilon_anneel"}, 'actions_exploration.type: unknown exploration "epsilon_anneel"'),
        ({"type": "epsilon_anneal", "initial_eps": 0.5}, "actions_exploration.initial_eps: unknown argument"),
        ({"type": "epsilon_anneal", "timesteps": 0}, "actions_exploration.timesteps: out of range"),
        ({"type": "epsilon_anneal", "final_epsilon": 1.5}, "actions_exploration.final_epsilon: out of range"),
        ({"type": "epsilon_decay", "half_lives": 0}, "actions_exploration.half_lives: must be positive"),
        ({"type": "gaussian_noise", "sigma": -1}, "actions_exploration.sigma: out of range"),
        (
            {"type": "ornstein_uhlenbeck", "sigma": {"type": "linear", "initial": 0.3, "final": -0.1, "timesteps": 9}},
            "actions_exploration.sigma.final: out of range",
        ),
        (
            {"type": "gaussian_noise", "sigma": {"type": "linear", "initial": 0.3, "timesteps": 9}},
            "actions_exploration.sigma.final: missing",
        ),
        ({"type": "gaussian_noise", "sigma": "0.3"}, "actions_exploration.sigma: not a number or a schedule"),
        (
            {"move": "gaussian_noise"},
            "actions_exploration.move: gaussian_noise adds noise to float actions, and action 'move' is int",
        ),
        (
            {"force": "epsilon_anneal"},
            "actions_exploration.force: epsilon_anneal replaces actions by uniform random ones",
        ),
        ({"type": "gaussian_noise"}, None),
        (["constant"], "actions_exploration: a list is not an exploration spec"),
    ],
)
def test_spec_errors(spec, message):
    actions = {"force": FLOAT, "move": INT, "steer": BOUNDED}
    if message is None:  # a shared noise spec fits the float actions: fine
        with pytest.warns(UserWarning):
            build_explorations(spec, actions)
        return
    with pytest.raises(SpecError) as error:
        build_explorations(spec, actions)
    assert message in str(error.value)


def test_shared_spec_that_fits_no_action_is_an_error():
    with pytest.raises(SpecError, match="fits none of the actions"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_explorations("gaussian_noise", {"move": INT})


def test_ornstein_uhlenbeck_reset_of_rows_it_has_not_seen():
    noise = OrnsteinUhlenbeck(sigma=0.0, mu=0.5)
    noise.reset([3])  # no state yet: nothing to do
    noise.noise((2, 1), np.random.default_rng(0))
    noise.state[:] = 2.0
    noise.reset(np.array([False, True]))
    noise.reset([5])  # beyond the state: starts at mu when it first appears
    np.testing.assert_array_equal(noise.state, [[2.0], [0.5]])
