"""The Runner (docs/tensorforce-0.4.md, Runner): limits, truncation at exactly max_episode_timesteps, repeated actions,
callbacks and their worker ids, history, testing/deterministic runs, progress bars, vectorized runs (in this process
and in worker processes), and the single and vectorized paths recording the same history."""

import contextlib
import io

import cloudpickle
import numpy as np
import pytest

from torchforce.agents import create_agent
from torchforce.environments import Environment, VectorEnvironment, make, make_vector
from torchforce.execution import Runner
from torchforce.execution.evaluation import evaluate
from torchforce.spec import SpecError

MLP = [{"type": "dense", "size": 8}]


def random_agent(env):
    return create_agent({"type": "random", "seed": 0}, states=env.states, actions=env.actions)


def ppo_agent(env, **kwargs):
    spec = {"type": "ppo", "network": MLP, "update_mode": {"unit": "episodes", "batch_size": 4}, "seed": 0, **kwargs}
    return create_agent(spec, states=env.states, actions=env.actions)


class Counter(Environment):
    """State ``[episode, t]``; reward ``t`` at step t (so sums are checkable); the episode ends with ``end`` after
    ``length`` steps. Records every action it executes."""

    def __init__(self, length: int = 5, *, end: int = 1) -> None:
        self.length, self.end = length, end
        self.episode, self.t = -1, 0
        self.executed: list[int] = []

    @property
    def states(self):
        return {"type": "float", "shape": (2,)}

    @property
    def actions(self):
        return {"type": "int", "num_actions": 3}

    def _state(self):
        return np.array([self.episode, self.t], dtype=np.float32)

    def reset(self):
        self.episode, self.t = self.episode + 1, 0
        return self._state()

    def execute(self, actions):
        self.t += 1
        self.executed.append(int(np.asarray(actions).item()))
        return self._state(), self.end if self.t >= self.length else 0, float(self.t)


class Recorder:
    """An agent wrapper that records what the runner asks and tells it."""

    def __init__(self, agent):
        self.agent = agent
        self.acted = []  # (states, actions, deterministic, independent)
        self.observed = []  # (terminal, reward, next_states or None)

    def __getattr__(self, name):
        return getattr(self.agent, name)

    def act(self, states, deterministic=False, independent=False):
        actions = self.agent.act(states, deterministic=deterministic, independent=independent)
        self.acted.append((np.array(states, copy=True), np.array(actions, copy=True), deterministic, independent))
        return actions

    def observe(self, terminal, reward, next_states=None):
        copy = None if next_states is None else np.array(next_states, copy=True)
        self.observed.append((np.array(terminal, copy=True), np.array(reward, copy=True), copy))
        return self.agent.observe(terminal, reward, next_states)

    def terminals(self):
        return [terminal.tolist() for terminal, _, _ in self.observed]


# ---------------------------------------------------------------------------------------------- one environment


def test_episodes_are_cut_at_exactly_max_episode_timesteps_as_truncations():
    env = make("gym", gym_id="CartPole-v1")
    agent = Recorder(create_agent({"type": "constant", "action_values": 0}, states=env.states, actions=env.actions))
    runner = Runner(agent, env)
    runner.run(num_episodes=3, max_episode_timesteps=5)
    # CartPole with a constant action falls over in about 9 steps, so a cut at 5 is always a truncation
    assert runner.episode_timesteps == [5, 5, 5]
    ends = [t for t in agent.terminals() if t]
    assert ends == [2, 2, 2]
    assert all(next_states is not None for t, _, next_states in agent.observed if int(t) == 2)


