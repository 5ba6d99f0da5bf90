"""The ThreadedRunner: worker agents sharing one model, each in its own environment and thread; global limits and
history, per-worker stops, saving, errors, the 2018 helpers and aliases, and a shared model that learns."""

import threading

import numpy as np
import pytest
import torch

from tests.tiny_environments import OneNumber
from torchforce.agents import create_agent
from torchforce.environments import Environment, make
from torchforce.execution import ThreadedRunner, WorkerAgentGenerator, clone_worker_agent
from torchforce.execution.sharing import share_model
from torchforce.execution.threaded import ThreadedRunner as Threaded

NETWORK = [{"type": "dense", "size": 8}]
VPG = {
    "type": "vpg",
    "network": NETWORK,
    "update_mode": {"unit": "episodes", "batch_size": 2},
    "optimizer": {"type": "adam", "learning_rate": 0.05},
    "baseline_mode": "states",
    "baseline": {"type": "mlp", "sizes": [8]},
    "gae_lambda": 0.9,
    "seed": 0,
}


def workers(spec=VPG, count=3, action_type="int", **env_options):
    environments = [make("minimal", action_type=action_type, seed=index, **env_options) for index in range(count)]
    main = create_agent(spec, states=environments[0].states, actions=environments[0].actions)
    config = {key: value for key, value in spec.items() if key not in ("type", "network")}
    return clone_worker_agent(main, count, environments[0], spec["network"], config), environments


@pytest.mark.parametrize(
    "spec, action_type",
    [
        (VPG, "int"),
        ({"type": "ppo", "network": NETWORK, "update_mode": {"unit": "episodes", "batch_size": 2}}, "int"),
        ({"type": "dqn", "network": NETWORK, "memory": {"type": "replay", "capacity": 64}}, "int"),
        ({"type": "ddpg", "network": NETWORK, "memory": {"type": "replay", "capacity": 64}}, "bounded"),
        ({"type": "naf", "network": NETWORK, "memory": {"type": "replay", "capacity": 64}}, "float"),
        ({"type": "trpo", "network": NETWORK, "update_mode": {"unit": "episodes", "batch_size": 2}}, "int"),
    ],
)
def test_workers_share_the_model_and_optimizers_and_keep_their_own_memory(spec, action_type):
    agents, _ = workers({**spec, "seed": 3}, action_type=action_type)
    main = agents[0]
    for worker in agents[1:]:
        for name, module in main.trainable_modules().items():
            assert worker.trainable_modules()[name] is module
        for name, optimizer in main.optimizers().items():
            assert worker.optimizers()[name] is optimizer
        assert worker.memory is not main.memory and worker.update_lock is main.update_lock is not None
    assert [agent.seed for agent in agents] == [3, 4, 5]


PPO_EPOCHS = {  # as ppo_cartpole: minibatch epochs and a baseline network of its own (one backward pass for both)
    "type": "ppo",
    "network": NETWORK,
    "update_mode": {"unit": "timesteps", "batch_size": 16, "frequency": 16},
    "memory": {"type": "latest", "capacity": 64},
    "epochs": 2,
    "minibatch_size": 8,
    "baseline_mode": "states",
    "baseline": {"type": "mlp", "sizes": [8]},
}


@pytest.mark.parametrize(
    "spec, action_type",
    [
        (VPG, "int"),
        (PPO_EPOCHS, "int"),
        ({"type": "dqn", "network": NETWORK, "memory": {"type": "replay", "capacity": 64}}, "int"),
        ({"type": "ddpg", "network": NETWORK, "memory": {"type": "replay", "capacity": 64}}, "bounded"),
        ({"type": "naf", "network": NETWORK, "memory": {"type": "replay", "capacity": 64}}, "float"),
    ],
    ids=["vpg", "ppo-epochs", "dqn", "ddpg", "naf"],
)
def test_what_a_worker_other_than_the_first_learns_moves_the_shared_model(spec, action_type):
    """Every worker's updates step the shared optimizers on the shared parameters (PPO with epochs kept its own two
    optimizers in a tuple, which sharing did not replace: only the first worker's experience trained the model)."""
    agents, environments = workers({**spec, "seed": 3}, action_type=action_type)
    main, worker, environment = agents[0], agents[1], environments[1]
    before = main.get_parameters()
    state = environment.reset()
    while worker.updates < 2:
        state, terminal, reward = environment.execute(worker.act(state))
        worker.observe(terminal=terminal, reward=reward)
        if terminal:
            state = environment.reset()
    after = main.get_parameters()
    assert main.updates == 0 and any(not torch.equal(before[name], after[name]) for name in before)
    for name in ("policy", "baseline"):  # each module the shared optimizers step
        moved = [key for key in before if key.startswith(f"{name}.") and not torch.equal(before[key], after[key])]
        assert moved or not any(key.startswith(f"{name}.") for key in before), name


