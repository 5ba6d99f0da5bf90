"""A sweep trial's runs, as its driver and the sweep's commands handle them: which of them still exist, whether they
have all ended, how far they got, stopping them; and whether a trial spends the sweep's budget, or, cut off, is
interrupted and its parameters queued to run again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torchforce.client.errors import ClientError
from torchforce.client.experiment import Experiment
from torchforce.client.experiment_state import ENDED
from torchforce.client.project import Project
from torchforce.client.report import read_episodes
from torchforce.client.sweep_space import optuna_module
from torchforce.spec import SpecError


def counts_toward_budget(trial: Any) -> bool:
    """Completed, pruned and failed trials spend the budget; interrupted ones do not (they run again)."""
    name = trial.state.name
    return name in ("COMPLETE", "PRUNED") or (name == "FAIL" and not trial.user_attrs.get("interrupted"))


def interrupt(study: Any, trial: Any, reason: str) -> None:
    """Fail a trial that was cut off (``reason``: stopped, lost) and queue its parameters to run again."""
    optuna = optuna_module()
    live = optuna.trial.Trial(study, trial._trial_id)
    live.set_user_attr("interrupted", reason)
    study.tell(live, state=optuna.trial.TrialState.FAIL)
    study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})


def stop_runs(runs: Sequence[Experiment], log: Any) -> None:
    """Stop the runs that are going (each checkpoints first); runs not started yet, or still queued, are deleted."""
    for run in runs:
        try:
            status = run.record().status
            if status not in ("new", *ENDED):
                status = run.stop(no_download=True).status  # a queued run leaves the queue: new again
            if status == "new":
                run.delete()
        except ClientError as error:
            log(f"could not stop {run.name}: {error}")


def timesteps_done(run: Experiment) -> int:
    """How many timesteps a run has done: its progress file's count, or its last finished episode's if that is
    further (the progress file is rewritten about once a second)."""
    counted = run.progress().get("timesteps")
    episodes = read_episodes(run.episode_log())
    last = int(episodes[-1]["timesteps"]) if episodes else 0
    return max(last, counted if isinstance(counted, int) and not isinstance(counted, bool) else 0)


def all_ended(runs: Sequence[Experiment], statuses: Sequence[str] = ENDED) -> bool:
    """Whether every one of ``runs`` has one of ``statuses`` (by default: has ended); False where one was deleted."""
    try:
        return all(run.record().status in statuses for run in runs)
    except ClientError:
        return False


def existing_runs(project: Project, names: Sequence[str]) -> list[Experiment]:
    runs = []
    for name in names:
        try:
            runs.append(Experiment.load(project, name))
        except (ClientError, SpecError):
            continue
    return runs
