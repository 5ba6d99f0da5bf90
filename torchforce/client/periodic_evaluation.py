"""Evaluation during training (the experiment's ``evaluation`` field): when a round is due, its deterministic
episodes on an environment of its own, and what a checkpoint keeps of it. The worker's run
(``torchforce.client.experiment_run.ExperimentRun``) plays the rounds, logs them and keeps the best checkpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchforce.spec import parse_frequency

if TYPE_CHECKING:
    from torchforce.agents import Agent

EVALUATION_SEED_OFFSET = 100_000  # the evaluation environment's seed: the experiment's seed plus this


class PeriodicEvaluation:
    """Evaluation during training, the experiment's ``evaluation`` field: every ``frequency`` (in timesteps,
    episodes or seconds of the run, counted across resumes: due at each multiple of it), the agent plays
    ``episodes`` deterministic episodes on an environment of its own (``environment``, or the experiment's) and
    the worker logs them (``ExperimentRun.evaluate_if_due``).

    The agent acts with ``deterministic=True, independent=True``, which leaves its training episodes, memory,
    counters and random generators alone, and the state of its stateful preprocessing (which independent acting
    advances) is put back after each round: training goes on exactly as it would without evaluation. The
    environment is seeded with the experiment's seed plus ``EVALUATION_SEED_OFFSET`` before every round, so every
    round starts from the same states: rounds compare on equal terms, and a resumed run evaluates as an
    uninterrupted one (nothing of the evaluation environment needs saving). ``state_dict`` (in checkpoints) holds
    when the next round is due and the best round so far."""

    def __init__(
        self, settings: dict[str, Any], environment: Any, *, seed: int | None, max_timesteps: int | None
    ) -> None:
        from torchforce.environments import make

        self.frequency = parse_frequency(settings["frequency"], "experiment.evaluation.frequency")
        self.episodes = int(settings["episodes"])
        self.environment = make(environment)
        self.seed = None if seed is None else seed + EVALUATION_SEED_OFFSET
        self.max_timesteps = max_timesteps
        self.next: float = self.frequency.amount  # the count (of the frequency's unit) at which the next is due
        self.best: dict[str, Any] | None = None  # best.json's content: timesteps, mean_return, folder

    def due(self, counts: dict[str, float]) -> bool:
        return counts[self.frequency.unit] >= self.next

    def play(self, agent: Agent, counts: dict[str, float]) -> list[float]:
        """The returns of one round of episodes; the next round is due at the next multiple of the frequency."""
        from torchforce.execution.evaluation import evaluate

        amount = self.frequency.amount
        self.next = (counts[self.frequency.unit] // amount + 1) * amount
        if self.seed is not None:
            self.environment.seed(self.seed)
        # independent acting keeps episode state of its own (frames, per-episode statistics, noise) and applies
        # the run's statistics frozen: training goes on as it was (Agent.start_independent_episode)
        return evaluate(
            agent,
            self.environment,
            episodes=self.episodes,
            deterministic=True,
            max_episode_timesteps=self.max_timesteps,
        )

    def state_dict(self) -> dict[str, Any]:
        return {"next": self.next, "best": self.best}

    def load_state_dict(self, state: dict[str, Any] | None, counts: dict[str, float], best: dict | None) -> None:
        """Continue from a checkpoint's ``state`` (None: one written without evaluation: the next round is due at
        the next multiple of the frequency, and the best is ``best.json``'s, ``best``)."""
        if state is None:
            amount = self.frequency.amount
            self.next, self.best = (counts[self.frequency.unit] // amount + 1) * amount, best
        else:
            self.next, self.best = state["next"], state["best"]

    def close(self) -> None:
        self.environment.close()