def test_a_cut_episode_reaches_the_agent_as_terminal_2_with_its_final_state_and_counts_in_the_history():
    env = Counter(length=10)
    agent = Recorder(random_agent(env))
    finished = []
    runner = Runner(agent, env)
    runner.run(
        num_episodes=3, max_episode_timesteps=4, episode_finished=lambda r: finished.append(r.episode_timestep) or True
    )
    assert agent.terminals() == [0, 0, 0, 2] * 3
    for episode in range(3):
        _, _, next_states = agent.observed[4 * episode + 3]
        np.testing.assert_array_equal(next_states, [episode, 4])  # the state the cut episode ended in
    assert runner.episode_rewards == [10.0, 10.0, 10.0] and runner.episode_timesteps == [4, 4, 4]
    assert finished == [4, 4, 4] and runner.episode == 3 and agent.agent.episode == 3
    # an environment that ends at the limit itself: a true terminal, not a truncation
    env = Counter(length=4)
    agent = Recorder(random_agent(env))
    Runner(agent, env).run(num_episodes=2, max_episode_timesteps=4)
    assert agent.terminals() == [0, 0, 0, 1] * 2 and all(n is None for _, _, n in agent.observed)
    # an environment that truncates by itself (terminal 2): passed on with its final state
    env = Counter(length=3, end=2)
    agent = Recorder(random_agent(env))
    Runner(agent, env).run(num_episodes=1)
    assert agent.terminals() == [0, 0, 2]
    np.testing.assert_array_equal(agent.observed[-1][2], [0, 3])


def test_repeat_actions_sums_rewards_acts_once_per_group_and_stops_at_terminal():
    env = Counter(length=7)
    agent = Recorder(random_agent(env))
    runner = Runner(agent, env, repeat_actions=3)
    runner.run(num_episodes=1)
    # 7 steps in groups of 3: rewards 1+2+3, 4+5+6, then 7 alone (the terminal stops the group)
    assert [float(reward) for _, reward, _ in agent.observed] == [6.0, 15.0, 7.0]
    assert agent.terminals() == [0, 0, 1]
    assert len(agent.acted) == 3 and len(env.executed) == 7
    actions = [int(a) for _, a, _, _ in agent.acted]
    assert env.executed == [actions[0]] * 3 + [actions[1]] * 3 + [actions[2]]
    # the runner counts acts, like 2018's current_timestep; the episode reward is the sum of all steps
    assert runner.episode_timesteps == [3] and runner.episode_rewards == [28.0] and runner.timestep == 3
    # max_episode_timesteps counts acts too: 2 groups of 3 steps, then a truncation with the state after step 6
    env = Counter(length=100)
    agent = Recorder(random_agent(env))
    Runner(agent, env, repeat_actions=3).run(num_episodes=1, max_episode_timesteps=2)
    assert agent.terminals() == [0, 2] and len(env.executed) == 6
    np.testing.assert_array_equal(agent.observed[-1][2], [0, 6])


def test_repeat_actions_is_checked():
    env = Counter()
    with pytest.raises(ValueError, match="repeat_actions must be >= 1"):
        Runner(random_agent(env), env, repeat_actions=0)
    envs = VectorEnvironment([Counter(), Counter()])
    with pytest.raises(ValueError, match="single environment"):
        Runner(random_agent(envs), envs, repeat_actions=2)


@pytest.mark.parametrize("vectorized", [False, True])
def test_an_agent_whose_actions_are_not_the_environments_is_refused(vectorized):
    # a Pong agent on Breakout failed late inside the emulator; a Breakout agent on Pong never pressed two buttons
    spec = {"type": "minimal", "action_type": "int"}
    env = make_vector(spec, 2) if vectorized else make(spec)
    wider = create_agent("random", states=env.states, actions={"type": "int", "num_actions": 3})
    expected = r"the agent's actions are not the environment's: the agent acts with .*'num_actions': 3.* takes .*: 2"
    with pytest.raises(ValueError, match=expected):
        Runner(wider, env)
    other = create_agent("random", states=env.states, actions={"type": "float", "shape": 1})
    with pytest.raises(ValueError, match="the agent's actions are not the environment's"):
        Runner(other, env)
    if not vectorized:  # evaluation too
        with pytest.raises(ValueError, match="the agent's actions are not the environment's"):
            evaluate(wider, env, episodes=1)
    same = create_agent("random", states=env.states, actions=env.actions)
    Runner(same, env).run(num_episodes=1)


def test_limits_and_history():
    env = make("minimal")
    runner = Runner(
        random_agent(env), env, history={"episode_rewards": [1.0], "episode_timesteps": [10], "episode_times": [0.1]}
    )
    runner.run(num_episodes=4)
    assert len(runner.episode_rewards) == 5 and runner.episode == 5
    runner.run(num_timesteps=25)
    assert runner.timestep == 10 + 40 + 25


