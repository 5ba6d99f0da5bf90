"""update_mode.updates: several updates each time one is due, each on a batch of its own (0.3.5's repeat_update,
SB3's gradient_steps), for the agents that sample a replay memory; on-policy agents refuse it."""

from collections import Counter

import numpy as np
import pytest

from tests.agents.test_dqn import run
from tests.execution.test_threaded import recorded_syncs
from torchforce.agents import create_agent
from torchforce.agents.update_mode import Schedule, UpdateMode
from torchforce.environments import make
from torchforce.spec import SpecError

INT = make("minimal", action_type="int", episode_length=5)
FLOAT = make("minimal", action_type="float", episode_length=5)
NETWORK = [{"type": "dense", "size": 8}]


def mode(**keys):
    return UpdateMode.from_spec({"unit": "timesteps", "batch_size": 4, **keys}, {})


def test_each_threshold_crossed_is_updates_updates():
    schedule = Schedule(mode(frequency=2, updates=3))
    assert schedule.next_at == 4
    assert schedule.due(3) == 0
    assert schedule.due(4) == 3
    assert schedule.due(9) == 6  # thresholds 6 and 8 crossed at once (many environments): 2 x 3
    assert schedule.next_at == 10
    assert Schedule(mode(frequency=2)).due(4) == 1  # the default: one


@pytest.mark.parametrize(
    ("text", "message"),
    [(0, "expected an integer >= 1, got 0"), ("2", 'not an integer; expected an integer >= 1, got "2"')],
)
def test_updates_must_be_a_positive_integer(text, message):
    with pytest.raises(SpecError, match=message) as raised:
        mode(updates=text)
    assert raised.value.path == "update_mode.updates"


@pytest.mark.parametrize(
    ("kind", "env", "options"),
    [
        ("dqn", INT, {"target_sync_frequency": 2}),
        ("naf", FLOAT, {"target_sync_frequency": 2, "target_update_weight": 0.5}),
        ("ddpg", FLOAT, {"target_sync_frequency": 2, "target_update_weight": 0.5}),
    ],
)
def test_replay_agents_make_that_many_updates_each_on_a_fresh_batch(kind, env, options):
    agent = create_agent(
        {
            "type": kind,
            "network": NETWORK,
            "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 2, "first_update": 8, "updates": 3},
            "memory": {"type": "replay", "capacity": 100},
            "seed": 0,
            **options,
        },
        states=env.states,
        actions=env.actions,
    )
    retrieve, update, sync = agent._retrieve, agent._update, agent.target_sync.sync
    batches: dict[int, list[np.ndarray]] = {}
    synced: Counter[int] = Counter()

    def retrieving():
        batch = retrieve()
        batches.setdefault(agent.timestep, []).append(batch.flat()["states/state"].cpu().numpy().copy())
        return batch

    def syncing(time):
        done = sync(time)
        synced[time] += done
        return done

    agent._retrieve, agent.target_sync.sync = retrieving, syncing
    updated: Counter[int] = Counter()

    def counting(batch):
        updated[agent.timestep] += 1
        return update(batch)

    agent._update = counting
    run(agent, env, 20)
    # thresholds at 8, 10, ..., 20: three updates at each, each after a retrieval of its own
    assert dict(updated) == {timestep: 3 for timestep in range(8, 21, 2)}
    assert {timestep: len(drawn) for timestep, drawn in batches.items()} == dict(updated)
    assert agent.updates == 21
    # the three batches of a timestep are drawn apart (seeded: the same draws every run), not one batch three times
    assert all(
        not np.array_equal(drawn[0], drawn[1]) or not np.array_equal(drawn[1], drawn[2]) for drawn in batches.values()
    )
    # the target follows every target_sync_frequency timesteps, once at a timestep however many updates it has
    assert {timestep for timestep, count in synced.items() if count} == set(range(8, 21, 2))
    assert max(synced.values()) == 1


@pytest.mark.parametrize("kind", ["ppo", "vpg", "trpo", "dqn_nstep"])
def test_on_policy_agents_refuse_more_than_one_update(kind):
    unit = "episodes" if kind == "dqn_nstep" else "timesteps"
    with pytest.raises(SpecError) as raised:
        create_agent(
            {"type": kind, "network": NETWORK, "update_mode": {"unit": unit, "batch_size": 4, "updates": 2}},
            states=INT.states,
            actions=INT.actions,
        )
    assert raised.value.path == "agent.update_mode.updates"
    assert "learns once from each batch it collected" in str(raised.value)
    assert "epochs or optimization_steps" in str(raised.value)


def test_the_0_3_5_name_points_to_updates():
    spec = {"type": "dqn", "network": NETWORK, "update_mode": {"batch_size": 4, "repeat_update": 2}}
    with pytest.raises(SpecError, match="'repeat_update' is the 0.3.5 name; use 'updates'"):
        create_agent(spec, states=INT.states, actions=INT.actions)
    with pytest.raises(SpecError, match="use 'update_mode.updates'"):
        create_agent({"type": "dqn", "network": NETWORK, "repeat_update": 2}, states=INT.states, actions=INT.actions)


@pytest.mark.parametrize(("sync_frequency", "expected_every"), [(1, 1), (10, 10)])
def test_with_many_rows_the_target_follows_every_target_sync_frequency_timesteps(sync_frequency, expected_every):
    """Four environments: an act stores four timesteps and crosses four thresholds (frequency 1), each an update
    of its own standing for its own timestep, so the target follows every ``target_sync_frequency`` timesteps as
    with one environment (before: at most once an act, a soft update of weight w every 4 timesteps)."""
    from torchforce.environments import VectorEnvironment
    from torchforce.execution import Runner

    envs = VectorEnvironment([make("minimal", action_type="float", episode_length=5, seed=s) for s in range(4)])
    agent = create_agent(
        {
            "type": "ddpg",
            "network": NETWORK,
            "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 1, "first_update": 8},
            "memory": {"type": "replay", "capacity": 200},
            "target_sync_frequency": sync_frequency,
            "target_update_weight": 0.5,
            "seed": 0,
        },
        states=envs.states,
        actions=envs.actions,
    )
    synced = recorded_syncs(agent)
    Runner(agent, envs).run(num_timesteps=200)
    assert agent.updates >= 180  # one update per stored timestep from the 8th on
    assert np.diff(synced).tolist() == [expected_every] * (len(synced) - 1)
    assert len(synced) >= agent.updates // expected_every - 1
