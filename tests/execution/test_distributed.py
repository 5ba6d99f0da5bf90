"""Distributed training on a real local Ray cluster (127.0.0.1 only, a private temporary folder, shut down at the
end): parameter servers holding sharded parameters, workers sending their updates and pulling the result, global
limits and history, and a model that learns."""

import logging
import tempfile
import threading
import time

import numpy as np
import pytest
import torch

ray = pytest.importorskip("ray")

from tests.client.worker_runs import new_experiment, new_project  # noqa: E402
from torchforce.agents import create_agent  # noqa: E402
from torchforce.client.experiment_run import ExperimentRun  # noqa: E402
from torchforce.environments import make  # noqa: E402
from torchforce.environments.minimal import Minimal  # noqa: E402
from torchforce.execution import distributed, distributed_actors, ray_signals, worker_health  # noqa: E402
from torchforce.execution.distributed import OBJECT_STORE, DistributedRunner  # noqa: E402
from torchforce.execution.distributed_actors import ParameterServer, shard  # noqa: E402
from torchforce.execution.evaluation import evaluate  # noqa: E402
from torchforce.execution.ray_cluster import init_private  # noqa: E402
from torchforce.execution.worker_health import Absence  # noqa: E402

MINIMAL = {"type": "minimal", "action_type": "int"}
PPO = {
    "type": "ppo",
    "network": [{"type": "dense", "size": 8}],
    "update_mode": {"unit": "episodes", "batch_size": 2},
    "step_optimizer": {"type": "adam", "learning_rate": 0.02},
    "epochs": 4,
    "seed": 0,
}


