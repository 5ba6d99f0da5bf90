"""The Agent API of 2018 (docs/tensorforce-0.4.md, Agent API):
``act``/``observe``/``reset``/``close``/``save_model``/``restore_model``.

An agent acts on one state or on a batch of states (one row per parallel environment, each with its own episode
bookkeeping), and learns from what ``observe`` tells it. Algorithms subclass ``Agent`` directly and implement
``_update`` (and, where acting differs, ``_act_rows``); everything else lives here.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
import warnings
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import numpy as np
import torch
from torch import nn

from torchforce.agents.batches import STATE_DTYPES, Batch, as_batch, as_output, per_row
from torchforce.agents.checkpoint import CheckpointError, find_checkpoint, load_checkpoint, save_checkpoint
from torchforce.agents.clock import ModelClock
from torchforce.agents.compute import can_compile, resolve_device, resolve_precision
from torchforce.agents.config import AgentConfig, LearningConfig, check_execution
from torchforce.agents.episodes import Episodes
from torchforce.agents.errors import NonFiniteActionError
from torchforce.agents.experience import experience_batch
from torchforce.agents.fetch import check_fetch, fetch, fetchable
from torchforce.agents.independent import IndependentActing
from torchforce.agents.persistence import MALFORMED, agent_state, load_agent_state, load_warm_start
from torchforce.agents.state import ApartRandomness, jsonable, saver_spec
from torchforce.agents.transfer import to_device, to_host
from torchforce.agents.transitions import Transitions
from torchforce.agents.update_mode import (
    Schedule,
    UpdateMode,
    check_capacity,
    check_retrieval,
    check_rows,
    check_updates,
)
from torchforce.core.explorations import (
    Drawn,
    Exploration,
    build_explorations,
    draw_epsilon,
    explore,
    replace_drawn,
    uniform_actions,
)
from torchforce.core.memories import FieldSpec, build_memory, with_capacity
from torchforce.core.modes import follows_training_mode
from torchforce.core.optimizers import Info, Optimizer
from torchforce.core.summaries import Summarizer, learning_rate
from torchforce.spec import (
    SpecError,
    normalize_actions,
    normalize_states,
)
from torchforce.spec.frequency import Every

if TYPE_CHECKING:
    from torchforce.core.preprocessors import PreprocessorStack

UNLOCKED = contextlib.nullcontext()  # reusable: what an act holds when it needs no lock (every act of most agents)


class Agent:
    """Base of every agent. ``states``/``actions`` take the 2018 spec forms (docs/tensorforce-0.4.md, States and
    actions)."""

    name: ClassVar[str] = "agent"
    learning: ClassVar[bool] = False  # agents that store experience and update
    losses: ClassVar[tuple[str, ...]] = ()  # the methods whose losses the optimizers step on: what ``compile`` compiles

    def __init__(self, states: Any, actions: Any, *, config: AgentConfig) -> None:
        """What every agent sets up from its ``config`` (checked already: see ``torchforce.agents.config``)."""
        self.config = config
        self.states_spec, self.single_state = normalize_states(states)
        self.actions_spec, self.single_action = normalize_actions(actions)
        # float actions are checked for NaN/inf on every act (NonFiniteActionError); int and bool ones cannot be
        self._float_actions = tuple(name for name, spec in self.actions_spec.items() if spec.type == "float")
        self.batched_observe = config.batched_observe  # 2018 keys with no effect: see AgentConfig
        self.batching_capacity = config.batching_capacity
        self.scope = config.scope or self.name
        self.device = resolve_device(config.device)
        self.precision: str | None = None  # the networks' mixed_precision, "auto" resolved (see _set_precision)
        self.execution = check_execution(config.execution_spec)
        self.seed = config.seed
        if self.seed is not None:
            torch.manual_seed(self.seed)
        self.rng = np.random.default_rng(self.seed)
        self.apart_generators = ApartRandomness(self.seed, self.device)  # what acting apart from training draws from
        self.timestep = 0
        # the count of every sharing worker's acts once workers share the model (execution.sharing); None for an agent
        # alone, whose model's timestep is its own (a clock holds its agents: a cycle that a lone agent need not be in)
        self.model_clock: ModelClock | None = None
        self.random_timesteps = 0  # the first timesteps act uniformly at random (DDPG, NAF: random_timesteps)
        self.episode = 0
        self.updates = 0
        self._stop = False
        # restored only to act (restore_model(for_acting=True)): its memory and optimizers' state were not loaded
        self.acting_only = False
        self.episodes = Episodes()  # the episode in progress in each row (learning agents: see _setup_learning)
        self.independent = IndependentActing()  # what act(independent=True) carries apart from the training rows
        self._update_time: int | None = None  # see update_timestep
        self._training = True  # modules start in training mode; acting switches them to eval mode
        self._follows_mode: bool | None = None  # whether any module computes differently in the two modes
        # whether act records what _acted_fields names (an agent sets it once built), and what _acted reads
        self._records_acting = False
        self._acting_forward: list[Any] = []
        self._acted_kept: Batch | None = None  # see _act_rows
        self._explore_first: bool | None = None  # see _explores_first, decided at the first act
        self._warned_truncation = False
        self._last_act: tuple[Any, Any, Any] | None = None  # states, internals, actions of the last act
        self._last_outcome: tuple[Any, Any] = (None, None)  # terminal, reward as observe got them
        # workers sharing this agent's model update it in turn (torchforce.execution.sharing); None: not shared
        self.update_lock: threading.RLock | None = None
        self.processed_states = dict(self.states_spec)
        self.saver = saver_spec(config.saver)
        self.summarizer = Summarizer(config.summarizer or {}, "summarizer")
        self.save_timer = (
            None if self.saver is None else Every(timesteps=self.saver["steps"], seconds=self.saver["seconds"])
        )

    # ------------------------------------------------------------------ construction helpers

    def _finish(self, **arguments: Any) -> None:
        """The last step of every agent's construction, once all its modules exist: each network computes in the
        config's ``mixed_precision``, and the resolved spec is recorded for checkpoints (the config's options,
        defaults included, the states and actions, and the constructor's other ``arguments``: ``network``,
        ``action_values``)."""
        if isinstance(self.config, LearningConfig):
            self._set_precision(self.config.mixed_precision)
            if self.config.compile:
                self._compile_losses()
        spec = self.config.to_spec()
        spec.update({key: jsonable(value) for key, value in arguments.items()})
        spec["states"] = jsonable(self.states_spec)
        spec["actions"] = jsonable(self.actions_spec)
        self.spec = spec

    def _set_precision(self, precision: str | None) -> None:
        """Every network of the agent's modules (targets too) computes in ``precision`` (``resolve_precision``:
        "auto" resolved for the agent's device); ``self.precision`` is what was chosen."""
        from torchforce.core.networks import set_autocast

        self.precision = resolve_precision(precision, self.device)
        dtype = None if self.precision is None else getattr(torch, self.precision)
        for module in self.trainable_modules().values():
            set_autocast(module, dtype)

    def _compile_losses(self) -> None:
        """Each loss the agent's optimizers step on (the class's ``losses``) compiled with torch.compile: on small
        networks much of an update's time is eager PyTorch's cost per operation, part of which TorchInductor's fused
        kernels for the loss's forward and backward passes remove (where the arithmetic dominates, as in CNNs, they
        can be slower: bench/README.md). The first call of each loss compiles it (and a
        call with other shapes, or without gradients, compiles once more). The numbers differ from uncompiled ones
        in their last bits, so a compiled run repeats compiled runs, not uncompiled ones."""
        if not can_compile(self.device):
            return
        for name in self.losses:
            setattr(self, name, torch.compile(getattr(self, name)))

    def _setup_learning(
        self,
        *,
        network: Any,
        config: LearningConfig,
        default_update_mode: dict[str, Any],
        default_memory: dict[str, Any],
        on_policy: bool,
        unit_reason: str | None = None,
    ) -> None:
        """Build what every learning agent has from its ``network`` and ``config``: preprocessing, the policy,
        explorations, memory and schedule. ``unit_reason``: the agent learns only with ``default_update_mode``'s
        unit, and this says why (the SpecError's text for any other)."""
        from torchforce.core.networks import build_network
        from torchforce.core.policy import Policy
        from torchforce.core.preprocessors import build_preprocessing, build_reward_preprocessing

        self.preprocessing = build_preprocessing(
            config.states_preprocessing, self.states_spec, path="states_preprocessing"
        )
        self.processed_states = {
            name: (self.preprocessing[name].processed_spec if name in self.preprocessing else spec)
            for name, spec in self.states_spec.items()
        }
        self.reward_preprocessing = build_reward_preprocessing(
            config.reward_preprocessing, path="reward_preprocessing", discount=config.discount
        )
        self.explorations = build_explorations(
            config.actions_exploration, self.actions_spec, path="actions_exploration"
        )
        self.variable_noise = config.variable_noise
        if network is None:
            raise SpecError(
                "network",
                f"{self.name} needs a network",
                hint='Pass a layer list, e.g. [{"type": "dense", "size": 64}].',
            )
        self.policy = Policy(
            build_network(network, self.processed_states, path="network"),
            self.actions_spec,
            config.distributions,
            path="distributions",
        ).to(self.device)
        self.update_mode = UpdateMode.from_spec(config.update_mode, default_update_mode)
        self.schedule = Schedule(self.update_mode)
        self.on_policy = on_policy
        self.fields = self._fields()
        memory = default_memory if config.memory is None else config.memory
        self.memory = build_memory(
            with_capacity(memory, default_memory["capacity"]), self.fields, rng=self.rng.spawn(1)[0], path="memory"
        )
        check_retrieval(self.update_mode, self.memory, memory)
        check_capacity(self.update_mode, self.memory.capacity, on_policy=on_policy)
        check_updates(self.update_mode, on_policy=on_policy, agent=self.name)
        unit = default_update_mode["unit"]
        if unit_reason is not None and self.update_mode.unit != unit:
            raise SpecError("update_mode.unit", unit_reason, got=self.update_mode.unit, expected=f'"{unit}"')
        self.episodes = Episodes(
            self.fields,
            on_policy=on_policy,
            episode_segments=self.update_mode.unit == "episodes",
            internal_shapes=self.policy.network.internals,
            device=self.device,
            capacity=self.memory.capacity,
        )
        self._schedule_counts = "episodes" if self.update_mode.unit == "episodes" else "timesteps"
        # whether the update under way is reported (its info summarized): work that only feeds the report (a
        # pass of the updated policy over the batch) is skipped when not; see _learn
        self.reporting = True

    def _fields(self) -> dict[str, FieldSpec]:
        fields = {"reward": FieldSpec((), np.dtype(np.float32)), "terminal": FieldSpec((), np.dtype(np.int8))}
        for name, spec in self.processed_states.items():
            dtype = STATE_DTYPES[spec.type]
            fields[f"states/{name}"] = FieldSpec(spec.shape, dtype)
            fields[f"next_states/{name}"] = FieldSpec(spec.shape, dtype)
        for name, shape in self.policy.network.internals.items():
            fields[f"internals/{name}"] = FieldSpec(shape, np.dtype(np.float32))
        for name, shape in self.policy.network.internals.items():
            # the recurrent state after the step, that values of the next state start from; rows stored without it
            # (a memory or staging of a checkpoint from before 2026-12-06) read their own internals instead
            fields[f"next_internals/{name}"] = FieldSpec(
                shape, np.dtype(np.float32), optional=True, fallback=f"internals/{name}"
            )
        for name, action in self.actions_spec.items():
            fields[f"actions/{name}"] = FieldSpec(action.shape, STATE_DTYPES[action.type])
        for name, dtype in self._acted_fields().items():
            fields[f"acted/{name}"] = FieldSpec((), dtype, optional=True)
        return fields

    def _acted_fields(self) -> dict[str, np.dtype]:
        """What acting computes per row that updates may reuse, stored as optional ``acted/<name>`` fields, or
        nothing (see ``_acted``). Called while the agent is built, once its states and policy are."""
        return {}

    # ------------------------------------------------------------------ the public API

    @staticmethod
    def from_spec(spec: Any, kwargs: dict[str, Any] | None = None) -> Agent:
        """Build an agent from a spec plus ``kwargs`` (states, actions, network...): a dict, a file, an agent type
        (``"ppo"``) or a shipped config's name (``"ppo_cartpole"``); see ``torchforce.agents.create_agent``."""
        from torchforce.agents import create_agent

        return create_agent(spec, **(kwargs or {}))

    def reset(self) -> None:
        """Start a new episode in every row: recurrent state, preprocessors and explorations start over. An episode
        left unfinished ends here: its last step, whose next state never came, is dropped, and what an on-policy
        agent had staged of it is written to the memory as a segment cut before that step (terminal 2)."""
        self._store(self.episodes.end_all())

    def act(
        self,
        states: Any,
        deterministic: bool = False,
        independent: bool = False,
        fetch_tensors: list[str] | None = None,
        buffered: bool = True,
    ) -> Any:
        """Actions for one state, or for a batch of states (one row per parallel environment).

        ``deterministic`` turns exploration and sampling off; ``independent`` acts without recording the step
        (no observe expected, counters unchanged), e.g. for evaluation, and draws its exploration and samples from
        random generators of its own: a seeded run trains the same however it is evaluated. ``fetch_tensors``
        (names from ``fetchable_tensors()``: distribution parameters, Q-values, the state value, internals, the
        network's named outputs) makes it return ``(actions, {name: array})``, computed on the states the actions
        came from.
        ``buffered`` is 2018's and changes nothing: observe is always cheap.
        """
        if self.acting_only and not independent:
            self._refuse_learning("act() without independent=True")
        batch, batched = self._as_batch(states)
        rows = next(iter(batch.values())).shape[0]
        wanted = None if fetch_tensors is None else check_fetch(self, fetch_tensors)
        if independent:
            with contextlib.nullcontext() if deterministic else self._randomness_apart():
                actions, processed, internals = self._act_independent(batch, rows, deterministic)
            if wanted is None:
                return self._as_output(actions, batched)
            return self._as_output(actions, batched), fetch(self, processed, internals, wanted, batched)
        episodes = self.episodes
        if rows != episodes.num_rows:
            self._store(episodes.resize(rows))  # every row starts a new episode
            if self.learning:
                check_rows(self.update_mode, rows, on_policy=self.on_policy)
        if episodes.acted:
            raise RuntimeError("act() was called twice without observe() in between; call observe(terminal, reward).")
        if episodes.starting:
            self._start_episodes(episodes.start_new())
        if self.learning:
            batch = self._preprocess(batch)
            if episodes.waiting():  # this act's states complete the steps observed last
                self._store(episodes.complete_waiting(batch))
                self._maybe_update()
        before = episodes.internals
        # random_timesteps count the agent's own acts, as the first update of its own memory does (shared model or not)
        at_random = self.timestep < self.random_timesteps and not deterministic
        record = self.learning and self._records_acting
        actions, episodes.internals = self._act_rows(
            batch, before, deterministic=deterministic, record=record and not at_random
        )
        if at_random:
            actions = uniform_actions(self.actions_spec, rows, self.rng)
        if self.learning:
            episodes.record(
                batch, before, episodes.internals, actions, self._acted(actions, self._acted_kept) if record else {}
            )
        episodes.acted = True
        self.timestep += rows
        output = self._as_output(actions, batched)
        self._last_act, self._last_outcome = (states, before, output), (None, None)
        if wanted is not None:
            return output, fetch(self, batch, before, wanted, batched)
        return output

    def observe(self, terminal: Any, reward: Any, next_states: Any = None) -> None:
        """What followed the last ``act``: ``terminal`` (0/False, 1/True, or 2 for a time-limit truncation) and
        ``reward``, scalars or one per row. ``next_states`` are the final states of rows that ended with 2, so
        learning targets bootstrap through the truncation."""
        if self.acting_only:
            self._refuse_learning("observe()")
        episodes = self.episodes
        if not episodes.acted:
            raise RuntimeError("observe() was called without a preceding act().")
        given = (terminal, reward)
        terminal = self._per_row(terminal, np.int8, "terminal")
        reward = self._per_row(reward, np.float32, "reward")
        ended = truncated = np.flatnonzero(terminal)  # the rows whose episode ended, and those truncated among them
        if len(ended):
            highest = terminal.view(np.uint8).max()  # a negative int8 reads as 128 or more
            if highest > 2:
                raise ValueError(f"terminal must be 0/False, 1/True or 2 (truncated), got {terminal.tolist()}")
            truncated = ended[terminal[ended] == 2] if highest == 2 else ended[:0]
        self._last_outcome = given
        episodes.acted = False
        episodes.count(reward)
        if self.learning:
            self._observe_rows(terminal, reward, ended, truncated, next_states)
        finished = episodes.finish(ended)
        self.episode += len(finished)
        if finished and self.summarizer.enabled:
            for episode_return, length in finished:
                self.summarizer.scalars({"episode/return": episode_return, "episode/length": length}, self.timestep)
        if self.learning:
            self._maybe_update()
        self._maybe_save()

    def last_observation(self) -> dict[str, Any]:
        """The last step as 0.4 kept it: ``states`` (as given to ``act``), ``internals`` (the recurrent state the
        action came from, per row), ``actions`` (as ``act`` returned them), and ``terminal`` and ``reward`` (as given
        to ``observe``; None until it follows the ``act``). Empty before the first ``act``."""
        if self._last_act is None:
            return {}
        (states, internals, actions), (terminal, reward) = self._last_act, self._last_outcome
        return {"states": states, "internals": internals, "actions": actions, "terminal": terminal, "reward": reward}

    def fetchable_tensors(self) -> list[str]:
        """The names ``act(..., fetch_tensors=[...])`` accepts for this agent (see ``torchforce.agents.fetch``)."""
        return fetchable(self)

    def initialize_model(self) -> dict[str, nn.Module]:
        """The model: in 0.4, a separate step after the agent's checks that built the TensorFlow graph. Here the
        constructor has built it already (networks, optimizers, memory), so this returns its modules by name, the
        same objects ``trainable_modules()`` returns; it builds nothing again and changes nothing."""
        return self.trainable_modules()

    def set_normalized_states(self, states: Any) -> None:
        """Set the states spec from any 2018 form (one state, or a dict of named states), normalized as the
        constructor does. The model was built for the agent's states: a spec that normalizes to a different one is
        a ValueError (build a new agent for other states)."""
        self.states_spec, self.single_state = self._same_spec(normalize_states(states), "states", self.states_spec)

    def set_normalized_actions(self, actions: Any) -> None:
        """Set the actions spec from any 2018 form, as ``set_normalized_states`` does for states."""
        self.actions_spec, self.single_action = self._same_spec(
            normalize_actions(actions), "actions", self.actions_spec
        )

    @staticmethod
    def _same_spec(normalized: tuple[dict, bool], what: str, current: dict) -> tuple[dict, bool]:
        if normalized[0] != current:
            raise ValueError(
                f"the model was built for {what} {jsonable(current)}, not {jsonable(normalized[0])}: build a new "
                f"agent for other {what}"
            )
        return normalized

    def should_stop(self) -> bool:
        """Whether ``stop()`` was asked for: runners end their run after the current step."""
        return self._stop

    def stop(self, requested: bool = True) -> None:
        """Ask whoever drives the agent to stop (``should_stop()`` turns True); ``stop(False)`` takes it back."""
        self._stop = bool(requested)

    def close(self) -> None:
        """Save a final checkpoint if a saver directory is set (not for an agent restored only to act, which has
        nothing to save), and close the summary writer."""
        if self.saver is not None and not self.episodes.acted and not self.acting_only:
            self.save_model()
        self.summarizer.close()

    # ------------------------------------------------------------------ rows and transitions

    def _as_batch(self, states: Any) -> tuple[Batch, bool]:
        return as_batch(states, self.states_spec, self.single_state)

    def _as_output(self, actions: Batch, batched: bool) -> Any:
        return as_output(actions, batched, self.single_action)

    def _per_row(self, value: Any, dtype: type, name: str) -> np.ndarray:
        return per_row(value, dtype, name, self.episodes.num_rows)

    def _store(self, batches: list[Batch]) -> None:
        """Into the memory: what the episode bookkeeping has ready (completed transitions, or segments)."""
        for batch in batches:
            self.memory.store(batch)

    def _start_episodes(self, rows: np.ndarray) -> None:
        """New episodes in ``rows``: their preprocessors and explorations start over."""
        if not self.learning:
            return
        for stack in self.preprocessing.values():
            stack.reset(rows)
        if self.reward_preprocessing is not None:
            self.reward_preprocessing.start_episodes(rows)
        for exploration in self.explorations.values():
            if hasattr(exploration, "reset"):
                exploration.reset(rows)

    def _preprocess(
        self,
        batch: Batch,
        rows: np.ndarray | None = None,
        *,
        frozen: bool = False,
        stacks: dict[str, PreprocessorStack] | None = None,
    ) -> Batch:
        """``frozen``: statistics of the whole run (running_standardize without reset_after_batch) learn nothing.
        ``stacks``: the training rows' (``preprocessing``) unless given."""
        stacks = self.preprocessing if stacks is None else stacks
        if not stacks:
            return batch
        return {
            name: (stacks[name].process(v, rows, frozen=frozen) if name in stacks else v) for name, v in batch.items()
        }

    def _observe_rows(
        self, terminal: np.ndarray, reward: np.ndarray, ended: np.ndarray, truncated: np.ndarray, next_states: Any
    ) -> None:
        """The step's outcome into the staged transitions: the rows that ``ended`` (indices) complete theirs now,
        the ``truncated`` ones among them (terminal 2) with their ``next_states`` where given."""
        episodes = self.episodes
        episodes.observe(terminal, self.reward_preprocessing.process(reward) if self.reward_preprocessing else reward)
        finals = None
        if len(truncated) and next_states is None and not self._warned_truncation:
            self._warned_truncation = True
            warnings.warn(
                "observe() got terminal 2 (a time-limit truncation) without next_states, so the state the agent "
                "acted on stands in for the next state that learning targets bootstrap from. Pass "
                "next_states=<the state execute() returned> (the Runner does).",
                stacklevel=3,
            )
        if len(truncated) and next_states is not None:
            given, _ = self._as_batch(next_states)
            if next(iter(given.values())).shape[0] != episodes.num_rows:
                raise ValueError(f"next_states must have one row per acted row ({episodes.num_rows})")
            # a final state only stands in for the next one: statistics of the whole run learn nothing from it, as
            # VecNormalize's terminal_observation (frames and per-episode statistics take it as a step)
            finals = self._preprocess({k: v[truncated] for k, v in given.items()}, truncated, frozen=True)
        self._store(episodes.end(ended, truncated, finals))

    # ------------------------------------------------------------------ acting and updating

    def as_tensors(self, batch: Batch) -> dict[str, torch.Tensor]:
        """A batch of numpy arrays as tensors on the agent's device (sharing the arrays' memory on the CPU)."""
        if self.device.type == "cpu":  # shares the arrays' memory, without a call per state on every act
            return {name: torch.from_numpy(values) for name, values in batch.items()}
        return {name: to_device(values, self.device) for name, values in batch.items()}

    @contextlib.contextmanager
    def _randomness_apart(self) -> Iterator[None]:
        """Independent acting that draws (exploration, sampling) draws from generators of its own, so that training
        goes on with the same numbers (``ApartRandomness``)."""
        training = self.rng
        with self.apart_generators.swapped_in() as generator:
            self.rng = generator
            try:
                yield
            finally:
                self.rng = training

    def _act_independent(
        self, batch: Batch, rows: int, deterministic: bool
    ) -> tuple[dict[str, np.ndarray], Batch, dict[str, torch.Tensor]]:
        """Acting that leaves the training rows alone: their recurrent state is read, never advanced, and a batch
        of another size starts from zero recurrent state. (Stateful preprocessors such as ``sequence`` do advance;
        statistics of the whole run are applied frozen.)
        Returns the actions, the preprocessed states and the recurrent state they were computed from."""
        if not self.learning:
            return self._act_rows(batch, {}, deterministic=deterministic)[0], batch, {}
        apart = self.independent
        batch = self._preprocess(batch, frozen=True, stacks=apart.preprocessing(self))
        before = apart.internals(self, rows)
        actions, internals = self._act_rows(
            batch, before, deterministic=deterministic, explorations=apart.explorations(self)
        )
        apart.advance(rows, internals)
        return actions, batch, before

    def start_independent_episode(self, rows: int = 1, *, restart: Any = None) -> None:
        """Give independent acting (evaluation) its own recurrent state, exploration noise and episode state of
        the preprocessing, starting over (recurrent state zero, noise at its mean, frames and statistics empty):
        from now on ``act(independent=True)`` on batches of ``rows`` rows carries them from call to call, as an
        episode needs. Call it at the start of every evaluation episode; the training rows stay untouched.
        ``restart`` (row indices) starts over only those rows of the current independent state, for batches whose
        episodes end row by row."""
        if self.learning:
            self.independent.start_episode(self, rows, restart)

    def _set_training(self, training: bool) -> None:
        """Training mode for updates, eval mode for acting (batch normalization and dropout differ). Modules that
        compute the same in both modes are left alone: switching walks every submodule, on every act and update.
        Workers sharing a model (``update_lock``) share its modules' mode too, which another worker may have
        switched: they set it every time."""
        if self._training == training and self.update_lock is None:
            return
        self._training = training
        if self._mode_matters():
            for module in self.trainable_modules().values():
                module.train(training)

    def _mode_matters(self) -> bool:
        """Whether a module computes differently in training and eval mode (decided once)."""
        if self._follows_mode is None:
            self._follows_mode = follows_training_mode(*self.trainable_modules().values())
        return self._follows_mode

    def _turn_to_act(self) -> Any:
        """What acting holds around the policy's pass: nothing, or for workers sharing a model whose pass depends
        on state they share (modules that follow the training mode, parameters with variable noise added) the
        model's ``update_lock``, so that no other worker updates (or acts) in another mode or on noisy
        parameters meanwhile. Plain shared models act in parallel (hogwild, as 2018's threads)."""
        if self.update_lock is not None and (self.variable_noise or self._mode_matters()):
            return self.update_lock
        return UNLOCKED

    def _act_rows(
        self,
        batch: Batch,
        internals: dict[str, torch.Tensor],
        *,
        deterministic: bool,
        record: bool = False,
        explorations: dict[str, Exploration] | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, torch.Tensor]]:
        """Actions for the (preprocessed) batch from the policy, then exploration unless deterministic
        (``explorations``: the training rows' unless given). Where exploration is drawn first
        (``_explores_first``) and replaces every row's actions, the policy is left out.
        ``record``: ``act`` records what ``_acted_fields`` names. Where exploration cannot change the policy's
        actions, that is computed here (``_acted_kept``), on the device, and comes back to the host together with
        the actions; else ``_acted`` computes it from the final actions."""
        self._acted_kept = None
        drawn = self._draw_exploration(batch) if not deterministic and self._explores_first() else None
        if drawn is not None:
            replaced = {name: draw for name, draw in drawn.items() if draw is not None and draw[0].all()}
            if len(replaced) == len(drawn):  # no row keeps the policy's actions: no pass
                self._acting_forward = []
                return self._drawn_actions(replaced), internals
        keep = record and drawn is None and (deterministic or not self.explorations)
        with self._turn_to_act():
            self._set_training(False)
            noise = self._add_variable_noise(self.variable_noise) if self.variable_noise and not deterministic else None
            # small dense policies on the CPU act as NumPy calls, unless acting's tensors are kept for updates
            rows = len(next(iter(batch.values())))
            host = None if self._records_acting or self.device.type != "cpu" else self.policy.on_host(rows)
            if host is not None:
                forward: list[Any] = []  # no tensors of the pass: nothing is recorded of it here
                sampled = host.act(batch, self._act_deterministically(deterministic))
                actions = dict(sampled)
            else:
                with torch.inference_mode():
                    sampled, internals, *forward = self.policy.act_forward(
                        self.as_tensors(batch), internals, self._act_deterministically(deterministic)
                    )
                    if keep:
                        actions, self._acted_kept = to_host(sampled, self._acted_tensors(forward, sampled))
                    elif self.device.type == "cpu":  # every act of most agents: as cheap as it can be
                        actions = {name: values.numpy() for name, values in sampled.items()}
                    else:
                        (actions,) = to_host(sampled)
            if noise is not None:
                self._remove_variable_noise(noise)
        self._acting_forward = forward  # the distribution parameters and embedding, for _acted
        if drawn is not None:
            for name, draw in drawn.items():
                actions[name] = replace_drawn(actions[name], draw)
        elif not deterministic and self.explorations:
            for name, exploration in (self.explorations if explorations is None else explorations).items():
                actions[name] = explore(
                    self.actions_spec[name], actions[name], exploration, timestep=self.model_timestep, rng=self.rng
                )
        for name in self._float_actions:  # a diverged policy is reported, not handed to the environment
            if not np.isfinite(actions[name]).all():
                policy = sampled[name]  # before exploration: a tensor, or an array acted on the host
                finite = np.isfinite(policy) if isinstance(policy, np.ndarray) else torch.isfinite(policy)
                raise NonFiniteActionError(self.name, name, self.timestep, policy_finite=bool(finite.all()))
        return actions, internals

    def _acted(self, actions: dict[str, np.ndarray], kept: Batch | None) -> Batch:
        """What ``_acted_fields`` names, for the rows just acted and their final ``actions`` (after exploration):
        from ``kept`` (``_acted_tensors`` of the policy's actions, on the host), or where exploration may have
        changed the actions (``kept`` None) from ``_acting_forward``. Called by ``act`` when ``_records_acting``."""
        raise NotImplementedError(f"{type(self).__name__} records nothing of acting")

    def _acted_tensors(self, forward: list[Any], actions: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The tensors of ``_acted``, per row, from acting's pass (``forward``) and the actions taken."""
        raise NotImplementedError(f"{type(self).__name__} records nothing of acting")

    def _act_deterministically(self, deterministic: bool) -> bool:
        return deterministic

    def _draw_exploration(self, batch: Batch) -> dict[str, Drawn | None]:
        """Each action's epsilon exploration drawn for the rows of ``batch`` (see ``_explores_first``)."""
        rows = len(next(iter(batch.values())))
        return {
            name: draw_epsilon(
                self.actions_spec[name],
                (rows, *self.actions_spec[name].shape),
                exploration,
                timestep=self.model_timestep,
                rng=self.rng,
            )
            for name, exploration in self.explorations.items()
        }

    def _drawn_actions(self, drawn: dict[str, Drawn]) -> dict[str, np.ndarray]:
        """The actions of rows whose every element ``drawn`` replaces, typed as the policy's would be."""
        return {
            name: values.astype(STATE_DTYPES[self.actions_spec[name].type]).reshape(mask.shape)
            for name, (mask, values) in drawn.items()
        }

    def _explores_first(self) -> bool:
        """Whether acting draws its exploration before the policy's pass, so that the pass can be left out when
        every row's actions are replaced (SB3's DQN likewise acts at random without its network): an epsilon
        exploration for every action, and a pass that draws nothing at random (greedy, no variable noise) and
        whose outputs nothing else reads (no recurrent state, nothing kept for updates). The draws are those
        ``explore`` makes after a pass, in the same order, so the actions are the same either way."""
        if self._explore_first is None:
            self._explore_first = (
                bool(self.explorations)
                and self.explorations.keys() == self.actions_spec.keys()
                and not any(exploration.is_noise for exploration in self.explorations.values())
                and self._act_deterministically(False)
                and not self.variable_noise
                and not self.policy.network.internals
                and not self._records_acting
            )
        return self._explore_first

    def _add_variable_noise(self, scale: float) -> list[torch.Tensor]:
        noise = []
        with torch.no_grad():
            for parameter in self.policy.parameters():
                sample = torch.randn_like(parameter) * scale
                parameter.add_(sample)
                noise.append(sample)
        return noise

    def _remove_variable_noise(self, noise: list[torch.Tensor]) -> None:
        with torch.no_grad():
            for parameter, sample in zip(self.policy.parameters(), noise, strict=True):
                parameter.sub_(sample)

    def _maybe_update(self) -> None:
        count = self.episodes.completed[self._schedule_counts]
        if count < self.schedule.next_at:  # checked twice a step: the common case returns at once
            return
        first = self.schedule.next_at
        due = self.schedule.due(count)
        if self.on_policy:
            due = min(due, 1)
        try:
            for index in range(due):
                self._update_time = self._threshold_time(first, index, count)
                batch = self._next_batch()
                reported = self.summarizer.due(self.timestep)
                with self.update_lock or contextlib.nullcontext():  # workers sharing a model update it in turn
                    self._set_training(True)
                    info = self._learn(batch, report=reported)
                self.updates += 1
                if reported:
                    self._summarize_update(info, batch)
        finally:
            self._update_time = None

    def _threshold_time(self, first: int, index: int, count: int) -> int:
        """The timestep update ``index`` of those due now stands for: the act at which its threshold of stored
        timesteps (``first`` the first one crossed, then every ``update_mode.frequency``) was reached. An act of N
        rows stores N timesteps and may cross several thresholds, each its own update, so targets that follow
        every F timesteps follow each update's own timestep (one act at a time, it is the act's timestep)."""
        if self._schedule_counts != "timesteps":
            return self.timestep
        threshold = first + (index // self.update_mode.updates) * self.update_mode.frequency
        return self.timestep - (count - threshold)

    @property
    def model_timestep(self) -> int:
        """The timestep of the model the agent learns into (``ModelClock``): the agent's own, or, with workers sharing
        the model, the count of all their acts."""
        return self.timestep if self.model_clock is None else self.model_clock.timestep

    @property
    def update_timestep(self) -> int:
        """The model's timestep the update under way stands for: the act at which its threshold was reached
        (``_threshold_time``) on the model's count; the model's timestep outside ``_maybe_update`` (a parameter
        server's ``compute_update``). The shared target network of workers follows it."""
        if self._update_time is None:
            return self.model_timestep
        return self.model_timestep - (self.timestep - self._update_time)

    def _next_batch(self) -> Transitions:
        """The batch of the next update; on-policy agents updating on timesteps first write every row's staged
        segment (cut, terminal 2) to the memory."""
        if self.on_policy and self.update_mode.unit != "episodes":
            self._store(self.episodes.flush())
        return self._retrieve()

    def _summarize_update(self, info: Info, batch: Transitions) -> None:
        """The update's info (losses, entropy...), the learning rate of each optimizer read from the optimizer
        itself, and the mean (preprocessed) reward of the batch."""
        scalars = dict(info)
        rates = {
            f"learning_rate/{name}": rate
            for name, optimizer in self.optimizers().items()
            if (rate := learning_rate(optimizer)) is not None
        }
        if rates:
            scalars.pop("learning_rate", None)  # an agent's own guess; the optimizers' values are the real ones
            scalars.update(rates)
        scalars["reward_mean"] = float(batch.reward.float().mean()) if len(batch) else 0.0
        self.summarizer.scalars(scalars, self.timestep, prefix="update/")

    def _retrieve(self) -> Transitions:
        mode = self.update_mode
        if mode.unit == "timesteps":
            data = self.memory.retrieve_timesteps(mode.batch_size)
        elif mode.unit == "episodes":
            data = self.memory.retrieve_episodes(mode.batch_size)
        else:
            data = self.memory.retrieve_sequences(mode.batch_size, mode.length)
        return self._transitions(data)

    def _transitions(self, data: Batch) -> Transitions:
        return Transitions.from_numpy(data, self.device)

    def _learn(self, batch: Transitions, *, report: bool = True) -> Info:
        """One update on ``batch``, with what follows the timestep set for it first. ``report``: whether its info
        is read; if not, agents may leave out what only the report needs (``self.reporting`` says which)."""
        self._follow_schedules()
        self.reporting = report
        try:
            return self._update(batch)
        finally:
            self.reporting = True
            self.policy.version += 1

    @contextlib.contextmanager
    def _report_pass(self) -> Iterator[None]:
        """Around a pass that only feeds an update's report (``reporting``): no gradients, and eval mode, so that it
        neither moves batch normalization's running statistics nor draws dropout's randomness. Whether an update is
        reported (the summarizer's schedule) must not change training: with and without summaries, and across a
        pause and resume, the run is the same."""
        training = self._training
        self._set_training(False)
        try:
            with torch.no_grad():
                yield
        finally:
            self._set_training(training)

    def _follow_schedules(self) -> None:
        """Set what follows the timestep to its value now: the optimizers' learning-rate schedules, on the model's
        timestep, as workers share the optimizers (an agent with schedules of its own, as PPO's clipping range, adds
        them)."""
        timestep = self.model_timestep
        for optimizer in self.optimizers().values():
            if isinstance(optimizer, Optimizer):
                optimizer.at_timestep(timestep)

    def _update(self, batch: Transitions) -> Info:
        raise NotImplementedError(f"{type(self).__name__} does not learn")

    # ------------------------------------------------------------------ experience, parameters

    def import_experience(self, experiences: Any) -> None:
        """Put recorded experience into the memory: a list of dicts, or a dict of lists, with ``states``,
        ``actions``, ``terminal``, ``reward`` (and ``internals`` for recurrent networks), in order, episode after
        episode. A step's next state is the following step's state within its episode; a step that ends one
        (terminal 1 or 2), and the last step if the experience ends mid-episode (stored as terminal 2), have none
        and stand in their own state. Every step is checked as act/observe would check it (a SpecError names the
        step and the key). States pass through ``states_preprocessing``: as one batch, or, with a ``sequence``
        step, episode by episode through a copy of the agent's preprocessors (see ``experience.experience_states``)."""
        if not self.learning:
            raise RuntimeError(f"{self.name} agents have no memory to import experience into")
        if self.acting_only:
            self._refuse_learning("import_experience()")
        self._import_into(self.memory, experiences, what="memory", capacity="memory.capacity")

    def _import_into(self, memory: Any, experiences: Any, *, what: str, capacity: str) -> None:
        """``import_experience`` into ``memory`` (called ``what`` in errors), whose size the spec key ``capacity``
        sets."""
        batch = experience_batch(
            experiences,
            self._as_batch,
            self.actions_spec,
            self.single_action,
            self.policy.network.internals,
            self.preprocessing,
            self._preprocess,
        )
        if batch is None:
            return
        if len(batch["terminal"]) > memory.capacity:
            raise SpecError(
                "experiences",
                f"{len(batch['terminal'])} steps do not fit in the {what} at once",
                hint=f"Import at most {capacity} ({memory.capacity}) steps.",
            )
        memory.store(batch)

    def trainable_modules(self) -> dict[str, nn.Module]:
        """The modules whose parameters the agent learns (subclasses add theirs)."""
        return {"policy": self.policy} if self.learning else {}

    def get_parameters(self, modules: Collection[str] | None = None) -> dict[str, torch.Tensor]:
        """A copy of every learned parameter, keyed ``module.parameter``; of the modules named in ``modules`` only
        (names of ``trainable_modules``) when given, so that what is left out is not copied."""
        return {
            f"{module_name}.{name}": parameter.detach().clone()
            for module_name, module in self.trainable_modules().items()
            if modules is None or module_name in modules
            for name, parameter in module.named_parameters()
        }

    def set_parameters(self, parameters: dict[str, torch.Tensor]) -> None:
        own = self._named_parameters()
        unknown = set(parameters) - set(own)
        if unknown:
            raise KeyError(f"unknown parameters {sorted(unknown)[:5]}")
        for name, value in parameters.items():
            if tuple(value.shape) != tuple(own[name].shape):
                raise ValueError(f"parameter {name} has shape {tuple(own[name].shape)}, got {tuple(value.shape)}")
        with torch.no_grad():
            for name, value in parameters.items():
                own[name].copy_(value)
        self.policy.version += 1

    def _named_parameters(self) -> dict[str, torch.Tensor]:
        return {
            f"{module_name}.{name}": parameter
            for module_name, module in self.trainable_modules().items()
            for name, parameter in module.named_parameters()
        }

    def compute_update(self) -> dict[str, torch.Tensor]:
        """The parameter change one update would make, without leaving it applied (for parameter servers).

        The optimizers' own state (e.g. Adam moments) does advance, as each worker keeps its own.
        """
        if self.acting_only:
            self._refuse_learning("compute_update()")
        before = self.get_parameters()
        self._set_training(True)
        self._learn(self._next_batch(), report=False)
        after = self.get_parameters()
        self.set_parameters(before)
        return {name: after[name] - before[name] for name in before}

    def apply_update(self, deltas: dict[str, torch.Tensor]) -> None:
        if self.acting_only:
            self._refuse_learning("apply_update()")
        own = self._named_parameters()
        unknown = set(deltas) - set(own)
        if unknown:
            raise KeyError(f"unknown parameters {sorted(unknown)[:5]}")
        with torch.no_grad():
            for name, delta in deltas.items():
                own[name].add_(delta.to(own[name].device))
        self.updates += 1
        self.policy.version += 1

    # ------------------------------------------------------------------ saving and restoring

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where the agent is, composed of its components' state dicts: what
        a checkpoint holds (``agents.persistence``). Subclasses with more state extend it, and ``load_state_dict``."""
        if self.acting_only:  # its memory and optimizers were never loaded
            self._refuse_learning("state_dict()")
        return agent_state(self)

    def load_state_dict(self, state: dict[str, Any], *, for_acting: bool = False) -> None:
        """Continue from ``state`` (of ``state_dict``). What fails on a checkpoint of another spec (module shapes,
        memory capacity) fails first, before anything has changed. ``for_acting``: leave out what only learning
        reads (the memory, the optimizers' state), which ``state`` then need not hold; the agent then refuses to
        learn or be saved (``acting_only``) until it loads a whole state."""
        load_agent_state(self, state, for_acting=for_acting)

    def optimizers(self) -> dict[str, Any]:
        """The agent's optimizers by name (subclasses list theirs), saved with the model."""
        return {}

    def save_model(self, directory: str | Path | None = None, append_timestep: bool = True) -> str:
        """Save the whole agent state; returns the checkpoint path. ``directory`` defaults to the saver's."""
        if self.acting_only:  # its memory and optimizers, never loaded, would be saved empty
            self._refuse_learning("save_model()")
        directory = directory if directory is not None else (self.saver or {}).get("directory")
        if directory is None:
            raise ValueError("save_model() needs a directory (none given and no saver directory configured)")
        basename = (self.saver or {}).get("basename", "model")
        name = f"{basename}-{self.timestep}" if append_timestep else basename
        manifest = {
            "agent": self.name,
            "timestep": self.timestep,
            "episode": self.episode,
            "updates": self.updates,
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "spec": getattr(self, "spec", None),
        }
        path = save_checkpoint(directory, name, self.state_dict(), manifest)
        if self.save_timer is not None:
            self.save_timer.mark(self.timestep)
        return str(path)

    def restore_model(
        self, directory: str | Path | None = None, file: str | None = None, *, for_acting: bool = False
    ) -> None:
        """Restore a checkpoint: ``file`` in ``directory``, or the latest one there. Without a directory, ``file``
        is relative to the saver's directory, or else a path of its own.

        ``for_acting``: restore only what acting reads (the networks, the preprocessing statistics, the
        explorations' state, the counters and random generators) and leave the memory and the optimizers' state on
        the disk, unread (the file is mapped, ``load_checkpoint(mapped=True)``): a DQN's replay memory of gigabytes
        costs neither the time to read it nor the memory to hold it. The agent acts exactly as after a full restore
        with ``act(..., independent=True)`` (evaluation, export), and refuses to learn (``observe``, an ``act`` that
        expects one, ``import_experience``, saving) until a full restore. An agent that does not learn
        (``random``, ``constant``) is restored in full either way."""
        directory = directory if directory is not None else (self.saver or {}).get("directory")
        if directory is None and file is None:
            raise ValueError("restore_model() needs a directory or a file")
        path = find_checkpoint(directory if directory is not None else ".", file)
        payload = load_checkpoint(path, mapped=for_acting)
        # a project's own agent class whose load_state_dict(state) predates for_acting loads everything, as before
        in_part = for_acting and "for_acting" in inspect.signature(self.load_state_dict).parameters
        try:
            if in_part:
                self.load_state_dict(payload, for_acting=True)
            else:
                self.load_state_dict(payload)
        except MALFORMED as error:  # a part missing, or of another form
            raise CheckpointError(path, f"{type(error).__name__}: {error}") from None
        self.acting_only = for_acting and self.learning
        if self.save_timer is not None:
            self.save_timer.mark(self.timestep)  # the saver's steps/seconds count from here
        if not for_acting:  # (an agent that only acts writes no summaries: the run's later ones stay shown)
            self.summarizer.resume_at(self.timestep)

    def warm_start(self, directory: str | Path, file: str | None = None) -> None:
        """Begin learning from what a checkpoint's agent learned (rl-zoo3's ``--trained-agent``; TensorForce 0.4
        had no such call): its networks' parameters, and what its state and reward preprocessing learned over its
        whole run (``running_standardize`` without ``reset_after_batch``, ``running_return_scale``), which those
        networks were trained on. Everything else starts as in a new agent: counters, schedules, the optimizers'
        state, the memory, explorations, random generators, episodes (the memory and the optimizers' state are
        not even read: the file is mapped). The checkpoint (``file`` in ``directory``, or the latest there) must
        be of an agent of this type, with networks of the same shapes and preprocessing of the same kinds; nothing
        changes where it is not. For an agent that has not acted yet: ``restore_model`` continues a run."""
        if not self.learning:
            raise ValueError(f"warm_start(): a {self.name} agent learns nothing, so it has nothing to start from")
        if self.timestep or self.updates:
            raise ValueError(
                f"warm_start() is for an agent that has not acted yet; this one is at timestep {self.timestep:,} "
                "(restore_model() continues a run)"
            )
        load_warm_start(self, find_checkpoint(directory, file))

    def _refuse_learning(self, what: str) -> NoReturn:
        """``what`` refused, with a RuntimeError that says why: the agent was restored only to act."""
        raise RuntimeError(
            f"{what}: this {self.name} agent was restored only to act (restore_model(..., for_acting=True)), "
            "without its memory and its optimizers' state, so it cannot learn or be saved. Act with "
            "act(states, independent=True); to train on, restore the checkpoint in full (restore_model without "
            "for_acting)."
        )

    def _maybe_save(self) -> None:
        if self.save_timer is not None and not self.episodes.acted and self.save_timer.due(self.timestep):
            self.save_model()

    def _load_on_start(self) -> None:
        """The saver's ``load``: restore the latest checkpoint in its directory, if there is one."""
        if self.saver is None or not self.saver["load"]:
            return
        directory = Path(self.saver["directory"])
        if (directory / "checkpoint").is_file() or self.saver.get("file"):
            self.restore_model(directory, self.saver.get("file"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(timestep={self.timestep}, episode={self.episode}, updates={self.updates})"


class LearningAgent(Agent):
    """Base of the agents that learn (every agent but constant and random): they store experience in a memory and
    update a policy on the schedule of their ``update_mode``. TensorForce 0.4's ``LearningAgent`` under its name."""

    learning: ClassVar[bool] = True