def test_history_continues_the_counts_and_the_lists():
    history = {"episode_rewards": [3.0, 4.0], "episode_timesteps": [5, 7], "episode_times": [0.5, 0.25]}
    env = Counter(length=3)
    seen = []
    runner = Runner(random_agent(env), env, history=history)
    assert (runner.episode, runner.timestep) == (2, 12)
    runner.run(num_episodes=2, episode_finished=lambda r: seen.append((r.episode, r.timestep)) or True)
    assert seen == [(3, 15), (4, 18)]  # counts go on from the history; the limit is relative to it
    assert runner.episode_rewards == [3.0, 4.0, 6.0, 6.0] and runner.episode_timesteps == [5, 7, 3, 3]
    assert runner.episode_times[:2] == [0.5, 0.25] and len(runner.episode_times) == 4
    assert history["episode_rewards"] == [3.0, 4.0]  # the caller's lists are copied, not appended to
    # a new runner from this one's history goes on where it stopped
    again = Runner(random_agent(env), env, history=runner.state_dict())
    assert (again.episode, again.timestep, again.episode_rewards) == (4, 18, runner.episode_rewards)
    again.run(num_timesteps=4)  # one more episode of 3 and one step of the next, which is not recorded
    assert (again.episode, again.timestep) == (5, 22)
    runner.reset()
    assert (runner.episode, runner.timestep, runner.episode_rewards) == (0, 0, [])


def test_falsy_callback_return_stops_and_one_argument_form_works():
    env = make("minimal")
    runner = Runner(random_agent(env), env)
    seen = []
    runner.run(num_episodes=10, episode_finished=lambda r: seen.append(r.episode) or len(seen) < 3)
    assert seen == [1, 2, 3]
    calls = []
    runner.run(num_episodes=2, episode_finished=lambda r, worker: calls.append(worker) or True)
    assert calls == [0, 0]
    calls = []
    Runner(random_agent(env), env, id_=7).run(num_episodes=2, episode_finished=lambda r, w: calls.append(w) or True)
    assert calls == [7, 7]


def test_deprecated_keywords_still_work():
    env = make("minimal")
    runner = Runner(random_agent(env), env)
    with pytest.warns(DeprecationWarning):
        runner.run(episodes=2)
    assert runner.episode == 2
    with pytest.warns(DeprecationWarning):
        runner.run(timesteps=5)
    assert runner.timestep == 25
    with pytest.warns(DeprecationWarning, match="summary_report"):
        runner.run(num_episodes=1, summary_report=print, summary_interval=10)


def test_a_run_stopped_inside_an_episode_does_not_record_it():
    env = Counter(length=10)
    runner = Runner(random_agent(env), env)
    runner.run(num_timesteps=6)
    assert (runner.timestep, runner.episode, runner.episode_rewards) == (6, 0, [])
    runner.run(num_timesteps=14)  # a new run starts a new episode
    assert runner.episode_timesteps == [10] and runner.timestep == 20


def test_testing_mode_does_not_learn():
    env = make("minimal")
    agent = create_agent(
        {"type": "ppo", "network": MLP, "update_mode": {"unit": "episodes", "batch_size": 1}},
        states=env.states,
        actions=env.actions,
    )
    Runner(agent, env).run(num_episodes=3, testing=True)
    assert agent.updates == 0 and agent.timestep == 0


@pytest.mark.parametrize("vectorized", [False, True])
def test_testing_runs_carry_recurrent_state_through_each_episode(vectorized, monkeypatch):
    """Testing acts independently; a recurrent policy still needs its state carried from step to step and
    started over (row by row, when vectorized) at each new episode, as evaluate() does."""
    if vectorized:
        env = VectorEnvironment([make("minimal", episode_length=3, seed=0), make("minimal", episode_length=5, seed=1)])
    else:
        env = make("minimal", episode_length=4, seed=0)
    network = [{"type": "dense", "size": 8}, {"type": "internal_lstm", "size": 4}]
    agent = ppo_agent(env, network=network)
    seen = []  # per act: which rows got a zero recurrent state
    original = agent.policy.act_forward

    def act(states, internals, deterministic):
        (state,) = internals.values()
        seen.append(state.flatten(1).abs().sum(1).eq(0).tolist())
        return original(states, internals, deterministic)

    monkeypatch.setattr(agent.policy, "act_forward", act)
    Runner(agent, env).run(num_timesteps=16 if vectorized else 12, testing=True)
    if not vectorized:  # episodes of 4 steps: zero state at the first step of each
        assert seen == [[True], [False], [False], [False]] * 3
    else:  # rows restart after 3 and 5 steps
        fresh = [[t % 3 == 0, t % 5 == 0] for t in range(8)]
        assert seen == fresh