def test_an_agent_keeping_an_optimizer_where_sharing_cannot_replace_it_is_refused():
    agents, environments = workers(count=1)
    other = create_agent(VPG, states=environments[0].states, actions=environments[0].actions)
    other._cached = (other.optimizer,)
    with pytest.raises(TypeError, match=r"keeps one of its modules or optimizers in '_cached' \(a tuple\)"):
        share_model(other, agents[0])


def test_episode_and_timestep_limits_are_global():
    agents, environments = workers()
    runner = ThreadedRunner(agents, environments)
    runner.run(num_episodes=30)
    assert runner.global_episode == 30 == len(runner.episode_rewards) == len(runner.episode_times)
    assert sum(agent.episode for agent in agents) >= 30  # episodes past the limit are observed, not recorded
    before = runner.global_timestep  # 300 steps, plus what workers still in an episode took meanwhile
    assert before >= 300
    runner.run(num_timesteps=50)  # limits count on from where the runner is
    assert before + 50 <= runner.global_timestep <= before + 50 + len(agents) - 1
    assert runner.global_timestep == sum(agent.timestep for agent in agents)
    assert runner.episode == runner.global_episode and runner.global_step == runner.timestep


class Counting(OneNumber):
    """The state is the number of steps taken so far (per environment); episodes of 4 steps."""

    def __init__(self) -> None:
        self.t = 0

    def reset(self):
        return np.array([self.t], dtype=np.float32)

    def execute(self, actions):
        self.t += 1
        return np.array([self.t], dtype=np.float32), int(self.t % 4 == 0), 1.0


def test_each_worker_observes_the_state_it_acted_on():
    spec = {
        "type": "dqn",
        "network": NETWORK,
        "memory": {"type": "replay", "capacity": 256},
        "seed": 0,
        "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 4},
    }
    environments = [Counting() for _ in range(3)]
    main = create_agent(spec, states=environments[0].states, actions=environments[0].actions)
    agents = clone_worker_agent(main, 3, environments[0], NETWORK, {k: v for k, v in spec.items() if k != "type"})
    ThreadedRunner(agents, environments).run(num_episodes=15)
    # the 15 episodes are shared: under load the scheduler may leave a worker none of them, so an empty memory
    # is skipped (at least one worker played)
    played = [agent for agent in agents if len(agent.memory) > 0]
    assert played
    for agent in played:
        stored = agent.memory.retrieve_timesteps(64)
        states, following = stored["states/state"][:, 0], stored["next_states/state"][:, 0]
        ongoing = stored["terminal"] == 0
        assert (following[ongoing] == states[ongoing] + 1).all()  # 2018 stored the state after the next one


def test_a_falsy_episode_finished_stops_that_worker_only():
    agents, environments = workers()
    seen = []

    def episode_finished(runner, worker):
        seen.append(worker)
        return worker != 1

    runner = ThreadedRunner(agents, environments)
    runner.run(num_episodes=20, episode_finished=episode_finished)
    assert seen.count(1) == 1 and len(seen) == 20 and agents[1].episode == 1