# one test worker runs the module: one cluster for it (half a minute to start)
pytestmark = [pytest.mark.xdist_group("ray-runner"), pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local Ray cluster for the module (loopback only), which the runners use (and so leave running). It
    declares a GPU: Ray counts it and hands out shares of it, and with no CUDA behind it agents compute on the CPU."""
    with tempfile.TemporaryDirectory(prefix="tf-ray-") as folder:
        init_private(num_cpus=2, num_gpus=1, object_store_memory=OBJECT_STORE, temp_dir=folder)
        try:
            yield
        finally:
            ray.shutdown()


def main_agent(spec=PPO):
    environment = make(MINIMAL)
    return create_agent(spec, states=environment.states, actions=environment.actions)


def test_shards_balance_the_parameters_and_hold_each_once():
    parameters = {"a": np.zeros((10, 10)), "b": np.zeros(100), "c": np.zeros(50), "d": np.zeros(50), "e": np.zeros(1)}
    shards = shard(parameters, 2)
    assert sorted(name for names in shards for name in names) == ["a", "b", "c", "d", "e"]
    sizes = [sum(parameters[name].size for name in names) for names in shards]
    assert abs(sizes[0] - sizes[1]) <= 1


@pytest.mark.parametrize("kind, action_type", [("dqn", "int"), ("ddpg", "bounded"), ("naf", "float"), ("ppo", "int")])
def test_the_shared_parameters_are_copies_of_the_online_networks(kind, action_type):
    environment = make({"type": "minimal", "action_type": action_type})
    spec = {"type": kind, "network": [{"type": "dense", "size": 8}], "seed": 0}
    agent = create_agent(spec, states=environment.states, actions=environment.actions)
    every = agent.get_parameters()
    shared = distributed_actors.shared_parameters(agent)
    assert list(shared) == [name for name in every if not name.startswith("target")]
    assert all(torch.equal(value, every[name]) for name, value in shared.items())
    for value in shared.values():  # copies: what a worker keeps as its base does not move with the agent
        value.add_(1.0)
    assert all(torch.equal(value, every[name]) for name, value in agent.get_parameters().items())


def test_a_parameter_server_adds_the_deltas_it_gets():
    server = ParameterServer({"w": np.ones(3, dtype=np.float32)})
    server.apply({"w": np.full(3, 0.5, dtype=np.float32)})
    assert server.apply({"w": np.full(3, -2.0, dtype=np.float32)}) == 2
    np.testing.assert_allclose(server.get()["w"], [-0.5, -0.5, -0.5])


def test_servers_start_from_the_agents_parameters_and_a_run_changes_them():
    agent = main_agent()
    before = {name: value.clone() for name, value in agent.get_parameters().items()}
    runner = DistributedRunner(agent, MINIMAL, num_workers=2, num_parameter_servers=2, seed=0)
    try:
        start = runner.parameters()
        assert start.keys() == before.keys()
        assert all(np.array_equal(start[name], before[name].numpy()) for name in before)
        assert sorted(name for names in runner.layout for name in names) == sorted(before)
        runner.run(num_timesteps=400, chunk=100)
        assert runner.global_timestep == 400  # chunks are handed out to exactly the limit
        assert runner.global_episode == len(runner.episode_rewards) == 40  # episodes of 10 steps
        after = agent.get_parameters()  # synced from the servers at the end of the run
        assert not all(torch.equal(after[name], before[name]) for name in before)
        assert all(np.array_equal(runner.parameters()[name], after[name].numpy()) for name in after)
    finally:
        runner.close()


@pytest.mark.parametrize("sync_every", [1, 3])
def test_a_chunk_returns_once_its_changes_are_on_the_servers(sync_every):
    # the driver reads the servers as soon as the last chunk is in: a change still on its way would be missed, and
    # so would updates fewer than sync_every since the last exchange
    class SlowServer(ParameterServer):  # defined here, so that Ray sends the class itself to its process
        """A server whose exchange takes a while, and which answers reads meanwhile (two calls at a time)."""

        def push_pull(self, deltas):
            time.sleep(0.5)
            return super().push_pull(deltas)

    agent = main_agent()
    values = {name: value.numpy() for name, value in agent.get_parameters().items()}
    layout = shard(values, 2)
    servers = [
        ray.remote(num_cpus=0, max_concurrency=2)(SlowServer).remote({name: values[name] for name in names})
        for names in layout
    ]
    spec = {key: value for key, value in PPO.items() if key != "seed"}
    worker = distributed_actors.Worker(0, spec, MINIMAL, 1, 0, servers, layout, {}, sync_every)
    try:
        result = worker.run(40, None, False)  # 4 episodes: two updates, the last one at the chunk's end
        assert worker.agent.updates == 2 and result["syncs"] == (2 if sync_every == 1 else 1)
        on_servers = {
            name: value for part in ray.get([server.get.remote() for server in servers]) for name, value in part.items()
        }
        worked = worker.agent.get_parameters()
        assert not all(np.array_equal(on_servers[name], values[name]) for name in worked)
        for name in worked:  # base + (now - base) on the servers: now, up to float32 rounding
            np.testing.assert_allclose(on_servers[name], worked[name].numpy(), rtol=0, atol=1e-6)
    finally:
        worker.close()
        for server in servers:
            ray.kill(server)


def test_episode_limits_callbacks_and_history():
    runner = DistributedRunner(main_agent(), MINIMAL, num_workers=2, seed=1)
    workers = []
    try:
        runner.run(num_episodes=15, chunk=50, episode_finished=lambda r, worker: workers.append(worker) or True)
        assert runner.global_episode == 15 == len(workers)
        # each chunk of 50 steps is 5 episodes of one worker, named by its index (which worker's chunks land
        # first is the scheduler's business: one worker may have done all three)
        assert set(workers) <= {0, 1} and all(workers.count(index) % 5 == 0 for index in (0, 1)), workers
        runner.run(num_timesteps=100, chunk=50, episode_finished=lambda r: r.global_episode < 17)  # 2018's form
        assert runner.global_episode == 17
        state = runner.state_dict()
        assert state["global_timestep"] == runner.global_timestep and len(state["episode_rewards"]) == 17
    finally:
        runner.close()
    with pytest.raises(ValueError, match="needs num_timesteps or num_episodes"):
        runner.run()


def test_the_agent_that_is_saved_and_evaluated_standardizes_with_every_workers_statistics():
    """The workers' run-wide normalizers learn the states of their own environments, which no parameter server
    holds: the driver's agent (checkpoints, evaluation, export) takes them all in, combined, with the parameters."""
    from torchforce.core.preprocessors import RunningStandardize

    spec = {**PPO, "states_preprocessing": [{"type": "running_standardize", "reset_after_batch": False}]}
    agent = main_agent(spec)
    runner = DistributedRunner(agent, MINIMAL, num_workers=2, seed=0)
    try:
        runner.run(num_timesteps=400, chunk=100)
        workers = [state["preprocessing"]["state"]["0"] for state in runner.worker_states()]
        counts = [int(worker["count"]) for worker in workers]  # each its own environment's states: as many as
        assert sum(counts) == 400 and min(counts) >= 100, counts  # the chunks of 100 it got (the first one each)
        driver = agent.preprocessing["state"].preprocessors[0].state_dict()
        expected = RunningStandardize.combined(workers)
        assert driver["count"] == 400
        np.testing.assert_allclose(driver["mean"], expected["mean"])
        np.testing.assert_allclose(driver["m2"], expected["m2"])
        runner.run(num_timesteps=0)  # nothing to run: no chunk, the counts as they were
        runner.run(num_episodes=0)
        assert runner.global_timestep == 400
    finally:
        runner.close()


def test_the_shared_model_learns_the_minimal_task():
    # asynchronous updates arrive in a different order every run, so learning is not reproducible: with this learning
    # rate 8 of 8 runs learned (measured); under CI's load two tries both ended just short (8.9, 8.8 of 10), so a
    # third try is allowed
    states = np.array([[-0.8], [-0.5], [0.5], [0.8]], dtype=np.float32)
    outcomes = []
    for seed in (2, 3, 4):
        agent = main_agent({**PPO, "step_optimizer": {"type": "adam", "learning_rate": 0.005}})
        runner = DistributedRunner(agent, MINIMAL, num_workers=2, num_parameter_servers=2, seed=seed)
        try:
            runner.run(num_timesteps=6000, chunk=250)
        finally:
            runner.close()
        correct = (agent.act(states, deterministic=True, independent=True) == (states[:, 0] > 0)).all()
        outcomes.append((bool(correct), float(np.mean(evaluate(agent, make(MINIMAL), episodes=10)))))
        if outcomes[-1][0] and outcomes[-1][1] >= 9.0:  # out of 10
            return
    pytest.fail(f"no try learned: {outcomes}")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the cluster's GPU is declared, not real")
def test_the_workers_of_an_agent_on_a_gpu_share_the_clusters_gpus():
    """Workers of an "auto" agent ask for half of the cluster's one GPU each (Ray shows an actor only the GPUs it
    asked for); seeing no CUDA behind it, their agents compute on the CPU, and the run goes on."""
    runner = DistributedRunner(main_agent({**PPO, "device": "auto"}), MINIMAL, num_workers=2, seed=1)
    try:
        assert runner.placement.bundle_specs == [{"CPU": 1, "GPU": 0.5}] * 2
        runner.run(num_episodes=4, chunk=20)
        assert runner.global_episode == 4
    finally:
        runner.close()


def test_bad_arguments():
    with pytest.raises(ValueError, match="must be at least 1"):
        DistributedRunner(main_agent(), MINIMAL, num_workers=0)
    for timeout in (0, -5.0, float("nan"), True, "60"):
        with pytest.raises(ValueError, match=r"worker_timeout must be a number of seconds > 0, or None"):
            DistributedRunner(main_agent(), MINIMAL, worker_timeout=timeout)


def test_more_workers_than_the_cluster_has_cpus_are_refused():
    with pytest.raises(ValueError, match="3 distributed workers need a CPU each; the Ray cluster has 2"):
        DistributedRunner(main_agent(), MINIMAL, num_workers=3)
    with pytest.raises(
        ValueError, match=r"2 distributed workers need 2 CPUs each \(torch_threads\); the Ray cluster has 2"
    ):
        DistributedRunner(main_agent(), MINIMAL, num_workers=2, torch_threads=2)
    with pytest.raises(ValueError, match="torch_threads must be at least 1, got 0"):
        DistributedRunner(main_agent(), MINIMAL, num_workers=1, torch_threads=0)


def test_a_worker_of_several_torch_threads_asks_for_as_many_cpus_and_runs_on_them():
    from ray.util import placement_group_table

    runner = DistributedRunner(main_agent(), MINIMAL, num_workers=1, seed=2, torch_threads=2)
    try:
        runner.run(num_timesteps=40)
        assert runner.global_timestep >= 40
        (bundle,) = placement_group_table(runner.placement)["bundles"].values()
        assert bundle == {"CPU": 2.0}
        threads = ray.get(
            runner.workers[0].__ray_call__.remote(lambda worker: (torch.get_num_threads(), worker.runner.torch_threads))
        )
        assert threads == (2, 2)
    finally:
        runner.close()


def test_a_worker_killed_mid_run_is_restarted_and_only_its_chunk_is_lost():
    """The restarted worker's agent goes on from its predecessor's last chunk (counters, run-wide statistics), with
    a seed of its own."""
    lost = []
    spec = {**PPO, "states_preprocessing": [{"type": "running_standardize", "reset_after_batch": False}]}
    runner = DistributedRunner(
        main_agent(spec),
        MINIMAL,
        num_workers=2,
        seed=4,
        on_lost_worker=lambda index, steps: lost.append((index, steps)),
    )
    killed = []

    def kill_once(r):
        # once worker 0 has finished two chunks, its process dies as a crash would end it: Ray may restart it
        if not killed and r.worker_status()[0]["steps"] >= 200:
            ray.kill(r.workers[0], no_restart=False)
            killed.append(True)
        return True

    try:
        runner.run(num_timesteps=3000, chunk=100, report=kill_once)
        status = runner.worker_status()
        assert lost == [(0, 100)]  # one chunk, handed out again: the run still takes exactly its steps
        assert runner.global_timestep == 3000
        assert [row["restarts"] for row in status] == [1, 0] and status[0]["lost_steps"] == 100
        assert status[1]["steps"] > 0 and status[1]["episodes"] > 0 and status[1]["node"]
        assert sum(row["steps"] for row in status) == 3000
        states = runner.worker_states()
        # the steps counted for each worker, those before the restart too: its agent's timestep and statistics
        assert [state["counters"]["timestep"] for state in states] == [row["steps"] for row in status]
        counts = [int(state["preprocessing"]["state"]["0"]["count"]) for state in states]
        assert counts == [row["steps"] for row in status]
        seeds = ray.get([worker.__ray_call__.remote(lambda worker: worker.seed) for worker in runner.workers])
        assert seeds == [distributed_actors.restarted_seed(5, 1), 6] and seeds[0] not in (5, 6)  # seed + 1 + i
    finally:
        runner.close()


def test_a_restarted_worker_that_hangs_as_it_starts_ends_the_run_naming_it(monkeypatch):
    """The restart of a hung worker whose new process hangs as it starts (its environment blocking as it is seeded):
    the run failed with Ray's raw error (ActorUnavailableError, after the wait for a restart), or, its readiness
    probe killed at its deadline, as a death. It ends the run with an error naming the worker."""

    class Stalling(Minimal):  # worker 0 (seed 5) stalls in a step, and its restart (seeded anew) as it seeds
        stalls, steps = False, 0

        def seed(self, seed):
            if seed == distributed_actors.restarted_seed(5, 1):
                threading.Event().wait()
            self.stalls = seed == 5
            return super().seed(seed)

        def execute(self, actions):
            self.steps += 1
            if self.stalls and self.steps == 150:
                threading.Event().wait()
            return super().execute(actions)

    # the probe's deadline, max(worker_timeout, this), and the wait for a restart
    monkeypatch.setattr(worker_health, "RESTART_TIMEOUT", 15.0)
    runner = DistributedRunner(main_agent(), Stalling, num_workers=2, seed=4, worker_timeout=20)
    try:
        started = time.monotonic()
        with pytest.raises(
            RuntimeError,
            match=r"Ray worker 0 is given up: it did not come back from its restart \(restarts so far: 0, hangs: 1\)",
        ):
            runner.run(num_timesteps=100_000, chunk=100)
        assert time.monotonic() - started < 20 + 15 + 60
        assert [row["hangs"] for row in runner.worker_status()] == [1, 0]
    finally:
        runner.close()


def test_a_hung_worker_is_killed_after_the_worker_timeout_and_restarted_as_a_lost_one():
    """A worker whose environment blocks for ever in a step, its process alive, returns no chunk: the driver kills it
    once its chunk has been under way worker_timeout seconds, and Ray restarts it as it restarts a lost worker (its
    chunk handed out again, its new agent going on from its last chunk's record, with a seed of its own)."""

    class Stalling(Minimal):  # defined here, so that Ray sends the class itself to the workers' processes
        """Blocks for ever at its 150th step (in its worker's second chunk) where seeded 5: worker 0's copy in a run
        of seed 4, until the restart, which seeds it anew."""

        stalls, steps = False, 0

        def seed(self, seed):
            self.stalls = seed == 5
            return super().seed(seed)

        def execute(self, actions):
            self.steps += 1
            if self.stalls and self.steps == 150:
                threading.Event().wait()  # for ever: only the driver's kill ends it
            return super().execute(actions)

    hung, lost = [], []
    runner = DistributedRunner(
        main_agent(),
        Stalling,
        num_workers=2,
        seed=4,
        worker_timeout=20,  # a chunk of 100 steps takes a second or less
        on_hung_worker=lambda index, seconds: hung.append((index, seconds)),
        on_lost_worker=lambda index, steps: lost.append((index, steps)),
    )
    try:
        started = time.monotonic()
        runner.run(num_timesteps=1000, chunk=100)
        assert time.monotonic() - started < 20 + 120  # the timeout, the restart and a few chunks: not for ever
        assert hung == [(0, 20)] and lost == [(0, 100)]
        status = runner.worker_status()
        assert [row["hangs"] for row in status] == [1, 0]
        assert [row["restarts"] for row in status] == [1, 0] and status[0]["lost_steps"] == 100
        assert runner.global_timestep == 1000 == sum(row["steps"] for row in status)
        states = runner.worker_states()  # the restarted agent went on from its predecessor's counters (100 steps)
        assert [state["counters"]["timestep"] for state in states] == [row["steps"] for row in status]
        seeds = ray.get([worker.__ray_call__.remote(lambda worker: worker.seed) for worker in runner.workers])
        assert seeds == [distributed_actors.restarted_seed(5, 1), 6]
    finally:
        runner.close()


def test_an_experiments_worker_timeout_reaches_its_runner_whose_hung_workers_are_logged(tmp_path, caplog):
    folder = new_experiment(new_project(tmp_path), "ray", run_mode="distributed", num_workers=2, worker_timeout=90)
    run = ExperimentRun(folder, resume=False)
    run.build()  # the worker's runner, on the Ray this process has initialized already
    try:
        assert run.runner.worker_timeout == 90
        with caplog.at_level(logging.WARNING, logger="torchforce.worker"):
            run.runner.on_hung_worker(1, 90.0)  # what the runner tells when it kills worker 1 as hung
        assert "Ray worker 1 hung: it returned nothing for 90 s (the experiment's worker_timeout)" in caplog.text
    finally:
        run.runner.close()
        run.agent.close()


def test_an_agent_that_learns_nothing_is_refused_with_where_to_run_it():
    with pytest.raises(ValueError, match="a random agent learns none: run it with the Runner"):
        DistributedRunner(main_agent({"type": "random", "seed": 0}), MINIMAL, num_workers=2, seed=2)
    assert distributed_actors.run_wide_statistics(main_agent({"type": "random"})) == {}


def test_a_restarted_workers_seed_is_its_own_and_the_same_in_every_run():
    seeds = [distributed_actors.restarted_seed(7, restarts) for restarts in (1, 2, 3)]
    assert len(set(seeds)) == 3 and 7 not in seeds and all(0 <= seed < 2**31 for seed in seeds)
    assert seeds == [distributed_actors.restarted_seed(7, restarts) for restarts in (1, 2, 3)]
    assert distributed_actors.restarted_seed(None, 1) is None


def test_a_restart_under_way_is_waited_out_and_deaths_are_counted():
    """Ray answers ActorUnavailableError while it starts a killed worker again, which takes long on a busy machine
    (the 20 quick retries this replaced gave up after 21 s under load): that is waited out up to RESTART_TIMEOUT;
    deaths end it after MAX_WORKER_RESTARTS."""
    clock = [0.0]
    restarting = ray.exceptions.ActorUnavailableError("The actor is restarting", None)
    absence = Absence(clock=lambda: clock[0])
    delays = []
    for _ in range(200):  # 200 s of a restart under way: far more calls than MAX_WORKER_RESTARTS
        delays.append(absence.failed(restarting))
        clock[0] += 1.0
    assert delays[:3] == pytest.approx([0.1, 0.2, 0.3]) and max(delays) == 2.0 and absence.deaths == 0
    clock[0] = worker_health.RESTART_TIMEOUT + 1.0
    with pytest.raises(ray.exceptions.ActorUnavailableError):
        absence.failed(restarting)
    died = Absence()
    for _ in range(worker_health.MAX_WORKER_RESTARTS):
        died.failed(ray.exceptions.RayActorError())
    with pytest.raises(ray.exceptions.RayActorError):
        died.failed(ray.exceptions.RayActorError())


def test_a_worker_that_answered_again_is_waited_for_anew_at_its_next_death_but_its_deaths_add_up():
    """Two deaths further apart than RESTART_TIMEOUT, the worker back and answering in between (its chunk died
    before it ended), do not end the run; a worker that keeps dying still does."""
    clock = [0.0]
    absence = Absence(clock=lambda: clock[0])
    absence.failed(ray.exceptions.RayActorError())
    clock[0] = 10.0
    absence.answered()  # the restarted worker's readiness probe came back
    clock[0] = worker_health.RESTART_TIMEOUT + 100.0  # its next chunk died, long after the first death
    assert absence.failed(ray.exceptions.RayActorError()) == pytest.approx(0.1) and absence.deaths == 2
    for _ in range(worker_health.MAX_WORKER_RESTARTS - 2):
        absence.answered()
        absence.failed(ray.exceptions.RayActorError())
    absence.answered()
    with pytest.raises(ray.exceptions.RayActorError):
        absence.failed(ray.exceptions.RayActorError())


def test_the_callers_signal_handlers_come_back_after_ray_puts_its_own_in_their_place():
    """ray.init makes SIGTERM exit the process at once: a runner starting its cluster puts the caller's handlers
    back before its workers start (minutes on a busy machine), so tfcli's stop asked for then is a stop, not a
    failure."""
    import signal

    def stop(*_):
        """The caller's handler (what it does matters not here: which one is installed does)."""

    before = signal.signal(signal.SIGTERM, stop)
    try:
        handlers = ray_signals.signal_handlers()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what ray.init does, in its own way
        ray_signals.restore_signal_handlers(handlers)
        assert signal.getsignal(signal.SIGTERM) is stop
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_stop_asked_while_ray_starts_reaches_the_callers_handler_not_rays_exit():
    """A stop in the first seconds of a distributed run came while ray.init had its own SIGTERM handler in place,
    which exits: the run ended failed ("SystemExit: 15") instead of stopping. While Ray starts, the caller's handler
    stays: Ray's way of installing its own (which ray.init still calls first) does nothing meanwhile."""
    import inspect
    import os
    import signal
    import sys

    import ray._private.utils
    import ray._private.worker

    assert "set_sigterm_handler" in inspect.getsource(ray._private.worker.init)  # where ray.init installs its exit
    install = ray._private.utils.set_sigterm_handler
    asked = []
    before = signal.signal(signal.SIGTERM, lambda *_: asked.append("stop"))
    try:
        with ray_signals.handlers_kept(ray_signals.signal_handlers()):
            ray._private.utils.set_sigterm_handler(lambda number, _frame: sys.exit(number))  # as ray.init does
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 5
            while not asked and time.monotonic() < deadline:
                time.sleep(0.01)
        assert asked == ["stop"]
        assert ray._private.utils.set_sigterm_handler is install  # Ray's own again afterwards
        with ray_signals.handlers_kept({signal.SIGTERM: signal.SIG_DFL}):  # no handler of the caller's: Ray's way
            assert ray._private.utils.set_sigterm_handler is install
    finally:
        signal.signal(signal.SIGTERM, before)


def test_worker_agents_come_back_from_their_states():
    runner = DistributedRunner(main_agent(), MINIMAL, num_workers=2, seed=5)
    try:
        runner.run(num_timesteps=400, chunk=100)
        states = runner.worker_states()
        before = [state["counters"]["timestep"] for state in states]
        assert sum(before) == 400
        runner.run(num_timesteps=400, chunk=100)
        assert sum(state["counters"]["timestep"] for state in runner.worker_states()) == 800
        runner.load_worker_states(states)  # back to where they were
        assert [state["counters"]["timestep"] for state in runner.worker_states()] == before
        with pytest.raises(ValueError, match="1 worker states for 2 workers"):
            runner.load_worker_states(states[:1])
    finally:
        runner.close()


def test_an_agent_spec_asking_for_distributed_execution_is_refused_with_where_to_go():
    from torchforce.execution import Runner
    from torchforce.spec import SpecError

    environment = make(MINIMAL)
    spec = {**PPO, "execution": {"type": "distributed", "distributed_spec": {"cluster_spec": {"ps": ["h:1"]}}}}
    with pytest.raises(SpecError, match="execution.type: a distributed agent is made by its runner") as error:
        create_agent(spec, states=environment.states, actions=environment.actions)
    assert "DistributedRunner" in str(error.value)
    for kind in ("single", "multi-threaded"):  # nothing to refuse: the runner decides
        agent = create_agent(
            {**PPO, "execution": {"type": kind}}, states=environment.states, actions=environment.actions
        )
        assert agent.execution["type"] == kind
    with pytest.raises(SpecError, match="execution.type"):
        create_agent({**PPO, "execution": {"type": "mpi"}}, states=environment.states, actions=environment.actions)
    with pytest.warns(DeprecationWarning, match="use DistributedRunner"):
        from torchforce.execution import DistributedTFRunner
    assert DistributedTFRunner is Runner  # 0.4's alias: TensorFlow distributed the agent, the runner ran one


def test_workers_of_several_environments_count_the_steps_they_took():
    # a worker steps its 3 copies at once, so a chunk of 100 takes 102 steps: the run counts those and hands out
    # the rest of the budget by them (before, each chunk's 2 extra steps added up past the budget)
    runner = DistributedRunner(main_agent(), MINIMAL, num_workers=2, num_environments=3, seed=6)
    try:
        runner.run(num_timesteps=600, chunk=100)
        taken = sum(row["steps"] for row in runner.worker_status())
        assert runner.global_timestep == taken
        assert 600 <= taken <= 600 + 2 * (3 - 1)  # at most num_environments - 1 past it per worker
    finally:
        runner.close()


def test_a_dead_parameter_server_ends_the_run_with_an_error_naming_it():
    # the workers' calls to it fail inside their chunks: not a lost worker to restart over and over (a hang)
    runner = DistributedRunner(main_agent(), MINIMAL, num_workers=2, seed=7)
    try:
        ray.kill(runner.servers[0])
        started = time.monotonic()
        with pytest.raises(RuntimeError, match=r"^Ray worker [01] failed: \w*ActorDiedError"):
            runner.run(num_timesteps=10_000, chunk=50)
        assert time.monotonic() - started < 60
    finally:
        runner.close()


def test_what_failed_in_a_worker_is_its_own_error_and_a_shells_ray_address_is_not_followed(monkeypatch):
    raised = ray.exceptions.RayTaskError("Worker.run", "Traceback ...", ValueError("no environment 'cartpol'"))
    assert worker_health.described_failure(raised.as_instanceof_cause()) == "ValueError: no environment 'cartpol'"
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    monkeypatch.setenv("RAY_ADDRESS", "auto")  # a user's shell: a local run still starts its own cluster
    assert not distributed.ray_job_driver()
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}")  # what Ray's job supervisor gives a job's driver
    assert distributed.ray_job_driver()


