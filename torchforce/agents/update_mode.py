"""When an agent updates: the 2018 ``update_mode`` spec and a schedule that counts what has been stored.

2018 triggered on ``timestep % frequency == 0``; with many parallel environments the counters jump by the number
of rows, so the schedule keeps a "next update at" threshold instead and reports how many thresholds were crossed.
``updates`` (not in 0.4; 0.3.5's ``repeat_update``) makes each crossing that many updates, each on a batch of its
own: more than one update per timestep for off-policy agents (SB3's ``gradient_steps``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torchforce.spec import SpecError, did_you_mean, expect_choice, expect_dict, expect_int, warn_spec

UNITS = ("timesteps", "episodes", "sequences")
KEYS = ("unit", "batch_size", "frequency", "length", "first_update", "updates")
# how an agent that updates once per batch it collected learns more from each batch
TRAIN_LONGER = "with PPO's epochs or optimization_steps, or with a multi_step optimizer"
# 0.3.5 agent keys that belong to updating, found inside update_mode: what became of each in 0.4
# (docs/tensorforce-0.4.md, Keys of 0.3.5).
LEGACY_KEYS = {
    "update_frequency": ("'update_frequency' is the 0.3.5 name; use 'frequency'", None),
    "repeat_update": (
        "'repeat_update' is the 0.3.5 name; use 'updates' (each update on a batch of its own, as in 0.3.5)",
        "Agents learning from what they just collected (VPG, PPO, TRPO, DQN n-step) update once per batch: train "
        f"longer on it {TRAIN_LONGER}.",
    ),
    "keep_last_timestep": (
        "'keep_last_timestep' is a 0.3.5 key and is gone in 0.4",
        "Remove it: every stored timestep keeps its next state, so there is no last timestep to hold back.",
    ),
}
LEGACY_HINT = (
    "The shipped configs (torchforce/configs/agents/, copied into configs/agents/ by 'tfcli init') show the 0.4 format."
)


@dataclass(frozen=True)
class UpdateMode:
    unit: str
    batch_size: int
    frequency: int
    length: int = 8
    first_update: int = 0
    updates: int = 1

    @classmethod
    def from_spec(cls, spec: Any, default: dict[str, Any], path: str = "update_mode") -> UpdateMode:
        merged = dict(default if spec is None else expect_dict(spec, path))
        for key in merged:
            if key in LEGACY_KEYS:
                message, hint = LEGACY_KEYS[key]
                raise SpecError(f"{path}.{key}", message, hint=f"{hint} {LEGACY_HINT}" if hint else LEGACY_HINT)
            if key not in KEYS:
                guess = did_you_mean(key, KEYS)
                raise SpecError(f"{path}.{key}", "unknown key", hint=f"Did you mean '{guess}'?" if guess else None)
        if "batch_size" not in merged:
            raise SpecError(path, "needs 'batch_size'", got=merged)
        unit = expect_choice(merged.get("unit", default.get("unit")), f"{path}.unit", UNITS)
        batch_size = expect_int(merged["batch_size"], f"{path}.batch_size", minimum=1)
        frequency = expect_int(merged.get("frequency", batch_size), f"{path}.frequency", minimum=1)
        length = expect_int(merged.get("length", 8), f"{path}.length", minimum=1)
        first_update = expect_int(merged.get("first_update", 0), f"{path}.first_update", minimum=0)
        updates = expect_int(merged.get("updates", 1), f"{path}.updates", minimum=1)
        return cls(unit, batch_size, frequency, length, first_update, updates)

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "batch_size": self.batch_size,
            "frequency": self.frequency,
            "length": self.length,
            "first_update": self.first_update,
            "updates": self.updates,
        }


#: with episode updates, a capacity below this many timesteps per episode of a batch gets a warning
EPISODE_ROOM = 10


def check_capacity(mode: UpdateMode, capacity: int, *, on_policy: bool, path: str = "memory.capacity") -> None:
    """A memory too small for the updates is an error when the agent is built, not at its first update.

    - ``timesteps``: an update reads ``batch_size`` rows; ``sequences``: ``batch_size`` windows of ``length`` rows,
      which overlap (the newest start at consecutive rows), so ``batch_size + length - 1`` rows. Less is an error.
    - ``episodes``: an update reads ``batch_size`` complete episodes, of a length unknown here. Each has at least
      one timestep, so a capacity below ``batch_size`` is an error; below ``EPISODE_ROOM * batch_size`` (room for
      episodes of fewer than 10 timesteps on average; a bandit's one-step episodes fit) it is a warning, as longer
      episodes make every update fail. It also catches a capacity meant as a number of episodes.
    - On-policy agents write what they staged since the last update to the memory at once: with one environment,
      the first update's rows (``first_update`` or the batch, rounded up to a multiple of ``frequency``). A capacity
      below that is a warning, since with several environments each writes only its share.
    """
    unit, batch_size = mode.unit, mode.batch_size
    if unit == "episodes":
        reads = f"batch_size {batch_size} complete episodes, each at least one timestep"
        needed = batch_size
    elif unit == "sequences":
        reads = f"batch_size {batch_size} sequences of length {mode.length}, {batch_size} + {mode.length} - 1 rows"
        needed = batch_size + mode.length - 1
    else:
        reads = f"batch_size {batch_size} timesteps"
        needed = batch_size
    if capacity < needed:
        raise SpecError(
            path,
            f"too small for one update, which reads {reads} (update_mode unit '{unit}')",
            got=capacity,
            expected=f"at least {needed}",
            hint="Raise memory.capacity (it counts timesteps), or lower update_mode.batch_size.",
        )
    if unit == "episodes" and capacity < EPISODE_ROOM * batch_size:
        warn_spec(
            f"{path}: {capacity} timesteps hold the {batch_size} episodes an update reads (update_mode batch_size) "
            f"only while they average at most {capacity / batch_size:g} timesteps; with longer episodes every "
            "update fails. memory.capacity counts timesteps, not episodes."
        )
    staged = Schedule(mode).next_at
    if on_policy and unit != "episodes" and capacity < staged:
        warn_spec(
            f"{path}: an on-policy agent writes the {staged} timesteps of its first update (update_mode "
            f"batch_size/first_update, rounded up to frequency {mode.frequency}) to memory at once; with one "
            f"environment they do not fit in {capacity} and that update fails. Raise memory.capacity to {staged}."
        )


def check_rows(mode: UpdateMode, rows: int, *, on_policy: bool, path: str = "update_mode") -> None:
    """A warning when an on-policy agent acting on ``rows`` environments would not train on every row's steps
    alike. What it staged goes to memory one environment's segment after another, each cut at the update.

    - ``timesteps``: an update reads the newest ``batch_size`` rows of the memory: with more rows written than read
      (``frequency`` or the first update past ``batch_size``, or counts that step past a threshold by ``rows`` at a
      time), the first environments' steps are left out and the last ones' read twice. So ``batch_size``,
      ``frequency`` and the first update should be one multiple of ``rows``.
    - ``sequences``: an update reads the newest ``batch_size`` windows of ``length`` rows, and no window crosses a
      cut, so an environment's ``frequency / rows`` rows hold ``frequency / rows - length + 1`` windows. With more
      windows than ``batch_size`` the first environments' are left out; with fewer, windows of an earlier update
      are read again, the last environments' first (with segments shorter than ``length``, only those). So ``frequency``
      should be a multiple of ``rows``, ``batch_size`` the windows of all of them, ``frequency - rows * (length -
      1)``, and the first update at ``frequency``; an episode that ends within a segment still leaves it fewer
      windows."""
    if not on_policy or rows <= 1 or mode.unit == "episodes":
        return
    size, frequency, first = mode.batch_size, mode.frequency, Schedule(mode).next_at
    if mode.unit == "sequences":
        _check_sequence_rows(mode, rows, first, path)
        return
    if size % rows == 0 and frequency == size and first == size:
        return
    warn_spec(
        f"{path}: with {rows} environments, an on-policy update reads the newest {size} rows of the memory, where "
        f"every environment's staged steps are written one environment after another (frequency {frequency}, "
        f"first update at {first}): some environments' steps are left out and others' read twice. "
        f"Make batch_size, frequency and first_update one multiple of {rows}, as SB3's n_steps * n_envs is, or "
        "update on episodes."
    )


def _check_sequence_rows(mode: UpdateMode, rows: int, first: int, path: str) -> None:
    """``check_rows`` for ``sequences``; ``first``: the first update's count of timesteps."""
    size, frequency, length = mode.batch_size, mode.frequency, mode.length
    if frequency % rows == 0 and first == frequency and size == frequency - rows * (length - 1):
        return
    windows = -(-size // rows)  # per environment, for a batch of batch_size or a little more
    warn_spec(
        f"{path}: with {rows} environments, an on-policy update on sequences reads the newest {size} windows of "
        f"{length} rows in the memory, where every environment's steps staged since the last update are written "
        f"one environment after another and no window crosses from one into the next (frequency {frequency}, "
        f"first update at {first}): the first environments' windows are left out, or windows of an earlier update "
        f"read again. Give each environment the same whole windows: for W windows each, frequency "
        f"{rows} x (W + {length - 1}) and batch_size {rows} x W (W = {windows}: frequency "
        f"{rows * (windows + length - 1)}, batch_size {rows * windows}), first_update at most the frequency "
        "(an episode that ends within an environment's rows still leaves fewer windows); or update on episodes."
    )


def check_updates(mode: UpdateMode, *, on_policy: bool, agent: str, path: str = "update_mode.updates") -> None:
    """More than one update per threshold needs a batch of its own for each: only agents that sample from a
    replay memory have one; an on-policy agent learns once from what it collected."""
    if on_policy and mode.updates != 1:
        raise SpecError(
            path,
            f"{agent} learns once from each batch it collected, so there is no other batch for a second update",
            got=mode.updates,
            expected="1",
            hint=f"Train longer on each batch {TRAIN_LONGER}: "
            '{"type": "multi_step", "num_steps": N, "optimizer": {...}}.',
        )


def check_retrieval(mode: UpdateMode, memory: Any, spec: Any) -> None:
    """A memory that cannot retrieve the update's unit (``prioritized_replay`` draws single timesteps, never whole
    episodes or sequences) is an error when the agent is built, not at its first update. ``spec`` is the memory's
    spec, for the path and the name in the message."""
    units = getattr(memory, "units", UNITS)
    if mode.unit in units:
        return
    typed = isinstance(spec, dict) and "type" in spec
    name = spec["type"] if typed else spec if isinstance(spec, str) else type(memory).__name__
    others = "'latest' (on-policy agents) or 'replay'"
    raise SpecError(
        "memory.type" if typed else "memory",
        f"memory '{name}' retrieves {' and '.join(units)} only, and this agent updates on {mode.unit} "
        f"(update_mode.unit '{mode.unit}')",
        hint=f"Use {others} for {mode.unit}, or update_mode.unit 'timesteps' where the agent allows it.",
    )


class Schedule:
    """Counts stored timesteps or episodes and says how many updates are due."""

    def __init__(self, mode: UpdateMode) -> None:
        self.mode = mode
        needed = max(mode.batch_size + (mode.length - 1 if mode.unit == "sequences" else 0), mode.first_update, 1)
        self.next_at = -(-needed // mode.frequency) * mode.frequency  # first multiple of frequency >= needed

    def due(self, count: int) -> int:
        """The number of updates due now that ``count`` units are stored (``updates`` per threshold crossed);
        advances the threshold past them."""
        if count < self.next_at:
            return 0
        crossed = (count - self.next_at) // self.mode.frequency + 1
        self.next_at += crossed * self.mode.frequency
        return crossed * self.mode.updates

    def state_dict(self) -> dict[str, int]:
        return {"next_at": self.next_at}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.next_at = int(state["next_at"])


def default_latest_capacity(update_mode: dict | None) -> int:
    """An on-policy agent's default room in its latest memory, from its ``update_mode`` spec (unchecked): one batch
    with margin. 1000 steps per episode for episode batches; for timesteps and sequences, four times what is staged
    before an update (a batch, its windows' extra rows, the frequency, the first update), and at least 1024 rows, so
    that batched acting over many environments fits."""
    mode = update_mode if isinstance(update_mode, dict) else {}
    batch_size, frequency = mode.get("batch_size", 10), mode.get("frequency", mode.get("batch_size", 10))
    length, first_update = mode.get("length", 8), mode.get("first_update", 0)
    if not all(isinstance(value, int) and value >= 0 for value in (batch_size, frequency, length, first_update)):
        return 10_000  # the update_mode check reports the bad value
    unit = mode.get("unit", "episodes")
    if unit == "episodes":
        return max(batch_size * 1000, 10_000)
    window = batch_size + length - 1 if unit == "sequences" else batch_size
    return max(4 * max(window, frequency, first_update), 1024)