def test_a_falsy_step_finished_stops_every_worker():
    agents, environments = workers()
    calls = []

    def step_finished(runner, worker):
        calls.append(worker)
        return runner.global_timestep < 25

    runner = ThreadedRunner(agents, environments)
    runner.run(step_finished=step_finished)
    assert set(calls) == {0, 1, 2} and 25 <= runner.global_timestep <= 25 + len(agents) - 1


def test_the_2018_one_argument_callback_and_deprecated_names():
    agents, environments = workers(count=2)
    calls = []
    with pytest.warns(DeprecationWarning):
        runner = ThreadedRunner(agents=agents, environments=environments)
    with pytest.warns(DeprecationWarning):
        runner.run(episodes=4, max_timesteps=3, episode_finished=lambda r: calls.append(r.global_episode) or True)
    assert calls == [1, 2, 3, 4] and runner.episode_lengths == [3, 3, 3, 3]  # cut at exactly 3 steps
    summaries = []
    runner.run(num_episodes=2, max_episode_timesteps=3, episode_finished=lambda stats: summaries.append(dict(stats)))
    assert sorted(summary["episode"] for summary in summaries) == [5, 6]  # the global count: the run continued
    assert {summary["thread_id"] for summary in summaries} <= {0, 1}
    assert all(summary["timestep"] >= 12 + 3 and isinstance(summary["episode_reward"], float) for summary in summaries)
    assert [summary["episode_reward"] for summary in summaries] == runner.episode_rewards[-2:]


@pytest.mark.parametrize("unit, frequency", [("e", 5), ("t", 40)])
def test_the_shared_model_is_saved_at_the_frequency_and_restores(tmp_path, unit, frequency):
    agents, environments = workers()
    runner = ThreadedRunner(
        agents, environments, save_path=str(tmp_path), save_frequency=frequency, save_frequency_unit=unit
    )
    runner.run(num_episodes=20)
    saved = sorted(tmp_path.glob("model-*.pt"))
    assert len(saved) >= 2
    fresh = create_agent(VPG, states=environments[0].states, actions=environments[0].actions)
    fresh.restore_model(tmp_path)
    assert fresh.timestep <= agents[0].timestep


def test_saving_goes_on_when_the_first_worker_has_stopped(tmp_path):
    """Whichever worker's step makes a save due saves (2018's main thread saved whatever the workers did)."""
    agents, environments = workers()
    runner = ThreadedRunner(agents, environments, save_path=str(tmp_path), save_frequency=40, save_frequency_unit="t")
    saved, save_model = [], agents[0].save_model
    agents[0].save_model = lambda *args, **kwargs: (saved.append(runner.global_timestep), save_model(*args, **kwargs))
    runner.run(num_timesteps=400, episode_finished=lambda runner, worker: worker != 0)  # worker 0: one episode
    assert len(saved) >= 5 and saved[-1] >= 300, saved


def test_errors():
    agents, environments = workers(count=2)
    with pytest.raises(ValueError, match="one environment per agent: got 2 agents and 1 environments"):
        ThreadedRunner(agents, environments[:1])
    with pytest.raises(ValueError, match="save_frequency_unit must be one of"):
        ThreadedRunner(agents, environments, save_path="x", save_frequency=1, save_frequency_unit="h")
    with pytest.raises(ValueError, match="save_frequency needs a save_path"):
        ThreadedRunner(agents, environments, save_frequency=1, save_frequency_unit="e")

    class Broken(Environment):
        states, actions = environments[0].states, environments[0].actions

        def reset(self):
            return environments[0].reset()

        def execute(self, actions):
            raise OSError("the simulator went away")

    with pytest.raises(RuntimeError, match="worker 1 failed: OSError") as error:
        ThreadedRunner(agents, [environments[0], Broken()]).run(num_episodes=1000)
    assert isinstance(error.value.__cause__, OSError)
    other = create_agent(
        {"type": "ppo", "network": NETWORK}, states=environments[0].states, actions=environments[0].actions
    )
    with pytest.raises(TypeError, match="a ppo agent cannot share the model of a vpg agent"):
        share_model(other, agents[0])