def test_a_save_in_the_report_sees_one_moment_of_the_run():
    # the chunks under way are taken in first (drain): the counters and each worker's agent after the same steps,
    # where the workers' states held steps the counters did not yet have (a resume would take them twice)
    runner = DistributedRunner(main_agent(), MINIMAL, num_workers=2, seed=8)
    seen = []

    def report(runner):
        runner.drain()
        seen.append((runner.global_timestep, sum(state["counters"]["timestep"] for state in runner.worker_states())))
        return True

    try:
        runner.run(num_timesteps=1000, chunk=100, report=report)
        assert seen and all(counted == held for counted, held in seen), seen
        assert runner.global_timestep == 1000 and sum(row["steps"] for row in runner.worker_status()) == 1000
        runner.drain()  # outside a run: nothing to do
    finally:
        runner.close()


def test_the_workers_rows_go_on_counting_across_a_resume():
    """worker_status() counted each worker's steps and episodes since the last resume while the totals counted the
    whole run: the checkpointed state keeps each worker's counts, and a state saved before it did shares the run's
    out evenly."""
    runner = DistributedRunner(main_agent(), MINIMAL, num_workers=2, seed=8)
    try:
        runner.run(num_timesteps=600, chunk=100)
        state = runner.state_dict()
        before = [(row["steps"], row["episodes"]) for row in runner.worker_status()]
        assert sum(steps for steps, _ in before) == runner.global_timestep == 600
        runner.load_state_dict(state)  # as a resumed run's runner loads it
        assert [(row["steps"], row["episodes"]) for row in runner.worker_status()] == before
        runner.run(num_timesteps=400, chunk=100)  # 400 more
        after = runner.worker_status()
        assert sum(row["steps"] for row in after) == runner.global_timestep == 1000
        assert all(row["steps"] >= steps for row, (steps, _) in zip(after, before, strict=True))
        earlier = {key: value for key, value in state.items() if key != "worker_counts"}
        runner.load_state_dict(earlier)
        assert [row["steps"] for row in runner.worker_status()] == [300, 300]
        episodes = len(state["episode_rewards"])
        assert [row["episodes"] for row in runner.worker_status()] == [episodes - episodes // 2, episodes // 2]
    finally:
        runner.close()


def test_a_chunk_ends_within_its_seconds_so_a_stop_waits_seconds_not_the_chunk():
    """The driver stops (or pauses) a run between chunks: on a slow environment a chunk of CHUNK steps is minutes, and
    a stop waited for it (91 s on Atari, past tfcli's 120 s on a slower machine). A chunk ends after CHUNK_SECONDS
    whatever steps it has left: here chunks of ten million steps end in seconds, and the run stops at the first."""
    runner = DistributedRunner(main_agent(), MINIMAL, num_workers=2, seed=8)
    reports = []
    try:
        started = time.monotonic()
        runner.run(num_timesteps=20_000_000, chunk=10_000_000, report=lambda runner: reports.append(1) and False)
        assert reports and time.monotonic() - started < 4 * distributed_actors.CHUNK_SECONDS + 30
        assert 0 < runner.global_timestep < 20_000_000
        assert sum(row["steps"] for row in runner.worker_status()) == runner.global_timestep
    finally:
        runner.close()


def test_target_networks_stay_each_workers_own():
    # the servers add up the workers' changes: a target network's hard copy by two workers in one exchange would
    # move it twice as far as the online network, past it
    spec = {"type": "dqn", "network": [{"type": "dense", "size": 8}], "target_sync_frequency": 20, "seed": 0}
    runner = DistributedRunner(main_agent(spec), MINIMAL, num_workers=2, seed=9)
    try:
        held = runner.parameters()
        assert held and not [name for name in held if name.startswith("target")]
        assert set(held) == {name for name in runner.agent.get_parameters() if name.startswith("policy.")}
        runner.run(num_timesteps=600, chunk=100)  # the workers exchange their online networks only
        assert runner.global_timestep == 600 and set(runner.parameters()) == set(held)
    finally:
        runner.close()
