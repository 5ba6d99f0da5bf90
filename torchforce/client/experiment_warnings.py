"""Warnings about an experiment that is valid but unlikely to be what its author meant (SpecWarning, as
``torchforce.spec.warn_spec`` gives them): seeds that are never used, a worker timeout that kills busy workers, raw
Atari screens, an evaluation that never comes, a run that ends before the agent first learns. The experiment file's
checks (``torchforce.client.experiment_file``) give them once a spec has passed."""

from __future__ import annotations

from typing import Any

from torchforce.spec import parse_frequency, warn_spec

SHORT_WORKER_TIMEOUT = 60.0  # seconds: a worker_timeout below this is warned about


def warn_of_the_unlikely(spec: dict[str, Any]) -> None:
    """Each warning that the resolved experiment ``spec`` alone calls for (the agent's first update is
    ``warn_if_never_learning``'s, once the agent is built)."""
    _warn_if_never_evaluated(spec)
    _warn_if_raw_atari(spec)
    _warn_if_seeds_unused(spec)
    _warn_if_short_worker_timeout(spec)


def _warn_if_seeds_unused(spec: dict[str, Any]) -> None:
    """A SpecWarning for a seed in the agent or environment spec that differs from the experiment's: the worker
    seeds the agent and every environment copy from the experiment's ``seed`` (copy i: seed + i), so theirs is
    never used, and a sweep over it would run one seed."""
    for part in ("agent", "environment"):
        given = spec[part].get("seed") if isinstance(spec[part], dict) else None
        if given is not None and given != spec["seed"]:
            warn_spec(
                f"experiment.{part}.seed: {given!r} is not used: the runs of an experiment are seeded by its own "
                f"seed ({spec['seed']!r}; the agent with it, environment copy i with seed + i); set that one "
                "instead (experiment field seed, --seed, or --seeds for several)"
            )


def _warn_if_short_worker_timeout(spec: dict[str, Any]) -> None:
    """A SpecWarning for a distributed run's ``worker_timeout`` of less than a minute: a chunk that takes longer on a
    busy machine (a big update, a slow environment) gets its worker killed as hung, over and over."""
    timeout = spec["worker_timeout"]
    if spec["run_mode"] == "distributed" and timeout is not None and timeout < SHORT_WORKER_TIMEOUT:
        warn_spec(
            f"experiment.worker_timeout: {timeout:g} s is short: a Ray worker whose chunk of steps (its updates and "
            "parameter exchanges included) takes longer is taken for hung, killed and restarted, losing that chunk, "
            "and a worker killed again and again ends the run"
        )


def _warn_if_raw_atari(spec: dict[str, Any]) -> None:
    """A SpecWarning for an Atari game by its Gymnasium id: raw 210x160 colour screens, without the standard
    wrappers (frame skip, 84x84 grayscale, frame stack, no-op reset, episodic life) that the atari type applies."""
    environment = spec["environment"]
    gym_id = environment.get("gym_id") if environment.get("type") in ("gym", "openai_gym") else None
    if not isinstance(gym_id, str) or environment.get("obs_type", "rgb") != "rgb":  # RAM or grayscale: asked for
        return
    from torchforce.environments.names import atari_id

    ale = atari_id(gym_id) if gym_id.startswith("ALE/") or "NoFrameskip" in gym_id else None
    if ale is None:
        return
    game = ale.split("/", 1)[1].split("-v")[0]
    warn_spec(
        f"experiment.environment: '{gym_id}' gives raw 210x160 colour screens, without the standard Atari "
        f'wrappers; {{"type": "atari", "game": "{game}"}} applies them (frame skip 4, 84x84 grayscale, '
        "4 frames stacked, no-op reset, episodic life), as the shipped breakout and pong environments do"
    )


def _warn_if_never_evaluated(spec: dict[str, Any]) -> None:
    """A SpecWarning when evaluation comes every more timesteps (episodes) than the run has: it never evaluates."""
    if spec["evaluation"] is None:
        return
    frequency = parse_frequency(spec["evaluation"]["frequency"], "experiment.evaluation.frequency")
    budget = {"timesteps": spec["total_timesteps"], "episodes": spec["episodes"]}.get(frequency.unit)
    if budget is None:
        return
    # a run that ends with its last episode stops before that episode's evaluation is due
    never = frequency.amount >= budget if frequency.unit == "episodes" else frequency.amount > budget
    if never:
        key = "total_timesteps" if frequency.unit == "timesteps" else "episodes"
        warn_spec(
            f"experiment.evaluation.frequency: every {frequency.amount:,} {frequency.unit}, but the run ends at "
            f"{budget:,} ({key}): it never evaluates, and there will be no best checkpoint"
        )


def warn_if_never_learning(spec: dict[str, Any], agent: Any) -> None:
    """A SpecWarning when the run ends before the agent's first update: it updates once ``next_at`` timesteps are
    complete, and a step is complete at the next act (or at its episode's end), so the last step of each of the
    ``num_environments`` rows is not (Runner's step count)."""
    schedule, total = getattr(agent, "schedule", None), spec["total_timesteps"]
    if schedule is None or total is None or agent.update_mode.unit == "episodes":
        return
    rows = spec["num_environments"]
    if schedule.next_at <= total - rows:
        return
    warn_spec(
        f"experiment.total_timesteps: {total:,}, but the agent's first update needs {schedule.next_at:,} complete "
        f"timesteps (its update_mode: batch_size, first_update), and a step is complete only at the next one: the "
        f"run never learns; give it at least {schedule.next_at + rows:,}"
    )