@pytest.mark.parametrize("vectorized", [False, True])
def test_testing_and_deterministic_runs_leave_the_agent_as_it_was(vectorized):
    env = VectorEnvironment([make("minimal", seed=i) for i in range(3)]) if vectorized else make("minimal", seed=0)
    agent = Recorder(ppo_agent(env))
    runner = Runner(agent, env)
    runner.run(num_episodes=2)  # some experience in memory, no update yet (4 episodes per update)
    counters = (agent.timestep, agent.episode, agent.updates, len(agent.memory))
    assert counters[0] > 0 and counters[3] > 0 and agent.updates == 0
    agent.acted.clear(), agent.observed.clear()
    runner.run(num_episodes=3, testing=True, deterministic=True)
    assert (agent.timestep, agent.episode, agent.updates, len(agent.memory)) == counters
    assert agent.observed == [] and agent.acted
    assert all(deterministic and independent for _, _, deterministic, independent in agent.acted)
    for states, actions, _, _ in agent.acted:  # the greedy actions of the policy
        np.testing.assert_array_equal(agent.agent.act(states, deterministic=True, independent=True), actions)
    assert runner.episode >= 5
    # deterministic alone still learns: it only turns sampling and exploration off
    agent.acted.clear()
    runner.run(num_episodes=3, deterministic=True)
    assert agent.episode >= counters[1] + 3 and agent.updates >= 1
    assert all(deterministic and not independent for _, _, deterministic, independent in agent.acted)


@pytest.mark.parametrize("vectorized", [False, True])
def test_progress_bar_works_when_output_is_not_a_terminal(vectorized):
    env = VectorEnvironment([make("minimal"), make("minimal")]) if vectorized else make("minimal")
    runner = Runner(random_agent(env), env)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        runner.run(num_timesteps=40, progress=True)
        runner.run(num_episodes=2, progress=True)
        runner.run(num_episodes=1, max_episode_timesteps=3, progress=True, testing=True)
    assert runner.timestep >= 40 + 20 and "mean_return" in err.getvalue()


# ---------------------------------------------------------------------------------------------- N environments


def test_vectorized_runner_makes_one_act_per_step_and_counts_every_row():
    envs = VectorEnvironment([make("minimal") for _ in range(4)])
    agent = create_agent(
        {
            "type": "ppo",
            "network": MLP,
            "update_mode": {"unit": "timesteps", "batch_size": 16},
            "memory": {"type": "latest", "capacity": 64},
            "optimization_steps": 5,
            "seed": 0,
        },
        states=envs.states,
        actions=envs.actions,
    )
    runner = Runner(agent, envs)
    runner.run(num_timesteps=80)
    assert runner.timestep == 80 and agent.timestep == 80
    assert runner.episode == 8  # 4 rows x 20 steps / episodes of 10
    assert agent.updates == 5


def test_a_list_of_environments_becomes_a_vector_environment():
    runner = Runner(random_agent(make("minimal")), [make("minimal"), make("minimal")])
    assert runner.vectorized and runner.environment.num_environments == 2
    runner.run(num_episodes=4)
    assert runner.episode_timesteps == [10, 10, 10, 10] and runner.timestep == 40  # 2 rows x 20 steps


def test_vectorized_callbacks_get_the_row_as_worker_id():
    envs = VectorEnvironment([Counter(length=2), Counter(length=3), Counter(length=5)])
    seen = []

    def episode_finished(runner, worker):
        seen.append((worker, runner.episode_timestep, runner.episode_rewards[-1]))
        return True

    runner = Runner(random_agent(envs), envs)
    runner.run(num_timesteps=18, episode_finished=episode_finished)  # 6 steps of 3 rows
    # rows end at steps 2, 4, 6 (row 0), 3, 6 (row 1) and 5 (row 2); rows of one step in row order
    assert [w for w, _, _ in seen] == [0, 1, 0, 2, 0, 1]
    assert [length for _, length, _ in seen] == [2, 3, 2, 5, 2, 3] == runner.episode_timesteps
    assert [reward for _, _, reward in seen] == [3.0, 6.0, 3.0, 15.0, 3.0, 6.0] == runner.episode_rewards
    # the one-argument form works here too, and a falsy return stops at once
    calls = []
    runner.run(num_timesteps=30, episode_finished=lambda r: calls.append(r.episode) or len(calls) < 2)
    assert calls == [7, 8] and runner.episode == 8


