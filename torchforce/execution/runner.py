"""The Runner of TensorForce 0.4 (docs/tensorforce-0.4.md, Runner): an agent acting in one environment, or in N
environments stepped as one vectorized batch with one ``act`` per step.

Fixed against 2018: an episode is cut at exactly ``max_episode_timesteps`` steps (2018 ran one more), and a cut is
reported to the agent as a truncation (terminal 2) with the final state, so learning bootstraps through it.
"""

from __future__ import annotations

import inspect
import time
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from torchforce.agents import Agent
from torchforce.environments import Environment, VectorEnvironment, VectorStep
from torchforce.execution.base import (
    TORCH_THREADS,
    BaseRunner,
    check_actions_fit,
    check_torch_threads,
    torch_threads,
)
from torchforce.spec import expect_int


class Runner(BaseRunner):
    """Runs ``agent`` in ``environment`` (an Environment, a VectorEnvironment, or a list of Environments).

    One environment: one ``act`` per step; with ``repeat_actions`` > 1 the action is executed that many times (fewer
    if the episode ends) and the rewards are summed into one ``observe``. N environments: one batched ``act`` and
    ``observe`` per step for all rows; finished rows restart at once.

    History: ``episode_rewards``, ``episode_timesteps`` (acts, not repeated environment steps) and ``episode_times``
    get one entry per finished episode, and ``global_episode``/``global_timestep`` count on from them. An episode
    finishes with a true terminal (1) or a truncation (2): one by the environment, or one at exactly
    ``max_episode_timesteps`` steps, which the agent receives as terminal 2 with the episode's final state as
    ``next_states`` (as 2018 did, a cut episode counts as an episode). An episode interrupted by the end of a run
    (``num_timesteps`` reached, a falsy ``step_finished``, the agent's ``should_stop``) is not recorded; both paths
    behave the same. ``history`` (a dict with those three lists, or a ``state_dict()``) continues an earlier run.

    Games: where a terminal ends only a part of a game that goes on (``Environment.game_goes_on``: an Atari life
    lost with ``episodic_life``), the agent's episode ends there (it observes the terminal, and the next part starts
    as a new episode of the agent), but the Runner's episode is the whole game: the history, ``episode_finished``,
    ``num_episodes`` and ``max_episode_timesteps`` count games and their steps (a life lost at the limit ends the game
    there too), and a return is the game's score (unclipped: agents clip rewards themselves), as SB3's Monitor and
    ``evaluate_episodes`` count them; only points scored on the steps a reset takes by itself (the no-op after a
    lost life, FIRE), which no action of the agent's earned, are left out where a monitor counts them.

    ``episode_finished(runner, worker_id)`` gets ``id_`` as the worker id for one environment and the row index for
    N environments; the 2018 one-argument form ``episode_finished(runner)`` works too.

    ``torch_threads``: each ``run`` uses this many intra-op torch threads and sets torch's count back when it
    returns (1 by default: small networks run fastest on one; docs/internals.md, Torch threads). None leaves torch's
    setting as it is, for a caller that sets it itself (``torch.set_num_threads``, ``OMP_NUM_THREADS``).
    """

    def __init__(
        self,
        agent: Agent,
        environment: Environment | VectorEnvironment | list[Environment],
        repeat_actions: int = 1,
        history: dict[str, list] | None = None,
        id_: int = 0,
        torch_threads: int | None = TORCH_THREADS,
    ) -> None:
        if isinstance(environment, list):
            environment = VectorEnvironment(environment)
        if repeat_actions < 1:
            raise ValueError(f"repeat_actions must be >= 1, got {repeat_actions}")
        if isinstance(environment, VectorEnvironment) and repeat_actions != 1:
            raise ValueError("repeat_actions > 1 needs a single environment; wrap each environment to repeat actions")
        check_actions_fit(agent, environment)
        self.agent = agent
        self.environment = environment
        self.repeat_actions = repeat_actions
        self.id = id_
        self.torch_threads = check_torch_threads(torch_threads)
        self.reset(history)

    @property
    def vectorized(self) -> bool:
        return isinstance(self.environment, VectorEnvironment)

    def reset(self, history: dict[str, list] | None = None) -> None:
        history = history or {}
        self.episode_rewards: list[float] = list(history.get("episode_rewards", []))
        self.episode_timesteps: list[int] = list(history.get("episode_timesteps", []))
        self.episode_times: list[float] = list(history.get("episode_times", []))
        self.global_episode = len(self.episode_rewards)
        self.global_timestep = int(sum(self.episode_timesteps))
        self.episode_timestep = 0
        self.start_time = time.time()
        self._rows: dict[str, Any] | None = None  # the vectorized episodes in progress

    def state_dict(self) -> dict[str, Any]:
        """The history and, for vectorized runs, the episodes in progress (current states, lengths, returns), so
        ``load_state_dict`` + ``run(resume=True)`` continue exactly. The environments' own state is not included:
        save it with ``VectorEnvironment.get_state``."""
        state: dict[str, Any] = {
            "episode_rewards": list(self.episode_rewards),
            "episode_timesteps": list(self.episode_timesteps),
            "episode_times": list(self.episode_times),
            "global_timestep": self.global_timestep,
            "global_episode": self.global_episode,
            "rows": None,
        }
        if self._rows is not None:
            state["rows"] = {**_copied_rows(self._rows), "ages": time.time() - self._rows["started"]}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reset({key: state[key] for key in ("episode_rewards", "episode_timesteps", "episode_times")})
        self.global_timestep, self.global_episode = int(state["global_timestep"]), int(state["global_episode"])
        rows = state["rows"]  # copies: a resumed run counts on in its own arrays, and the state loads again alike
        self._rows = None if rows is None else {**rows, **_copied_rows(rows)}

    # 2018 names, kept for callbacks written against them
    @property
    def episode(self) -> int:
        return self.global_episode

    @property
    def timestep(self) -> int:
        return self.global_timestep

    def close(self) -> None:
        self.agent.close()
        self.environment.close()

    def run(
        self,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        max_episode_timesteps: int | None = None,
        deterministic: bool = False,
        episode_finished: Callable[..., Any] | None = None,
        summary_report: Callable[..., Any] | None = None,
        summary_interval: int | None = None,
        timesteps: int | None = None,
        episodes: int | None = None,
        testing: bool = False,
        sleep: float | None = None,
        progress: bool = False,
        step_finished: Callable[[Runner], Any] | None = None,
        resume: bool = False,
    ) -> None:
        """Run until ``num_timesteps`` steps or ``num_episodes`` episodes more (whichever comes first), or until
        ``episode_finished`` returns something falsy, or the agent says stop.

        ``testing`` acts without learning. ``progress`` shows a progress bar with steps/s and the mean return.
        ``step_finished(runner)`` is called after every (vectorized) step; a falsy return stops the run there.
        ``resume`` continues the episodes in progress from ``load_state_dict`` (vectorized runs) instead of
        resetting the environments, so a paused run goes on exactly as it would have.
        """
        if timesteps is not None:
            warnings.warn("run(timesteps=...) is deprecated; use num_timesteps", DeprecationWarning, stacklevel=2)
            num_timesteps = num_timesteps if num_timesteps is not None else timesteps
        if episodes is not None:
            warnings.warn("run(episodes=...) is deprecated; use num_episodes", DeprecationWarning, stacklevel=2)
            num_episodes = num_episodes if num_episodes is not None else episodes
        if summary_report is not None or summary_interval is not None:
            warnings.warn(
                "summary_report/summary_interval are deprecated; use episode_finished", DeprecationWarning, stacklevel=2
            )
        num_timesteps = expect_int(num_timesteps, "num_timesteps", minimum=0, allow_none=True)
        num_episodes = expect_int(num_episodes, "num_episodes", minimum=0, allow_none=True)
        if num_timesteps == 0 or num_episodes == 0:  # nothing to run: not one step
            return
        self._limits = (
            None if num_timesteps is None else self.global_timestep + num_timesteps,
            None if num_episodes is None else self.global_episode + num_episodes,
        )
        self._callback = episode_callback(episode_finished)
        self._step_callback = step_finished
        self._bar = _ProgressBar(num_timesteps, num_episodes) if progress else None
        self._stopped = False
        if resume and not (self.vectorized and self._rows is not None):
            raise ValueError("run(resume=True) needs a vectorized runner with a state from load_state_dict()")
        try:
            with torch_threads(self.torch_threads):
                if not resume:
                    self.agent.reset()
                    self._rows = None
                environment = self.environment
                if isinstance(environment, VectorEnvironment):
                    self._run_vectorized(environment, max_episode_timesteps, deterministic, testing, sleep)
                else:
                    self._run_single(environment, max_episode_timesteps, deterministic, testing, sleep)
        finally:
            if self._bar is not None:
                self._bar.close()

    # ------------------------------------------------------------------ one environment

    def _run_single(
        self, environment: Environment, max_steps: int | None, deterministic: bool, testing: bool, sleep: float | None
    ) -> None:
        while not self._stopped:
            state = environment.reset()
            self.agent.reset()
            if testing:  # recurrent policies carry their own state through an episode acted independently
                self.agent.start_independent_episode()
            self.episode_timestep, episode_reward, started = 0, 0.0, time.time()
            while True:
                action = self.agent.act(state, deterministic=deterministic, independent=testing)
                state, reward, game_over = self._single_step(environment, action, max_steps, testing)
                episode_reward += reward
                if self._bar is not None:
                    self._bar.step(1)
                if game_over:
                    self._episode_done(episode_reward, self.episode_timestep, time.time() - started)
                    if self._episodes_done():
                        self._stopped = True
                # after every step, also the one whose episode ends the run (what it does at the end, it does then)
                if self._step_callback is not None and not self._step_callback(self):
                    self._stopped = True
                if self._stopped:
                    return
                if self._timesteps_done() or self.agent.should_stop():
                    return  # an episode interrupted here is not recorded
                if game_over:
                    break
                if sleep:
                    time.sleep(sleep)

    def _single_step(
        self, environment: Environment, action: Any, max_steps: int | None, testing: bool
    ) -> tuple[Any, float, bool]:
        """One step executed and observed: the next state, the reward and whether the game (the Runner's episode)
        ended, by a true terminal or a truncation (the environment's, or at ``max_steps``). A step that ends a part of
        a game that goes on (an Atari life) ends the agent's episode, and the next part starts at once (the
        environment's reset), so that a run stopped here leaves no part half-started; a game whose part ends at
        ``max_steps`` is over, and the next reset starts a new one."""
        state, terminal, reward = self._execute(environment, action)
        self.episode_timestep += 1
        self.global_timestep += 1
        goes_on = bool(terminal) and environment.game_goes_on  # asked only where the environment ended the episode
        at_limit = max_steps is not None and self.episode_timestep >= max_steps
        if not terminal and at_limit:
            terminal = 2
        if not testing:
            self.agent.observe(terminal=terminal, reward=reward, next_states=state if terminal == 2 else None)
        if goes_on:
            state = environment.reset()  # the game's next part
            if not at_limit:
                self.agent.reset()  # its new episode, as at the start of a game
                if testing:
                    self.agent.start_independent_episode()
        return state, reward, bool(terminal) and (not goes_on or at_limit)

    def _execute(self, environment: Environment, action: Any) -> tuple[Any, int, float]:
        """One act's action executed ``repeat_actions`` times (fewer if the episode ends); the rewards summed."""
        reward = 0.0
        for _ in range(self.repeat_actions):
            state, terminal, step_reward = environment.execute(action)
            reward += step_reward
            if terminal:
                break
        return state, int(terminal), reward

    # ------------------------------------------------------------------ N environments as one batch

    def _run_vectorized(
        self, env: VectorEnvironment, max_steps: int | None, deterministic: bool, testing: bool, sleep: float | None
    ) -> None:
        count = env.num_environments
        if self._rows is None:
            states = env.reset()
            lengths = np.zeros(count, dtype=np.int64)
            returns = np.zeros(count, dtype=np.float64)
            started = np.full(count, time.time())
        else:  # resume the episodes in progress
            states, lengths, returns = self._rows["states"], self._rows["lengths"], self._rows["returns"]
            # from load_state_dict: the episodes' ages; continuing in this process: their start times
            started = self._rows["started"] if "started" in self._rows else time.time() - self._rows["ages"]
        if testing:
            self.agent.start_independent_episode(count)
        while not self._stopped:
            actions = self.agent.act(states, deterministic=deterministic, independent=testing)
            step = env.execute(actions)
            lengths += 1
            returns += step.reward
            terminal, final_states, states, goes_on = step.terminal, step.final_states, step.states, step.goes_on
            if max_steps is not None:
                terminal, final_states, states, goes_on = _at_limit(env, lengths >= max_steps, step)
            ended = np.flatnonzero(terminal)
            self._tell_agent(terminal, ended, step.reward, final_states, testing)
            self.global_timestep += count
            if self._bar is not None:
                self._bar.step(count)
            now = time.time()
            if goes_on is not None:  # rows whose game goes on record nothing yet: their game is the episode
                ended = ended[~goes_on[ended]]
            for row in ended.tolist():
                self.episode_timestep = int(lengths[row])
                self._episode_done(float(returns[row]), int(lengths[row]), now - started[row], worker=row)
                if self._episodes_done():  # exactly num_episodes: later rows that ended in this step are not
                    self._stopped = True  # recorded (the agent has observed them)
                if self._stopped:
                    break
            # every row that ended starts its next episode, recorded or not (a resumed run goes on from here)
            lengths[ended], returns[ended], started[ended] = 0, 0.0, now
            self._rows = {"states": states, "lengths": lengths, "returns": returns, "started": started}
            # after every step, also the one whose episodes end the run (what it does at the end, it does then)
            if self._step_callback is not None and not self._step_callback(self):
                self._stopped = True
            if self._stopped:
                return
            if self._timesteps_done() or self.agent.should_stop():
                return
            if sleep:
                time.sleep(sleep)

    def _tell_agent(
        self, terminal: np.ndarray, ended: np.ndarray, reward: np.ndarray, final_states: Any, testing: bool
    ) -> None:
        """What the agent learns of a vectorized step: it observes it, or, testing, the rows that ``ended``
        (indices) start their independent recurrent state over."""
        if not testing:
            truncated = len(ended) and (terminal[ended] == 2).any()
            self.agent.observe(terminal=terminal, reward=reward, next_states=final_states if truncated else None)
        elif len(ended):
            self.agent.start_independent_episode(len(terminal), restart=ended)

    # ------------------------------------------------------------------ bookkeeping

    def _episode_done(self, reward: float, length: int, duration: float, worker: int | None = None) -> None:
        self.episode_rewards.append(reward)
        self.episode_timesteps.append(length)
        self.episode_times.append(duration)
        self.global_episode += 1
        if self._bar is not None:
            self._bar.episode(reward, self.global_episode)
        if self._callback is not None and not self._callback(self, self.id if worker is None else worker):
            self._stopped = True

    def _timesteps_done(self) -> bool:
        limit = self._limits[0]
        return limit is not None and self.global_timestep >= limit

    def _episodes_done(self) -> bool:
        limit = self._limits[1]
        return limit is not None and self.global_episode >= limit


