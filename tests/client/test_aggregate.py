"""The statistics behind groups of runs (torchforce.client.aggregate) and the figures of runs and groups
(report.summarize, report.summarize_group), against values worked out here by hand or by other code."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from torchforce.client.aggregate import (
    Spread,
    aligned,
    bootstrap_band,
    bootstrap_interval,
    common_grid,
    first_crossing,
    interquartile_mean,
    monotone,
    overlapping,
    running_mean,
)
from torchforce.client.report import summarize, summarize_group


def log(returns: list[float], step: int = 10, seconds: float = 0.5) -> list[dict]:
    """Episode records: episode i (from 1) ends at timestep ``step * i`` and second ``seconds * i``."""
    return [
        {"episode": i, "timesteps": step * i, "return": float(value), "wall_time": seconds * i}
        for i, value in enumerate(returns, start=1)
    ]


def plain_running_mean(values: list[float], window: int) -> list[float]:
    return [sum(values[max(0, i + 1 - window) : i + 1]) / min(i + 1, window) for i in range(len(values))]


# ---------------------------------------------------------------------------------------------- smoothing


def test_the_running_mean_averages_the_last_window_values_and_fewer_at_the_start():
    assert running_mean(np.array([1.0, 2, 3, 4, 5]), 2).tolist() == [1.0, 1.5, 2.5, 3.5, 4.5]
    assert running_mean(np.array([1.0, 2, 3, 4, 5]), 100).tolist() == [1.0, 1.5, 2.0, 2.5, 3.0]
    values = np.random.default_rng(3).normal(size=250).tolist()
    assert running_mean(np.array(values), 20) == pytest.approx(plain_running_mean(values, 20))
    assert running_mean(np.array([]), 5).tolist() == []


def test_a_non_finite_value_spoils_only_the_windows_that_hold_it():
    # a cumulative sum would carry NaN (or inf - inf) into every later window
    values = [1.0, math.nan, 3.0, 5.0, 7.0, math.inf, 2.0, 4.0]
    means = running_mean(np.array(values), 2)
    assert np.isnan(means[1:3]).all() and means[0] == 1.0 and means[3:5].tolist() == [4.0, 6.0]
    assert np.isposinf(means[5:7]).all() and means[7] == 3.0
    assert overlapping([np.array([10.0, 20.0]), np.array([15.0, 40.0])]) == [0, 1]
    # a run that has just started (one episode, at step 15) before another's first episode (step 20): it is left out
    assert overlapping([np.array([20.0, 30.0, 200.0]), np.array([15.0]), np.array([10.0, 300.0])]) == [0, 2]


# ---------------------------------------------------------------------------------------------- IQM


def test_the_interquartile_mean_drops_a_quarter_at_each_end():
    assert interquartile_mean([8, 1, 7, 2, 6, 3, 5, 4]) == 4.5  # mean of 3, 4, 5, 6
    assert interquartile_mean([0, 0, 0, 100]) == 0.0  # the mean is 25: one lucky seed does not move the IQM
    assert interquartile_mean([1, 2, 3, 4, 100]) == 3.0  # 5 values: one dropped at each end
    assert interquartile_mean([1, 3]) == 2.0 and interquartile_mean([7]) == 7.0
    for size in range(1, 30):
        values = np.random.default_rng(size).normal(size=size)
        assert interquartile_mean(values) == pytest.approx(stats.trim_mean(values, 0.25))
    with pytest.raises(ValueError, match="no values"):
        interquartile_mean([])


# ---------------------------------------------------------------------------------------------- bootstrap


def test_identical_seeds_and_a_single_seed_have_an_interval_of_zero_width():
    assert bootstrap_interval([3.0, 3.0, 3.0, 3.0]) == (3.0, 3.0)
    assert bootstrap_interval([0.1, 0.1, 0.1]) == (0.1, 0.1)  # no rounding error lets it stray from the mean
    assert bootstrap_interval([42.0]) == (42.0, 42.0)


def test_the_interval_of_two_seeds_spans_them():
    # resampling 2 seeds: both the first (1/4), one of each (1/2), both the second (1/4): 2.5% and 97.5% are the ends
    assert bootstrap_interval([0.0, 10.0]) == (0.0, 10.0)


def test_the_interval_matches_the_exact_bootstrap_distribution():
    # [0, 0, 0, 100]: a resample's mean is 25 k, k ~ Binomial(4, 1/4) the draws of the 100. P(k = 0) = 32% puts the
    # 2.5% quantile at 0; P(k = 4) = 0.4% < 2.5% < P(k >= 3) = 5.1% puts the 97.5% quantile at k = 3: 75
    means = sorted(sum(pick) / 4 for pick in itertools.product([0, 0, 0, 100], repeat=4))
    assert (means[int(0.025 * len(means))], means[int(0.975 * len(means))]) == (0.0, 75.0)
    assert bootstrap_interval([0.0, 0.0, 0.0, 100.0]) == (0.0, 75.0)


def test_the_bootstrap_is_reproducible_and_seeded():
    values = np.random.default_rng(0).normal(size=7)
    assert bootstrap_interval(values) == bootstrap_interval(values)
    assert bootstrap_interval(values) != bootstrap_interval(values, seed=1)
    low, high = bootstrap_interval(values)
    assert low < values.mean() < high
    wider = bootstrap_interval(values, confidence=0.99)
    assert wider[0] < low and wider[1] > high


def test_the_band_resamples_whole_curves():
    mean, low, high = bootstrap_band(np.array([[0.0, 0.0, 1.0], [2.0, 4.0, 1.0]]))
    assert mean.tolist() == [1.0, 2.0, 1.0]
    assert low.tolist() == [0.0, 0.0, 1.0] and high.tolist() == [2.0, 4.0, 1.0]
    single, low, high = bootstrap_band(np.array([[5.0, 6.0]]))
    assert single.tolist() == low.tolist() == high.tolist() == [5.0, 6.0]


# ---------------------------------------------------------------------------------------------- curves on one grid


def test_curves_are_ordered_with_one_point_per_step():
    x, y = monotone(np.array([10, 0, 10, 20]), np.array([1.0, 0.0, 2.0, 3.0]))
    assert (x.tolist(), y.tolist()) == ([0.0, 10.0, 20.0], [0.0, 2.0, 3.0])  # the last of the equal ones


def test_the_grid_covers_what_every_run_has_reached():
    assert common_grid([np.array([0, 10]), np.array([5, 20])], points=6).tolist() == [5, 6, 7, 8, 9, 10]
    assert common_grid([np.array([0, 4]), np.array([5, 20])]).size == 0  # no common range
    assert common_grid([np.array([0, 4]), np.array([])]).size == 0


def test_a_held_grid_runs_on_to_the_last_end():
    assert common_grid([np.array([0, 10]), np.array([5, 20])], points=4, hold=True).tolist() == [5, 10, 15, 20]
    assert common_grid([np.array([0, 4]), np.array([5, 20])], points=4, hold=True).tolist() == [5, 10, 15, 20]
    assert common_grid([np.array([3]), np.array([7])], hold=True).tolist() == [7]  # one point each: the later
    assert common_grid([np.array([0, 4]), np.array([])], hold=True).size == 0


def test_curves_are_interpolated_onto_the_grid():
    grid, curves = aligned(
        [(np.array([0, 10, 20]), np.array([0.0, 1.0, 2.0])), (np.array([5, 15, 25]), np.array([1.0, 3.0, 5.0]))],
        points=3,
    )
    assert grid.tolist() == [5.0, 12.5, 20.0]
    assert curves.tolist() == [[0.5, 1.25, 2.0], [1.0, 2.5, 4.0]]
    # held: the first curve keeps its last value (2) past its end (20), up to the second's end (25)
    grid, curves = aligned(
        [(np.array([0, 10, 20]), np.array([0.0, 1.0, 2.0])), (np.array([5, 15, 25]), np.array([1.0, 3.0, 5.0]))],
        points=3,
        hold=True,
    )
    assert grid.tolist() == [5.0, 15.0, 25.0]
    assert curves.tolist() == [[0.5, 1.5, 2.0], [1.0, 3.0, 5.0]]


def test_the_first_crossing():
    assert first_crossing(np.array([1.0, 3.0, 2.0, 5.0]), 3.0) == 1
    assert first_crossing(np.array([1.0, 3.0, 2.0, 5.0]), 4.0) == 3
    assert first_crossing(np.array([1.0, 3.0]), 6.0) is None


def test_a_spread_is_the_median_and_the_range():
    assert Spread.of([300.0, 100.0, 200.0, 1000.0]) == Spread(250.0, 100.0, 1000.0)
    assert Spread.of([]) is None


# ---------------------------------------------------------------------------------------------- a run, a group


def test_threshold_steps_and_time_are_read_off_the_smoothed_log():
    returns = [0.0] * 5 + [10.0] * 5
    # smoothed over 5: the k-th 10 makes the mean 2 k; it reaches 6 at the third, episode 8: timestep 80, second 4
    summary = summarize("run", log(returns), threshold=6.0, window=5)
    assert (summary.timesteps_to_threshold, summary.seconds_to_threshold) == (80, 4.0)
    assert (summary.final_mean_return, summary.best_mean_return, summary.window) == (10.0, 10.0, 5)
    assert (summary.episodes, summary.timesteps, summary.seconds, summary.steps_per_second) == (10, 100, 5.0, 20.0)
    # smoothed over 100 (fewer at the start) the same log only reaches 5 by its end
    assert summarize("run", log(returns), threshold=6.0).timesteps_to_threshold is None
    assert summarize("run", log(returns)).final_mean_return == 5.0


def test_the_best_mean_is_over_whole_windows_and_timesteps_may_be_the_runs_own():
    returns = [9.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]  # a lucky first episode: 9 alone, 2.25 over the first four
    summary = summarize("run", log(returns), threshold=5.0, window=4)
    assert summary.best_mean_return == 2.25 and summary.final_mean_return == 0.75
    assert summary.timesteps_to_threshold is None  # 9 alone is no window of 4 that reached 5
    twins = summarize_group("g", {"g-s0": log(returns), "g-s1": log(returns)}, [0, 1], window=4)
    assert twins.best_mean_return == pytest.approx(2.25)  # the group's curve, of whole windows too
    assert summarize("run", log(returns[:3]), window=4).best_mean_return == 3.0  # fewer than a window: all of them
    assert summarize("run", log(returns)).timesteps == 70  # the last episode's end
    assert summarize("run", log(returns), timesteps=75).timesteps == 75  # the run's progress: steps past it
    assert summarize("run", [], timesteps=40).timesteps == 40
    group = summarize_group("g", {"g-s0": log(returns), "g-s1": []}, [0, 1], timesteps={"g-s0": 75, "g-s1": 5})
    assert [run.timesteps for run in group.runs] == [75, 5] and group.timesteps == 40.0
    # time and speed on the base of the count: the run's progress where given (they were the last episode's, beside
    # the run's whole count: 3,000 steps "in 11 s, 180 steps/s" where show said 18 s and 159)
    plain = summarize("run", log(returns))
    assert (plain.seconds, plain.steps_per_second) == (3.5, 20.0)  # the last episode's end: 70 steps in 3.5 s
    run = summarize("run", log(returns), timesteps=90, elapsed=6.0)
    assert (run.timesteps, run.seconds, run.steps_per_second) == (90, 6.0, 15.0)
    group = summarize_group("g", {"g-s0": log(returns)}, [0], timesteps={"g-s0": 90}, elapsed={"g-s0": 6.0})
    assert (group.seconds, group.steps_per_second) == (6.0, 15.0)


def expected_crossing(returns: list[float], window: int, threshold: float) -> int | None:
    """The episode (from 1) whose smoothed return first reaches ``threshold``, by plain Python."""
    smoothed = plain_running_mean(returns, window)
    return next((i + 1 for i, value in enumerate(smoothed) if value >= threshold), None)


def test_a_group_summary():
    ramps = {f"g-s{k}": [float(i + 15 * k) for i in range(60)] for k in range(4)}  # 0..59, 15..74, 30..89, 45..104
    ramps["g-s4"] = []  # not started yet: counted as a run, not in the figures
    logs = {name: log(returns) for name, returns in ramps.items()}
    group = summarize_group("g", logs, [0, 1, 2, 3, 4], threshold=60.0, window=10)
    finals = [sum(returns[-10:]) / 10 for returns in ramps.values() if returns]
    assert finals == [54.5, 69.5, 84.5, 99.5]
    assert group.final_mean_return == pytest.approx(77.0)
    assert group.final_iqm == pytest.approx(77.0)  # the middle two: (69.5 + 84.5) / 2
    assert (group.final_low, group.final_high) == bootstrap_interval(finals)
    assert group.final_low < 77.0 < group.final_high
    crossings = [expected_crossing(returns, 10, 60.0) for returns in ramps.values() if returns]
    assert crossings == [None, 51, 36, 21]
    assert group.reached == 3
    assert group.timesteps_to_threshold == Spread(360.0, 210.0, 510.0)
    assert group.seconds_to_threshold == Spread(18.0, 10.5, 25.5)
    # each run's curve (episode i at step 10 i, smoothed) averaged: the peak is the last point, the mean of finals
    assert group.best_mean_return == pytest.approx(77.0)
    assert (group.episodes, group.timesteps) == (48.0, 480.0)  # means per run, the empty one included
    assert [run.name for run in group.runs] == list(ramps) and group.to_dict()["kind"] == "group"


def test_a_group_s_best_reaches_its_final_mean_when_runs_end_at_different_steps():
    # 0..59 and 10..69, smoothed over 10: finals 54.5 and 64.5, their mean 59.5; the second run ends first (step
    # 540), where the first is at episode 54 (48.5): a mean curve that stopped there peaked at 56.5, below 59.5
    logs = {"g-s0": log([float(i) for i in range(60)]), "g-s1": log([float(i + 10) for i in range(60)], step=9)}
    group = summarize_group("g", logs, [0, 1], window=10)
    assert group.final_mean_return == 59.5
    assert group.best_mean_return == pytest.approx(59.5)
    # fewer episodes than the window (50 and 60 of 100): each run's curve is one point, at its end, and the two do
    # not overlap; the best is the mean of what they have, as the final mean is (24.5 and 29.5), not none
    logs = {"g-s0": log([float(i) for i in range(50)]), "g-s1": log([float(i) for i in range(60)], step=9)}
    group = summarize_group("g", logs, [0, 1], window=100)
    assert (group.final_mean_return, group.best_mean_return) == (27.0, 27.0)


def test_a_group_s_best_holds_a_run_that_ended_at_its_final_return():
    # smoothed over 1: g-s0 ends at step 20 with 10; g-s1 has 20 from step 30 to 40 and ends at 0 (step 50). Held at
    # 10, g-s0 makes the mean 15 from step 30 to 40: the peak, above the final mean (10 + 0) / 2
    logs = {"g-s0": log([0.0, 10.0]), "g-s1": log([0.0, 0.0, 20.0, 20.0, 0.0])}
    group = summarize_group("g", logs, [0, 1], window=1)
    assert (group.final_mean_return, group.best_mean_return) == (5.0, 15.0)


def test_a_group_s_best_is_never_below_its_final_mean_nor_missing():
    rng = np.random.default_rng(7)
    for _ in range(40):
        seeds = int(rng.integers(1, 11))  # 8 or more: numpy sums the final mean in another order than the curve's
        returns = [rng.normal(rng.normal(), 1.0, size=int(rng.integers(1, 80))).tolist() for _ in range(seeds)]
        logs = {f"g-s{k}": log(values, step=int(rng.integers(1, 20))) for k, values in enumerate(returns)}
        group = summarize_group("g", logs, list(range(seeds)), window=int(rng.integers(1, 30)))
        assert group.best_mean_return is not None and group.final_mean_return is not None
        assert group.best_mean_return >= group.final_mean_return


def test_one_seed_gives_no_interval():
    group = summarize_group("g", {"g-s0": log([35.0] * 20), "g-s1": [], "g-s2": []}, [0, 1, 2], window=10)
    assert (group.final_mean_return, group.final_iqm, group.best_mean_return) == (35.0, 35.0, 35.0)
    assert (group.final_low, group.final_high) == (None, None)
    two = summarize_group("g", {"g-s0": log([35.0] * 20), "g-s1": log([45.0] * 20)}, [0, 1], window=10)
    assert (two.final_low, two.final_high) == bootstrap_interval([35.0, 45.0]) == (35.0, 45.0)


def test_a_group_of_runs_without_episodes():
    group = summarize_group("g", {"g-s0": [], "g-s1": []}, [0, 1], threshold=5.0)
    assert (group.final_mean_return, group.final_iqm, group.best_mean_return, group.reached) == (None, None, None, 0)
    assert group.timesteps_to_threshold is None