def test_vectorized_runner_stops_at_exactly_num_episodes():
    envs = VectorEnvironment([Counter(length=2) for _ in range(3)])  # all rows end together
    runner = Runner(random_agent(envs), envs)
    runner.run(num_episodes=4)
    assert runner.episode == 4 and runner.timestep == 12


def test_rows_that_ended_past_num_episodes_start_over_for_a_resumed_run():
    """Two rows end on the same step and the run stops after the first's episode: the second's episode is over
    too (the agent observed its end), so a resumed run counts its next episode from zero."""
    envs = VectorEnvironment([Counter(length=3) for _ in range(2)])
    runner = Runner(random_agent(envs), envs)
    runner.run(num_episodes=1)
    runner.run(num_episodes=3, resume=True)
    assert runner.episode_timesteps == [3] * 4 and runner.episode_rewards == [6.0] * 4  # rewards 1 + 2 + 3


def test_vectorized_runner_truncates_rows_at_the_step_limit():
    envs = VectorEnvironment([make("gym", gym_id="CartPole-v1") for _ in range(3)])
    envs.seed(0)
    agent = Recorder(random_agent(envs))
    runner = Runner(agent, envs)
    runner.run(num_episodes=6, max_episode_timesteps=4)
    assert all(t <= 4 for t in runner.episode_timesteps)
    truncated = sum(int((t == 2).sum()) for t, _, _ in agent.observed)
    assert truncated == sum(1 for t in runner.episode_timesteps if t == 4)  # CartPole never falls within 4 steps
    assert truncated == 6 and runner.episode_timesteps == [4] * 6


def minimal_draws(seed: int, count: int) -> list[np.float32]:
    """The states a seeded Minimal environment produces, in order (one draw per reset and per step)."""
    rng = np.random.default_rng(seed)
    return [np.float32(rng.uniform(-1.0, 1.0)) for _ in range(count)]


@pytest.mark.parametrize("mode", ["subprocess", "sync"])
def test_vectorized_truncation_in_worker_processes_passes_the_true_final_states(mode):
    envs = make_vector({"type": "minimal", "episode_length": 10}, 3, mode=mode, seed=7, num_workers=2)
    try:
        agent = Recorder(random_agent(envs))
        workers = []
        runner = Runner(agent, envs)
        runner.run(num_episodes=6, max_episode_timesteps=4, episode_finished=lambda r, w: workers.append(w) or True)
    finally:
        envs.close()
    assert runner.episode_timesteps == [4] * 6 and workers == [0, 1, 2, 0, 1, 2]
    assert agent.terminals() == [[0, 0, 0]] * 3 + [[2, 2, 2]] + [[0, 0, 0]] * 3 + [[2, 2, 2]]
    for row in range(3):
        draws = minimal_draws(7 + row, 10)
        # acted on: draws 0-3, then (the cut row is reset: draw 5) draws 5-8; draws 4 and 9 are the final states
        assert [float(states[row, 0]) for states, _, _, _ in agent.acted] == [
            float(draws[i]) for i in (0, 1, 2, 3, 5, 6, 7, 8)
        ]
        for step, final in ((3, 4), (7, 9)):
            _, _, next_states = agent.observed[step]
            assert next_states[row, 0] == draws[final]
    assert all(n is None for t, _, n in agent.observed if not t.any())


def test_single_and_vectorized_paths_record_the_same_history():
    histories = []
    for vectorized in (False, True):
        env = VectorEnvironment([Counter(length=6)]) if vectorized else Counter(length=6)
        agent = Recorder(random_agent(env))
        runner = Runner(agent, env)
        runner.run(num_episodes=3, max_episode_timesteps=4)  # episodes of 6 cut at 4
        runner.run(num_timesteps=8)  # a whole episode of 6 (no limit now), then 2 steps that are not recorded
        terminals = [int(np.asarray(t).reshape(-1)[0]) for t in agent.terminals()]
        histories.append(
            (
                runner.episode_rewards,
                runner.episode_timesteps,
                runner.episode,
                runner.timestep,
                terminals,
                agent.agent.episode,
            )
        )
    assert histories[0] == histories[1]
    assert histories[0] == ([10.0] * 3 + [21.0], [4, 4, 4, 6], 4, 20, [0, 0, 0, 2] * 3 + [0] * 5 + [1, 0, 0], 4)