def _at_limit(env: VectorEnvironment, limit: np.ndarray, step: VectorStep) -> tuple[np.ndarray, Any, Any, Any]:
    """``step``'s terminal, final states, states and ``goes_on`` once the games whose rows reached the episode step
    limit (``limit``: a mask) are over: a row that did not end is truncated (terminal 2), a row whose game would go
    on after a lost life (its copy went on to the next part) starts a new game instead."""
    terminal, final_states, states, goes_on = step.terminal, step.final_states, step.states, step.goes_on
    cut = limit & (terminal == 0)
    if cut.any():
        terminal, final_states, states = _truncate(env, cut, terminal, final_states, states)
    over = None if goes_on is None else goes_on & limit
    if over is not None and over.any():
        states = _restarted(env, np.flatnonzero(over), states)
        goes_on = goes_on & ~limit
    return terminal, final_states, states, goes_on


def _truncate(env: VectorEnvironment, cut: np.ndarray, terminal, final_states, states):
    """Rows that hit the episode step limit end with terminal 2 and start a new episode."""
    rows = np.flatnonzero(cut)
    terminal = terminal.copy()
    terminal[rows] = 2
    # Copy first: without copy=True the arrays are views into buffers that reset_rows overwrites.
    if isinstance(states, dict):
        final_states = {name: values.copy() for name, values in final_states.items()}
        for name in states:
            final_states[name][rows] = states[name][rows]
    else:
        final_states = final_states.copy()
        final_states[rows] = states[rows]
    return terminal, final_states, _restarted(env, rows, states)


