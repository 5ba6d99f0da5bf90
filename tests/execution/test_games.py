"""Games of several episodes (an Atari game under episodic life: one episode of the agent a life): the agent's
episodes end at each lost life, while the Runner records, counts and cuts whole games, in its single and vectorized
paths, in this process and in worker processes, and across a resume."""

import collections
import json

import numpy as np
import pytest

from tests.tiny_environments import OneNumber
from torchforce.agents import create_agent
from torchforce.environments import VectorEnvironment, make_vector
from torchforce.execution import Runner


class Lives(OneNumber):
    """A game of ``lives`` parts of ``length`` steps. Each part ends with terminal 1, and the game goes on after all
    but the last (``game_goes_on``); its reset then starts the next part, any other reset a new game. A step of part
    p (from 1) is worth p, so a whole game scores ``length * (1 + ... + lives)``."""

    def __init__(self, lives: int = 3, length: int = 4) -> None:
        self.lives, self.length = lives, length
        self.part, self.t, self.life_lost = 0, 0, False

    def reset(self):
        self.part = self.part + 1 if self.life_lost else 1
        self.t, self.life_lost = 0, False
        return np.array([self.part], dtype=np.float32)

    def execute(self, action):
        self.t += 1
        ended = self.t == self.length
        self.life_lost = ended and self.part < self.lives
        return np.array([self.part], dtype=np.float32), int(ended), float(self.part)

    @property
    def game_goes_on(self) -> bool:
        return self.life_lost


GAME = 4 * (1 + 2 + 3)  # a whole game of Lives(): 3 parts of 4 steps


def watched_agent(env):
    """A random agent whose observed terminals are kept in ``agent.terminals`` (one array a call)."""
    agent = create_agent({"type": "random", "seed": 0}, states=env.states, actions=env.actions)
    agent.terminals = []
    observe = agent.observe

    def watching(terminal, reward, next_states=None):
        agent.terminals.append(np.array(terminal).reshape(-1))
        return observe(terminal=terminal, reward=reward, next_states=next_states)

    agent.observe = watching
    return agent


def test_one_environment_records_games_and_the_agent_observes_lives():
    env = Lives()
    agent = watched_agent(env)
    runner = Runner(agent, env)
    runner.run(num_episodes=2)
    assert runner.episode_rewards == [GAME, GAME] and runner.episode_timesteps == [12, 12]
    assert runner.global_episode == 2 and runner.global_timestep == 24
    terminals = np.concatenate(agent.terminals)
    assert np.flatnonzero(terminals).tolist() == [3, 7, 11, 15, 19, 23]  # every part ended the agent's episode
    assert agent.episode == 6


@pytest.mark.parametrize("mode", ["sync", "subprocess"])
def test_vectorized_rows_record_games_and_the_agent_observes_lives(mode):
    workers = 2 if mode != "sync" else None
    with VectorEnvironment(factory=Lives, num_environments=2, mode=mode, num_workers=workers) as env:
        agent = watched_agent(env)
        runner = Runner(agent, env)
        runner.run(num_timesteps=2 * 30)
        # 30 steps a row: two whole games each (the third game's 6 steps in progress are not recorded)
        assert runner.episode_rewards == [GAME] * 4 and runner.episode_timesteps == [12] * 4
        terminals = np.stack(agent.terminals)
        assert terminals.shape == (30, 2) and (np.flatnonzero(terminals[:, 0]) == np.arange(3, 30, 4)).all()
        assert agent.episode == 2 * 7
        assert runner.state_dict()["rows"]["returns"].tolist() == [4 + 2 * 2, 4 + 2 * 2]  # the games in progress


def test_max_episode_timesteps_cuts_the_game_and_num_episodes_counts_games():
    env = Lives()
    agent = watched_agent(env)
    runner = Runner(agent, env)
    runner.run(num_episodes=2, max_episode_timesteps=6)
    # each game: part 1 (4 steps, terminal 1 at its end), then 2 steps of part 2, cut there with terminal 2
    assert runner.episode_rewards == [4 + 2 * 2] * 2 and runner.episode_timesteps == [6, 6]
    assert np.concatenate(agent.terminals).tolist() == [0, 0, 0, 1, 0, 2] * 2
    with VectorEnvironment(factory=Lives, num_environments=2) as vector:
        agent = watched_agent(vector)
        runner = Runner(agent, vector)
        runner.run(num_episodes=3, max_episode_timesteps=6)
        assert runner.episode_rewards == [8.0] * 3 and runner.episode_timesteps == [6] * 3
        assert np.stack(agent.terminals)[:, 0].tolist() == [0, 0, 0, 1, 0, 2] * 2


