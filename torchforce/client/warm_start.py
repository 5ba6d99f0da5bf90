"""Warm starts: a new experiment whose agent begins from what another experiment's agent learned (rl-zoo3's
``--trained-agent``): ``experiment new ... --warm-start EXP[:CHECKPOINT]``, or the spec field
``"warm_start": {"experiment": "cp", "checkpoint": "best"}`` (``checkpoint``: ``latest``, the default, ``best`` or a
timestep).

When the experiment is created, the checkpoint is found in EXP's results on this machine (a run on a cluster:
after ``tfcli experiment download``), checked against the new agent (``Agent.warm_start`` on the agent the spec
builds: the same agent type, networks of the same shapes, preprocessing of the same kinds), and its agent file is
copied (what a warm start reads of it: no memory, no optimizers' state) into the new experiment's folder as
``warm_start.pt``, so that the experiment carries what it starts from
wherever it runs (a backend on a cluster uploads it with ``experiment.json``) and whatever EXP does later. The spec
records where it came from, with the checkpoint's timestep. The worker of a new run (not a resumed one, which has
checkpoints of its own) loads it into the agent before the first step: its networks' parameters and the run-wide
statistics of its state and reward preprocessing; counters, optimizers, memory and explorations start afresh.

Not for the distributed run mode yet: its Ray workers build their agents from the spec, and would begin with
their own fresh statistics and target networks beside the servers' warm-started parameters.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchforce.client.errors import ClientError
from torchforce.spec import SpecError, expect_dict

if TYPE_CHECKING:
    from torchforce.client.project import Project

FILE = "warm_start"  # its agent file in the experiment's folder, as Agent.warm_start names it
FILE_NAME = f"{FILE}.pt"
PATH = "experiment.warm_start"
KEYS = ("experiment", "checkpoint", "timesteps")
PARTS = ("agent", "modules", "preprocessing", "reward_preprocessing")  # what Agent.warm_start reads of a checkpoint


def parse_flag(text: str) -> dict[str, Any]:
    """``--warm-start EXP[:CHECKPOINT]`` as the spec field: ``cp``, ``cp:best``, ``cp:20000``."""
    name, _, which = text.partition(":")
    return {"experiment": name, "checkpoint": which or "latest"}


def check_form(spec: dict[str, Any]) -> None:
    """The field's form (nothing is read): an experiment's name, a checkpoint (``latest``, ``best`` or a timestep),
    and a run mode that can start warm. ``spec["warm_start"]`` is resolved in place (``checkpoint`` defaulted)."""
    from torchforce.client.evaluate import checkpoint_choice
    from torchforce.client.experiment_file import check_name

    if spec.get("warm_start") is None:
        return
    given = dict(expect_dict(spec["warm_start"], PATH))
    unknown = sorted(set(given) - set(KEYS))
    if unknown:
        raise SpecError(f"{PATH}.{unknown[0]}", "not a field of a warm start", expected=", ".join(KEYS))
    name = check_name(given.get("experiment"), f"{PATH}.experiment")
    if name == spec["name"]:
        raise SpecError(f"{PATH}.experiment", "an experiment cannot start from itself", got=name)
    which = given.get("checkpoint", "latest")
    try:
        which = checkpoint_choice(str(which)) if isinstance(which, (str, int)) and not isinstance(which, bool) else ""
    except ValueError:
        which = ""
    if not which:
        raise SpecError(
            f"{PATH}.checkpoint", "not a checkpoint", got=given.get("checkpoint"), expected="latest, best or a timestep"
        )
    timesteps = given.get("timesteps")
    if timesteps is not None and (not isinstance(timesteps, int) or isinstance(timesteps, bool) or timesteps < 0):
        raise SpecError(f"{PATH}.timesteps", "not a timestep", got=timesteps, expected="a whole number >= 0")
    if spec["run_mode"] == "distributed":
        raise SpecError(
            PATH,
            "a distributed run cannot start warm yet (its Ray workers would begin with fresh statistics and target "
            "networks beside the warm parameters)",
            hint="Start warm in the single or multi-threaded run mode.",
        )
    spec["warm_start"] = {
        "experiment": name,
        "checkpoint": which,
        **({"timesteps": timesteps} if timesteps is not None else {}),
    }


def source_file(project: Project, settings: dict[str, Any], which: str | None = None) -> tuple[Path, int]:
    """The agent file of the checkpoint ``which`` (default: the field's) of the warm start's experiment, in its
    results here, and the checkpoint's timestep; a SpecError at ``experiment.warm_start`` where there is none."""
    from torchforce.client.evaluate import find_checkpoint, model_file
    from torchforce.client.experiment import Experiment

    try:
        source = Experiment.load(project, settings["experiment"])
    except ClientError as error:
        raise SpecError(f"{PATH}.experiment", error.message, hint=error.hint) from None
    try:
        checkpoint = find_checkpoint(source, which or settings["checkpoint"])
        model = model_file(checkpoint.folder)
    except ClientError as error:  # (its hints name evaluate's --checkpoint: here it is the field's checkpoint)
        hint = (error.hint or "").replace("--checkpoint ", f"--warm-start {source.name}:")
        raise SpecError(f"{PATH}.checkpoint", error.message, hint=hint) from None
    return checkpoint.folder / (model if model.endswith(".pt") else f"{model}.pt"), checkpoint.timesteps


def check_fits(project: Project, spec: dict[str, Any], agent: Any) -> None:
    """``agent`` (built from ``spec``, not acted yet) started warm from the checkpoint ``spec["warm_start"]`` names:
    a SpecError at ``experiment.warm_start`` for a source that is not there or does not fit. The checkpoint's
    timestep is recorded in the field, which ``copy_into`` copies later (``latest`` may have moved on)."""
    settings = spec["warm_start"]
    pinned = settings.get("timesteps")  # a spec that was checked before names the checkpoint it was checked on
    file, timesteps = source_file(project, settings, None if pinned is None else str(pinned))
    try:
        agent.warm_start(file.parent, file.stem)
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise SpecError(
            PATH,
            f"the agent cannot start from the {settings['checkpoint']} checkpoint of '{settings['experiment']}' "
            f"(timestep {timesteps:,}): {error}",
            hint="A warm start needs the same agent type, networks of the same shapes and preprocessing of the same "
            "kinds.",
        ) from None
    settings["timesteps"] = timesteps


def copy_into(project: Project, settings: dict[str, Any], folder: Path) -> None:
    """What a warm start reads of the checkpoint the field names (at the timestep that was checked) into the
    experiment's ``folder`` (its staging folder, while it is created), as ``warm_start.pt``: its agent's kind, the
    networks and the preprocessing's state, without the memory and the optimizers' state (a DQN's replay memory is
    gigabytes), which are not even read (the file is mapped)."""
    import torch

    from torchforce.agents.checkpoint import FORMAT, load_checkpoint, pack

    file, _ = source_file(project, settings, str(settings["timesteps"]))
    try:
        payload = load_checkpoint(file, mapped=True)
        kept = {key: payload[key] for key in PARTS if key in payload}
        torch.save(pack({"format": FORMAT, **kept}), folder / FILE_NAME)
    except (OSError, ValueError) as error:
        raise SpecError(PATH, f"its checkpoint could not be copied: {error}", hint="Try again.") from None


def describe(settings: dict[str, Any]) -> str:
    """``cp, latest checkpoint (timestep 20,000)`` and the like, for ``experiment show``."""
    which = settings["checkpoint"]
    at = f" (timestep {settings['timesteps']:,})" if settings.get("timesteps") is not None else ""
    kind = f"{which} checkpoint" if re.fullmatch(r"[a-z]+", which) else "checkpoint"
    return f"{settings['experiment']}, {kind}{at}"