def test_worker_agent_generator_shares_the_model():
    agents, environments = workers(count=1)
    worker_class = WorkerAgentGenerator(type(agents[0]))
    config = {key: value for key, value in VPG.items() if key != "type"}
    worker = worker_class(model=agents[0], states=environments[0].states, actions=environments[0].actions, **config)
    assert type(worker).__name__ == "WorkerVPGAgent" and worker.policy is agents[0].policy


def test_the_shared_model_learns_the_minimal_task():
    # threads interleave differently on every run, so the course of learning is not reproducible: one run in about
    # forty fails to learn within 240 episodes (measured); three independent tries make a failure vanishingly rare
    states = np.array([[-0.8], [-0.3], [0.3], [0.8]], dtype=np.float32)
    learned = []
    threads = threading.active_count()  # what the process runs besides (earlier tests' Ray clients, ...)
    for _ in range(3):
        agents, environments = workers(count=3)
        ThreadedRunner(agents, environments).run(num_episodes=240)
        assert min(agent.updates for agent in agents) >= 20
        learned.append(bool((agents[0].act(states, deterministic=True, independent=True) == (states[:, 0] > 0)).all()))
        if learned[-1]:
            break
    assert learned[-1], f"no try learned: {learned}"
    assert Threaded is ThreadedRunner and threading.active_count() <= threads  # the worker threads are done


def test_workers_sharing_a_model_with_dropout_act_in_eval_mode_after_another_updates():
    """The mode of shared modules is shared too: after one worker's update has put them in training mode, another
    worker's act puts them back in eval mode (its own flag had not changed), and acting takes its turn on the
    update lock, so no update switches the mode under it."""
    env = make("minimal", seed=0)
    spec = {"type": "dqn", "seed": 0, "network": [{"type": "dense", "size": 64}, {"type": "dropout", "rate": 0.5}]}
    main = create_agent(spec, states=env.states, actions=env.actions)
    first, second = clone_worker_agent(main, 2, env, None, None)
    states = np.full((16, 1), 0.3, dtype=np.float32)
    for worker in (first, second):  # both have acted: each took the modules to eval mode
        worker.act(states[:1], deterministic=True, independent=True)
    with first.update_lock:
        first._set_training(True)  # what the first worker's update does before it learns
    actions = [second.act(states, deterministic=True, independent=True) for _ in range(5)]
    assert all(np.array_equal(action, actions[0]) for action in actions)  # no dropout while acting
    assert not any(module.training for module in main.trainable_modules().values())
    assert second._turn_to_act() is main.update_lock


def test_acting_under_the_update_lock_as_an_evaluation_does_returns():
    # tfcli's worker evaluates a threaded run holding the lock (a model no update changes halfway), and act takes
    # the same lock for a model with dropout: it must not wait for itself
    env = make("minimal", seed=0)
    spec = {"type": "dqn", "seed": 0, "network": [{"type": "dense", "size": 8}, {"type": "dropout", "rate": 0.5}]}
    main = create_agent(spec, states=env.states, actions=env.actions)
    clone_worker_agent(main, 2, env, None, None)
    done = threading.Event()

    def evaluate() -> None:
        with main.update_lock:
            main.act(np.zeros((1, 1), dtype=np.float32), deterministic=True, independent=True)
        done.set()

    threading.Thread(target=evaluate, daemon=True).start()
    assert done.wait(10), "act under the update lock never returned"


def test_an_episode_callback_may_read_the_runners_state():
    """episode_finished runs while the runner holds its lock on the counters; reading them (a checkpoint of the
    history in the callback) does not wait for that lock forever."""
    agents, environments = workers(count=2)
    runner = ThreadedRunner(agents, environments)
    states = []
    finished = threading.Thread(
        target=runner.run,
        kwargs={
            "num_episodes": 3,
            "max_episode_timesteps": 3,
            "episode_finished": lambda r, w: states.append(r.state_dict()) or True,
        },
        daemon=True,
    )
    finished.start()
    finished.join(timeout=60)
    assert not finished.is_alive() and [state["global_episode"] for state in states] == [1, 2, 3]