def _restarted(env: VectorEnvironment, rows: np.ndarray, states: Any) -> Any:
    """``states`` (copied first: without copy=True they are views into buffers that ``reset_rows`` overwrites) with
    the first states of new episodes in ``rows``, whose copies are reset."""
    if isinstance(states, dict):
        states = {name: values.copy() for name, values in states.items()}
        fresh = env.reset_rows(rows)
        for name in states:
            states[name][rows] = fresh[name]
        return states
    states = states.copy()
    states[rows] = env.reset_rows(rows)
    return states


def _copied_rows(rows: dict[str, Any]) -> dict[str, Any]:
    """Copies of the arrays of the episodes in progress that a run changes: the states, lengths and returns."""
    states = rows["states"]
    return {
        "states": {k: np.array(v) for k, v in states.items()} if isinstance(states, dict) else np.array(states),
        "lengths": np.array(rows["lengths"]),
        "returns": np.array(rows["returns"]),
    }


def episode_callback(function: Callable[..., Any] | None) -> Callable[[Any, int], Any] | None:
    """``episode_finished(runner, worker_id)``, or the one-argument form ``episode_finished(runner)`` of 2018,
    as a two-argument function (what every runner calls)."""
    if function is None:
        return None
    return (lambda runner, _worker: function(runner)) if takes_one_argument(function) else function


def takes_one_argument(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is a 2018 old-style callback: one required positional parameter, no ``*args``."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [
        p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) == 1 and not any(p.kind is p.VAR_POSITIONAL for p in parameters)


class _ProgressBar:
    """A tqdm bar over timesteps (or episodes) showing episodes, steps/s and the mean return of the last 100."""

    def __init__(self, num_timesteps: int | None, num_episodes: int | None) -> None:
        from tqdm.auto import tqdm

        self.by_episodes = num_timesteps is None and num_episodes is not None
        total = num_episodes if self.by_episodes else num_timesteps
        self.bar = tqdm(total=total, unit="ep" if self.by_episodes else "step", dynamic_ncols=True, smoothing=0.1)
        self.recent: deque[float] = deque(maxlen=100)

    def step(self, count: int) -> None:
        if not self.by_episodes:
            self.bar.update(count)

    def episode(self, reward: float, episode: int) -> None:
        self.recent.append(reward)
        if self.by_episodes:
            self.bar.update(1)
        self.bar.set_postfix(episode=episode, mean_return=f"{np.mean(self.recent):.1f}", refresh=False)

    def close(self) -> None:
        self.bar.close()