@pytest.mark.parametrize("vectorized", [False, True])
def test_step_finished_is_called_after_every_step_and_a_falsy_return_stops(vectorized):
    env = VectorEnvironment([Counter(length=3), Counter(length=3)]) if vectorized else Counter(length=3)
    runner = Runner(random_agent(env), env)
    seen = []

    def step_finished(r):
        seen.append((r.timestep, r.episode))
        return r.timestep < (10 if vectorized else 5)

    runner.run(num_episodes=100, step_finished=step_finished)
    if vectorized:  # 2 rows per step; both rows' episodes are recorded before the step callback
        assert seen == [(2, 0), (4, 0), (6, 2), (8, 2), (10, 2)]
    else:
        assert seen == [(1, 0), (2, 0), (3, 1), (4, 1), (5, 1)]
    assert runner.timestep == seen[-1][0]


def test_a_paused_vectorized_run_resumes_exactly():
    def fresh():
        envs = VectorEnvironment([Counter(length=4), Counter(length=7)])
        return envs, Runner(random_agent(envs), envs)

    envs, whole = fresh()
    whole.run(num_timesteps=30)
    envs, first = fresh()
    first.run(num_timesteps=12)  # paused in the middle of both rows' episodes
    state, environments = first.state_dict(), envs.get_state()
    envs, second = fresh()
    envs.set_state(environments)
    restored = [copy.episode for copy in cloudpickle.loads(environments[0])]
    assert [copy.episode for copy in envs.environments] == restored != [-1, -1]  # not the fresh copies it closed
    second.load_state_dict(state)
    second.run(num_timesteps=18, resume=True)
    assert second.episode_rewards == whole.episode_rewards and second.episode_timesteps == whole.episode_timesteps
    assert (second.timestep, second.episode) == (whole.timestep, whole.episode) == (30, 5)
    assert state["rows"]["lengths"].tolist() == first.state_dict()["rows"]["lengths"].tolist()  # the state as saved
    with pytest.raises(ValueError, match="resume"):
        Runner(random_agent(Counter()), Counter()).run(num_timesteps=1, resume=True)


@pytest.mark.parametrize("vectorized", [False, True])
@pytest.mark.parametrize("ending", ["num_episodes", "episode_finished"])
def test_step_finished_is_called_on_the_step_whose_episode_ends_the_run(vectorized, ending):
    """What a caller does after each step (the client evaluates and checkpoints there) it does after the last one
    too, whatever ends the run: an episode limit or a falsy episode_finished as much as a timestep limit."""
    env = VectorEnvironment([Counter(length=3), Counter(length=5)]) if vectorized else Counter(length=3)
    runner = Runner(random_agent(env), env)
    steps: list[int] = []
    limits = {"num_episodes": 2} if ending == "num_episodes" else {"num_episodes": 100}
    stop_after_two = None if ending == "num_episodes" else (lambda r, *_: r.episode < 2)
    runner.run(**limits, episode_finished=stop_after_two, step_finished=lambda r: steps.append(r.timestep) or True)
    assert runner.episode == 2
    assert steps[-1] == runner.timestep == (10 if vectorized else 6)  # the step that ended the second episode
    assert steps == list(range(2 if vectorized else 1, runner.timestep + 1, 2 if vectorized else 1))


@pytest.mark.parametrize("vectorized", [False, True])
def test_a_run_of_no_steps_or_no_episodes_takes_no_step(vectorized):
    env = VectorEnvironment([Counter(), Counter()]) if vectorized else Counter()
    runner = Runner(random_agent(env), env)
    for limits in ({"num_timesteps": 0}, {"num_episodes": 0}, {"num_timesteps": 0, "num_episodes": 3}):
        runner.run(**limits)
        assert (runner.timestep, runner.episode) == (0, 0), limits  # (it took a step, or played an episode)
    with pytest.raises(SpecError, match="num_timesteps"):
        runner.run(num_timesteps=-1)