DQN_SYNC = {
    "type": "dqn",
    "network": [{"type": "dense", "size": 16}],
    "memory": {"type": "replay", "capacity": 2000},
    "update_mode": {"unit": "timesteps", "batch_size": 8, "frequency": 1},
    "target_sync_frequency": 20,
    "seed": 0,
}


def recorded_syncs(agent):
    """The times at which ``agent``'s target network synced from now on (the list fills as it does)."""
    times = []
    sync = agent.target_sync.sync

    def recording(time):
        synced = sync(time)
        if synced:
            times.append(time)
        return synced

    agent.target_sync.sync = recording
    return times


@pytest.mark.parametrize("count", [2, 4])
def test_workers_sync_the_shared_target_on_the_count_of_all_their_timesteps(count):
    # 2018's workers shared one model with one timestep counter, so the target followed every
    # target_sync_frequency of all their acts; compared with a worker's own count, it would follow every
    # count * target_sync_frequency of them
    environments = [make("CartPole-v1", seed=index) for index in range(count)]
    main = create_agent(DQN_SYNC, states=environments[0].states, actions=environments[0].actions)
    agents = clone_worker_agent(main, count, environments[0], None, None)
    synced = recorded_syncs(main)
    runner = ThreadedRunner(agents, environments)
    runner.run(num_timesteps=1200)
    # after the first updates, about one comes per timestep of any worker: a sync every 20 of them
    expected = (runner.global_timestep - synced[0]) / 20
    assert len(synced) >= 0.8 * expected, f"{len(synced)} syncs in {runner.global_timestep} timesteps"
    assert np.median(np.diff(synced)) < 1.5 * 20


def step_in_turn(agents, environments, steps):
    """``steps`` acts of each agent, one agent's after another's, in this thread (the same course every time)."""
    states = [environment.reset() for environment in environments]
    for _ in range(steps):
        for index, (agent, environment) in enumerate(zip(agents, environments, strict=True)):
            actions = agent.act(states[index])
            states[index], terminal, reward = environment.execute(actions)
            agent.observe(terminal, reward)
            if terminal:
                states[index] = environment.reset()


def test_the_shared_model_counts_every_workers_timesteps_and_checkpoints_the_count():
    schedule = {"type": "linear", "initial": 0.01, "final": 0, "timesteps": 1000}
    spec = {**DQN_SYNC, "optimizer": {"type": "adam", "learning_rate": schedule}}
    environments = [make("minimal", seed=index) for index in range(2)]
    spaces = {"states": environments[0].states, "actions": environments[0].actions}
    main = create_agent(spec, **spaces)
    agents = clone_worker_agent(main, 2, environments[0], None, None)
    synced = recorded_syncs(main)
    step_in_turn(agents, environments, 100)
    # the first update comes once each has stored 8 timesteps (batch_size), at the 16th act in all
    assert synced == list(range(16, 200, 20))
    # the shared optimizer's learning-rate schedule reads the model's count as well: 0.01 * (1 - 200 / 1000)
    assert main.optimizer.torch_optimizer.param_groups[0]["lr"] == pytest.approx(0.008)
    assert [agent.timestep for agent in agents] == [100, 100]
    assert main.model_timestep == agents[1].model_timestep == 200

    # a checkpoint continues the count, loaded before or after the workers share the model; an agent alone saves
    # its counters as before
    state = main.state_dict()
    assert state["counters"]["model_timestep"] == 200
    assert "model_timestep" not in create_agent(spec, **spaces).state_dict()["counters"]
    for share_first in (True, False):
        fresh = create_agent(spec, **spaces)
        if share_first:
            restored = clone_worker_agent(fresh, 2, environments[0], None, None)
            fresh.load_state_dict(state)
        else:
            fresh.load_state_dict(state)
            restored = clone_worker_agent(fresh, 2, environments[0], None, None)
        assert [agent.timestep for agent in restored] == [100, 0] and fresh.model_timestep == 200
        more = recorded_syncs(fresh)
        step_in_turn(restored, environments, 20)
        assert more == [216, 236]