def test_a_life_lost_at_the_step_limit_ends_the_game_and_the_next_one_starts_anew():
    env = Lives()
    agent = watched_agent(env)
    runner = Runner(agent, env)
    runner.run(num_episodes=2, max_episode_timesteps=4)  # the first part ends at the limit: so does its game
    assert runner.episode_rewards == [4.0, 4.0] and runner.episode_timesteps == [4, 4]
    assert np.concatenate(agent.terminals).tolist() == [0, 0, 0, 1] * 2  # the agent observed the lost lives
    with VectorEnvironment(factory=Lives, num_environments=2) as vector:
        runner = Runner(watched_agent(vector), vector)
        runner.run(num_episodes=4, max_episode_timesteps=4)
        assert runner.episode_rewards == [4.0] * 4 and runner.episode_timesteps == [4] * 4  # new games: part 1 again


def test_a_run_that_stops_as_a_life_ends_leaves_no_game_half_continued():
    env = Lives()
    runner = Runner(watched_agent(env), env)
    runner.run(num_timesteps=4)  # ends on the step that ended the first part
    runner.run(num_episodes=1)  # a new game from its start, recorded whole
    assert runner.episode_rewards == [GAME] and runner.episode_timesteps == [12]


def test_a_resumed_vectorized_run_goes_on_with_the_games_in_progress():
    def records(pause_at):
        with VectorEnvironment(factory=Lives, num_environments=2) as env:
            runner = Runner(watched_agent(env), env)
            if pause_at is None:
                runner.run(num_timesteps=2 * 40)
            else:
                runner.run(num_timesteps=2 * pause_at)
                state = runner.state_dict()
                runner = Runner(watched_agent(env), env)
                runner.load_state_dict(state)
                runner.run(num_timesteps=2 * (40 - pause_at), resume=True)
            return runner.episode_rewards, runner.episode_timesteps

    whole = records(None)
    assert whole == ([GAME] * 6, [12] * 6)
    assert records(7) == whole  # paused in a game's second part
    assert records(12) == whole  # paused as the games ended


@pytest.mark.parametrize("mode", ["sync", "subprocess"])
def test_breakout_runner_returns_are_the_monitors_games(tmp_path, mode):
    """The Runner's episodes on Breakout (five lives a game) are the real games that the monitor below the life
    wrapper records, score for score."""
    spec = {"type": "atari", "game": "Breakout", "monitor": str(tmp_path)}
    with make_vector(spec, 2, mode=mode, seed=3) as env:
        agent = watched_agent(env)
        runner = Runner(agent, env)
        runner.run(num_timesteps=2 * 1500)
    games = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert len(games) >= 4 and len(runner.episode_rewards) == len(games)
    assert collections.Counter(runner.episode_rewards) == collections.Counter(game["reward"] for game in games)
    lives = int(np.count_nonzero(np.stack(agent.terminals)))
    assert lives >= 4 * len(games)  # the agent's episodes: a life each (five a game, some in progress at the end)


def test_one_atari_environment_through_the_gym_adapter_records_the_monitors_games(tmp_path):
    """``atari_env``'s Gymnasium environment taken by the Gym adapter has games too, and the single path records
    them as the monitor does."""
    from torchforce.environments import Environment
    from torchforce.environments.atari import atari_env

    env = Environment.from_spec(atari_env("Breakout", monitor=str(tmp_path)))
    env.seed(5)
    agent = watched_agent(env)
    runner = Runner(agent, env)
    runner.run(num_timesteps=2500)
    games = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert len(games) >= 3 and runner.episode_rewards == [game["reward"] for game in games]
    assert int(np.count_nonzero(np.concatenate(agent.terminals))) >= 4 * len(games)
    env.close()