def test_explorations_and_clipping_follow_the_count_of_all_workers_and_random_acting_their_own(monkeypatch):
    # 2018's explorations read the shared model's global timestep: with N workers, an epsilon annealed over T
    # timesteps reaches its final value after T acts in all, not N * T; PPO's clipping schedule counts the same acts
    import torchforce.agents.agent as agent_module

    anneal = {"type": "epsilon_anneal", "initial_epsilon": 1.0, "final_epsilon": 0.0, "timesteps": 100}
    environments = [make("minimal", seed=index) for index in range(2)]
    main = create_agent(
        {**DQN_SYNC, "actions_exploration": anneal}, states=environments[0].states, actions=environments[0].actions
    )
    agents = clone_worker_agent(main, 2, environments[0], None, None)
    read = []
    exploration = agents[1].explorations["action"]
    epsilon = exploration.epsilon
    monkeypatch.setattr(exploration, "epsilon", lambda timestep: read.append(timestep) or epsilon(timestep))
    step_in_turn(agents, environments, 60)
    # the second worker's acts are the 2nd, 4th, ... of all (each reads the count of the acts before it): from its
    # 51st on, past the model's 100th, it acts greedily
    assert read == list(range(1, 120, 2))
    assert [exploration.epsilon(read[index]) for index in (0, 49, 50)] == pytest.approx([0.99, 0.01, 0.0])

    clipping = {"type": "linear", "initial": 0.3, "final": 0.1, "timesteps": 400}
    ppo = {
        "type": "ppo",
        "network": NETWORK,
        "update_mode": {"unit": "timesteps", "batch_size": 100},
        "likelihood_ratio_clipping": clipping,
        "seed": 0,
    }
    main = create_agent(ppo, states=environments[0].states, actions=environments[0].actions)
    agents = clone_worker_agent(main, 2, environments[0], None, None)
    step_in_turn(agents, environments, 100)
    # each worker's first update comes at its own 100th act, the model's 199th and 200th: 0.3 - 0.2 * 200 / 400
    assert agents[0].clipping == pytest.approx(0.3 - 0.2 * 199 / 400)
    assert agents[1].clipping == pytest.approx(0.2)

    # a noise exploration (DDPG's, drawn after the policy's pass) reads the same count; the random acts that fill a
    # worker's own memory before its own first update count its own acts, as that update does
    uniform = agent_module.uniform_actions
    drawn = []
    monkeypatch.setattr(agent_module, "uniform_actions", lambda *args: drawn.append(1) or uniform(*args))
    sigma = {"type": "linear", "initial": 0.3, "final": 0.1, "timesteps": 100}
    ddpg = {
        "type": "ddpg",
        "network": NETWORK,
        "memory": {"type": "replay", "capacity": 64},
        "random_timesteps": 10,
        "actions_exploration": {"type": "gaussian_noise", "sigma": sigma},
        "seed": 0,
    }
    environments = [make("minimal", action_type="bounded", seed=index) for index in range(3)]
    main = create_agent(ddpg, states=environments[0].states, actions=environments[0].actions)
    agents = clone_worker_agent(main, 3, environments[0], None, None)
    read = []
    exploration = agents[1].explorations["action"]
    noise = exploration.noise
    monkeypatch.setattr(
        exploration, "noise", lambda shape, rng, timestep: read.append(timestep) or noise(shape, rng, timestep)
    )
    step_in_turn(agents, environments, 20)
    assert read == list(range(1, 60, 3))
    assert len(drawn) == 30  # each worker's first 10 acts


def test_an_agent_alone_has_no_clock_and_is_freed_without_the_cycle_collector():
    # a clock holds its agents: an agent alone is in no such cycle, so its memory goes as soon as the agent does
    import gc
    import weakref

    environment = make("minimal", seed=0)
    agent = create_agent(DQN_SYNC, states=environment.states, actions=environment.actions)
    assert agent.model_clock is None and agent.model_timestep == agent.timestep == 0
    collecting = gc.isenabled()
    gc.disable()
    try:
        alive = weakref.ref(agent)
        del agent
        assert alive() is None
    finally:
        if collecting:
            gc.enable()
