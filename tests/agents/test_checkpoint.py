"""The agent's whole state saves and restores exactly: checkpoints into fresh agents, resuming a run mid-episode,
seeds, and the parameter API (get/set, compute_update/apply_update).

Runs are driven by a fixed stream of states from a seeded numpy generator (the reward depends only on the state and
the action), so a run's course depends on nothing but the agent. Torch's global RNG is part of the agent's state
(policy sampling and PPO's subsampling draw from it), so runs that are compared are done one after the other,
never interleaved.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.agents.checkpoint import load_checkpoint
from torchforce.environments import make

MLP = [{"type": "dense", "size": 8}]
EPSILON = {"type": "epsilon_anneal", "initial_epsilon": 0.5, "final_epsilon": 0.05, "timesteps": 60}
PREPROCESSING = {
    "states_preprocessing": {"type": "running_standardize"},
    "reward_preprocessing": {"type": "running_standardize"},
}
PPO = {
    "type": "ppo",
    "network": MLP,
    "update_mode": {"unit": "episodes", "batch_size": 2},
    "baseline_mode": "states",
    "baseline": {"type": "mlp", "sizes": [8]},
    "gae_lambda": 0.95,
    "optimization_steps": 3,
    "seed": 3,
}
DQN = {
    "type": "dqn",
    "network": MLP,
    "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 2},
    "memory": {"type": "replay", "capacity": 64},
    "target_sync_frequency": 6,
    "actions_exploration": EPSILON,
    "seed": 4,
}
DDPG = {
    "type": "ddpg",
    "network": MLP,
    "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 2},
    "memory": {"type": "replay", "capacity": 64},
    "target_sync_frequency": 2,
    "target_update_weight": 0.1,
    "actions_exploration": {"type": "ornstein_uhlenbeck"},
    "seed": 8,
}
CASES = {
    "ppo": ("int", PPO),
    "ppo-preprocessed": ("int", {**PPO, **PREPROCESSING}),
    "ppo-timesteps-epsilon": (
        "int",
        {**PPO, "update_mode": {"unit": "timesteps", "batch_size": 6}, "actions_exploration": EPSILON},
    ),
    "ppo-float-noise": (
        "float",
        {**PPO, "actions_exploration": {"type": "ornstein_uhlenbeck"}, "variable_noise": 0.01, "epochs": 2},
    ),
    "ppo-sequence": (
        "int",
        {**PPO, "states_preprocessing": [{"type": "sequence", "length": 3}, {"type": "running_standardize"}]},
    ),
    "vpg-float-gae": (
        "float",
        {
            "type": "vpg",
            "network": MLP,
            "update_mode": {"unit": "episodes", "batch_size": 2},
            "seed": 5,
            "baseline_mode": "network",
            "baseline": {"type": "mlp", "sizes": [8]},
            "gae_lambda": 0.9,
            "states_preprocessing": {"type": "running_standardize"},
        },
    ),
    "trpo-gae": (
        "int",
        {
            "type": "trpo",
            "network": MLP,
            "update_mode": {"unit": "episodes", "batch_size": 2},
            "seed": 6,
            "learning_rate": 0.01,
            "baseline_mode": "states",
            "baseline": {"type": "mlp", "sizes": [8]},
            "gae_lambda": 0.9,
        },
    ),
    "dqn-nstep": (
        "int",
        {
            "type": "dqn_nstep",
            "network": MLP,
            "update_mode": {"unit": "episodes", "batch_size": 2},
            "seed": 7,
            "target_sync_frequency": 6,
            "horizon": 3,
            "actions_exploration": EPSILON,
        },
    ),
    "dqfd": ("int", {**DQN, "type": "dqfd", "demo_sampling_ratio": 0.5, "huber_loss": 1.0}),
    "ddpg": ("float", DDPG),
    "naf": (
        "float",
        {
            "type": "naf",
            "network": MLP,
            "update_mode": {"unit": "timesteps", "batch_size": 4, "frequency": 2},
            "memory": {"type": "replay", "capacity": 64},
            "target_sync_frequency": 3,
            "huber_loss": 1.0,
            "actions_exploration": {"type": "gaussian_noise", "sigma": 0.2},
            "seed": 9,
        },
    ),
    "ddpg-warmup": ("bounded", {**DDPG, "random_timesteps": 30, "seed": 10}),  # resumed at 23: mid-warm-up
    "ppo-shared-value": (
        "int",
        {**PPO, "baseline_mode": "network", "baseline": {"type": "mlp", "sizes": []}, "value_loss_weight": 0.5},
    ),
    "ppo-schedules": (  # a learning rate and a clipping range that fall over 60 timesteps, resumed halfway
        "int",
        {
            **PPO,
            "step_optimizer": {
                "type": "adam",
                "learning_rate": {"type": "linear", "initial": 0.01, "final": 0.0, "timesteps": 60},
            },
            "likelihood_ratio_clipping": {"type": "linear", "initial": 0.3, "final": 0.05, "timesteps": 60},
            "distributions": {"action": {"type": "categorical", "weights": {"name": "orthogonal", "gain": 0.01}}},
        },
    ),
    "dqn-replay": ("int", DQN),
    # the networks' arithmetic in bfloat16 under autocast: parameters and optimizer state stay float32
    "ppo-bfloat16": ("int", {**PPO, "mixed_precision": "bfloat16"}),
    "ddpg-bfloat16": ("float", {**DDPG, "mixed_precision": "bfloat16"}),
    "dqn-prioritized-preprocessed": (
        "int",
        {**DQN, **PREPROCESSING, "memory": {"type": "prioritized_replay", "capacity": 64}, "double_q_model": True},
    ),
}
STATES = np.random.default_rng(0).uniform(-1.0, 1.0, (64, 2, 1)).astype(np.float32)
PROBES = np.linspace(-1.0, 1.0, 9, dtype=np.float32).reshape(-1, 1)


def build(case: str, **changes):
    action_type, spec = CASES[case]
    env = make("minimal", action_type=action_type)
    return create_agent({**spec, **changes}, states=env.states, actions=env.actions)


def rewards(actions: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The minimal environment's scoring: int actions earn 1 for ``x > 0``, float actions ``1 - |a - x|``."""
    if actions.dtype.kind == "f":
        return np.maximum(0.0, 1.0 - np.abs(actions - x)).astype(np.float32)
    return (actions == (x > 0)).astype(np.float32)


def step(agent, t: int, rows: int, actions=None, *, length: int = 5) -> None:
    """Step ``t`` of the stream: act (unless ``actions`` were already taken) and observe. Episodes last ``length``
    steps; with 2 rows, the second row is also cut by a time limit (terminal 2, with next_states) every 7 steps."""
    states = STATES[t, :rows]
    if actions is None:
        actions = agent.act(states if rows > 1 else states[0])
    actions = np.asarray(actions).reshape(rows)
    reward = rewards(actions, states[:, 0])
    terminal = np.full(rows, int((t + 1) % length == 0), dtype=np.int8)
    if rows > 1:
        if (t + 1) % 7 == 0:
            terminal[1] = 2
        agent.observe(terminal=terminal, reward=reward, next_states=STATES[t + 1, :rows])
    else:
        agent.observe(terminal=int(terminal[0]), reward=float(reward[0]))


def drive(agent, start: int, stop: int, rows: int = 1) -> None:
    for t in range(start, stop):
        step(agent, t, rows)


def assert_trees_equal(x, y, path: str = "state") -> None:
    """Exact equality of nested dicts/lists of tensors, arrays and plain values (a numpy scalar equals a 0-d array
    of the same dtype and value)."""
    if isinstance(x, dict):
        assert isinstance(y, dict) and set(x) == set(y), f"{path}: keys {sorted(set(x) ^ set(y))}"
        for key in x:
            assert_trees_equal(x[key], y[key], f"{path}.{key}")
    elif isinstance(x, (list, tuple)):
        assert isinstance(y, (list, tuple)) and len(x) == len(y), f"{path}: lengths differ"
        for index, (u, v) in enumerate(zip(x, y, strict=True)):
            assert_trees_equal(u, v, f"{path}[{index}]")
    elif isinstance(x, torch.Tensor):
        assert isinstance(y, torch.Tensor), f"{path}: {type(y).__name__} is not a tensor"
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), f"{path}: tensors differ"
    elif isinstance(x, (np.ndarray, np.generic)):
        u, v = np.asarray(x), np.asarray(y)
        assert u.dtype == v.dtype and u.shape == v.shape, f"{path}: {u.dtype}{u.shape} vs {v.dtype}{v.shape}"
        assert np.array_equal(u, v, equal_nan=u.dtype.kind == "f"), f"{path}: arrays differ"
    else:
        assert type(x) is type(y) and x == y, f"{path}: {x!r} != {y!r}"


def assert_parameters_equal(a, b) -> None:
    pa, pb = a.get_parameters(), b.get_parameters()
    assert set(pa) == set(pb)
    for name in pa:
        assert torch.equal(pa[name], pb[name]), f"parameter {name} differs"


def probe(agent) -> np.ndarray:
    """Deterministic actions on fixed states (no exploration, no sampling, no bookkeeping)."""
    return np.asarray(agent.act(PROBES, deterministic=True, independent=True))


# ---------------------------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("case", list(CASES))
def test_checkpoint_restores_everything_into_a_fresh_agent(case, tmp_path):
    agent = build(case)
    drive(agent, 0, 23)  # mid-episode: row 0 has an open transition (and PPO staged steps)
    assert agent.updates > 0
    path = agent.save_model(tmp_path, append_timestep=True)
    assert Path(path) == tmp_path / "model-23.pt"
    manifest = json.loads((tmp_path / "model-23.json").read_text())
    assert (manifest["timestep"], manifest["episode"], manifest["updates"]) == (23, 4, agent.updates)
    assert manifest["spec"]["type"] == agent.name and manifest["spec"]["seed"] == CASES[case][1]["seed"]

    restored = build(case)
    restored.restore_model(tmp_path, "model-23")
    counters = (restored.timestep, restored.episode, restored.updates)
    assert counters == (agent.timestep, agent.episode, agent.updates)
    assert_trees_equal(agent.memory.state_dict(), restored.memory.state_dict(), "memory")
    assert_trees_equal(agent.state_dict(), restored.state_dict())
    assert_parameters_equal(agent, restored)
    np.testing.assert_array_equal(probe(agent), probe(restored))


@pytest.mark.parametrize("case", ["ppo-preprocessed", "dqn-prioritized-preprocessed"])
def test_checkpoint_with_parallel_rows(case, tmp_path):
    agent = build(case)
    drive(agent, 0, 16, rows=2)  # row 1 was truncated at step 14; both rows are mid-episode
    agent.save_model(tmp_path)
    restored = build(case)
    restored.restore_model(tmp_path)  # the latest checkpoint
    assert restored.episodes.num_rows == 2
    assert_trees_equal(agent.state_dict(), restored.state_dict())


# ---------------------------------------------------------------------------------------------- resuming


@pytest.mark.parametrize(
    ("case", "rows", "half"),
    [
        ("ppo", 1, 20),  # saved between episodes
        ("ppo", 1, 23),  # saved mid-episode
        ("ppo-preprocessed", 2, 23),
        ("ppo-timesteps-epsilon", 1, 23),
        ("ppo-timesteps-epsilon", 2, 23),
        ("ppo-float-noise", 1, 23),
        ("ppo-sequence", 2, 23),
        ("vpg-float-gae", 2, 23),
        ("trpo-gae", 1, 23),
        ("dqn-nstep", 2, 23),
        ("dqfd", 1, 23),
        ("ddpg", 2, 23),
        ("naf", 1, 23),
        ("ddpg-warmup", 2, 23),
        ("ppo-shared-value", 1, 23),
        ("dqn-replay", 1, 20),
        ("dqn-replay", 1, 23),
        ("dqn-prioritized-preprocessed", 1, 23),
        ("dqn-prioritized-preprocessed", 2, 23),
    ],
)
def test_resumed_run_equals_uninterrupted_run(case, rows, half, tmp_path):
    whole = build(case)
    drive(whole, 0, 2 * half, rows)

    first = build(case)
    drive(first, 0, half, rows)
    first.save_model(tmp_path)
    del first
    second = build(case)
    second.restore_model(tmp_path)
    drive(second, half, 2 * half, rows)

    assert second.updates == whole.updates > 0
    assert_parameters_equal(whole, second)
    assert_trees_equal(whole.state_dict(), second.state_dict())


@pytest.mark.parametrize("case", ["ppo-timesteps-epsilon", "dqn-prioritized-preprocessed"])
def test_checkpoint_between_act_and_observe(case, tmp_path):
    whole = build(case)
    drive(whole, 0, 30)

    first = build(case)
    drive(first, 0, 12)
    actions = first.act(STATES[12, 0])  # saved with the action taken and the reward still to come
    first.save_model(tmp_path)
    second = build(case)
    second.restore_model(tmp_path)
    with pytest.raises(RuntimeError, match="act\\(\\) was called twice"):
        second.act(STATES[12, 0])
    step(second, 12, 1, actions)
    drive(second, 13, 30)
    assert_parameters_equal(whole, second)
    assert_trees_equal(whole.state_dict(), second.state_dict())


def test_restore_into_a_used_agent_drops_what_it_had_open(tmp_path):
    case = "ppo-timesteps-epsilon"
    reference = build(case)
    reference.save_model(tmp_path)  # no rows yet: nothing open, nothing staged
    drive(reference, 0, 20)

    used = build(case)
    drive(used, 0, 13)  # open transitions and staged steps that must not leak into the restored memory
    used.act(STATES[13, 0])  # even right after an act
    used.restore_model(tmp_path, "model-0")
    assert used.timestep == 0 and used.memory.state_dict()["size"] == 0
    drive(used, 0, 20)
    assert_parameters_equal(reference, used)
    assert_trees_equal(reference.state_dict(), used.state_dict())


def test_a_checkpoint_of_other_preprocessing_is_refused_before_anything_loads(tmp_path):
    """An agent rebuilt without the run-long standardization it trained with would act on raw states, silently."""
    standardized = [
        {"type": "running_standardize", "reset_after_batch": False},
        {"type": "clip", "min_value": -5.0, "max_value": 5.0},
    ]
    trained = build("ppo", states_preprocessing=standardized)
    drive(trained, 0, 7)
    trained.save_model(tmp_path / "run")
    for changes, message in [
        ({}, r"states_preprocessing: 'state': 2 steps there, none here"),
        ({"states_preprocessing": standardized[:1]}, r"'state': 2 steps there, 'state': 1 step here"),
        (
            {
                "states_preprocessing": [{"type": "clip", "min_value": -5.0, "max_value": 5.0}, standardized[0]]
            },  # other kinds in order
            r"'state': 2 steps there, 'state': 2 steps here",
        ),
        (
            {
                "states_preprocessing": standardized,
                "reward_preprocessing": [{"type": "clip", "min_value": -1.0, "max_value": 1.0}],
            },
            "the checkpoint's agent has no reward_preprocessing and this one a",
        ),
    ]:
        other = build("ppo", **changes)
        before = {name: value.clone() for name, value in other.get_parameters().items()}
        with pytest.raises(ValueError, match=message):
            other.restore_model(tmp_path / "run")
        assert other.timestep == 0  # nothing loaded
        assert all(torch.equal(before[name], value) for name, value in other.get_parameters().items())
    plain = build("ppo")
    drive(plain, 0, 7)
    plain.save_model(tmp_path / "plain")
    with pytest.raises(ValueError, match="'state': 2 steps here"):
        build("ppo", states_preprocessing=standardized).restore_model(tmp_path / "plain")
    same = build("ppo", states_preprocessing=standardized)
    same.restore_model(tmp_path / "run")
    assert same.timestep == 7


def test_restore_errors_and_file_forms(tmp_path, monkeypatch):
    agent = build("ppo")
    drive(agent, 0, 7)
    path = Path(agent.save_model(tmp_path / "run"))
    other = build("ppo")
    other.restore_model(file=str(path))  # a path of its own, no directory
    assert other.timestep == 7
    monkeypatch.chdir(tmp_path)
    other = build("ppo")
    other.restore_model(file="run/model-7")  # relative to the working directory, .pt optional
    assert other.timestep == 7
    with pytest.raises(ValueError, match="checkpoint is of a 'ppo' agent; it cannot be restored into a 'dqn'"):
        build("dqn-replay").restore_model(tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        build("ppo").restore_model(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        build("ppo").restore_model(tmp_path / "run", "model-99")
    with pytest.raises(ValueError, match="needs a directory or a file"):
        build("ppo").restore_model()
    with pytest.raises(ValueError, match="saved memory has capacity"):
        build("ppo", memory={"type": "latest", "capacity": 123}).restore_model(tmp_path / "run")
    wider = build("ppo", network=[{"type": "dense", "size": 16}])
    drive(wider, 0, 3)
    with pytest.raises(ValueError, match=r"'policy.network.dense0.weight' has shape \[8, 1\], this agent's \[16, 1\]"):
        wider.restore_model(tmp_path / "run")
    assert (wider.timestep, wider.episodes.num_rows) == (3, 1)  # a checkpoint that does not fit changes no bookkeeping
    assert load_checkpoint(path)["agent"] == "ppo"


def test_random_agent_restores_its_rng(tmp_path):
    env = make("minimal", action_type="int")
    spec = {"type": "random", "seed": 5}
    agent = create_agent(spec, states=env.states, actions=env.actions)
    drive(agent, 0, 6)
    agent.save_model(tmp_path)
    expected = [agent.act(STATES[t, 0], independent=True) for t in range(10)]
    restored = create_agent(spec, states=env.states, actions=env.actions)
    restored.restore_model(tmp_path)
    assert restored.timestep == 6 and restored.episode == 1
    assert [restored.act(STATES[t, 0], independent=True) for t in range(10)] == expected


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_resume_on_cuda_restores_the_device_rng(tmp_path):
    whole = build("ppo-float-noise", device="cuda")
    drive(whole, 0, 30)
    first = build("ppo-float-noise", device="cuda")
    drive(first, 0, 15)
    first.save_model(tmp_path)
    torch.cuda.manual_seed(12345)  # whatever happened on the device since must not matter
    second = build("ppo-float-noise", device="cuda")
    second.restore_model(tmp_path)
    drive(second, 15, 30)
    assert_parameters_equal(whole, second)


# ---------------------------------------------------------------------------------------------- seeds


@pytest.mark.parametrize("case", ["ppo-preprocessed", "ppo-float-noise", "dqn-prioritized-preprocessed"])
def test_same_seed_same_run_and_other_seed_another(case):
    def run(seed):
        agent = build(case, seed=seed)
        actions = []
        for t in range(30):
            action = agent.act(STATES[t, 0])
            actions.append(np.asarray(action).item())
            step(agent, t, 1, action)
        return agent, actions

    first, first_actions = run(11)
    second, second_actions = run(11)
    assert first_actions == second_actions
    assert first.updates == second.updates > 0
    assert_parameters_equal(first, second)
    assert_trees_equal(first.state_dict(), second.state_dict())

    third, third_actions = run(12)
    differ = [not torch.equal(value, third.get_parameters()[name]) for name, value in first.get_parameters().items()]
    assert any(differ) and first_actions != third_actions


# ---------------------------------------------------------------------------------------------- parameters


def test_get_and_set_parameters_round_trip():
    source, target = build("ppo", seed=1), build("ppo", seed=2)
    parameters = source.get_parameters()
    assert set(parameters) == set(target.get_parameters())
    assert any(name.startswith("baseline.") for name in parameters)
    target.set_parameters(parameters)
    assert_parameters_equal(source, target)
    np.testing.assert_array_equal(probe(source), probe(target))
    parameters[next(iter(parameters))].add_(1.0)  # a copy: changing it leaves the agent alone
    assert_parameters_equal(source, target)
    name = next(iter(parameters))
    with pytest.raises(ValueError, match=f"parameter {name} has shape"):
        target.set_parameters({name: torch.zeros(())})
    with pytest.raises(KeyError, match="unknown parameters"):
        target.set_parameters({"policy.nothing": torch.zeros(1)})
    with pytest.raises(KeyError, match="unknown parameters"):
        target.apply_update({"policy.nothing": torch.zeros(1)})


@pytest.mark.parametrize("case", ["ppo", "ppo-timesteps-epsilon", "dqn-prioritized-preprocessed"])
def test_compute_update_then_apply_update_equals_an_update(case, tmp_path):
    worker = build(case)
    drive(worker, 0, 23)
    worker.save_model(tmp_path)
    before = worker.get_parameters()
    updates = worker.updates
    deltas = worker.compute_update()
    assert set(deltas) == set(before)
    assert any(bool(delta.abs().sum() > 0) for delta in deltas.values())
    for name, value in worker.get_parameters().items():
        assert torch.equal(value, before[name]), f"compute_update changed {name}"
    assert worker.updates == updates
    worker.apply_update(deltas)
    assert worker.updates == updates + 1

    reference = build(case)
    reference.restore_model(tmp_path)
    reference._update(reference._next_batch())  # what _maybe_update does for a due update
    # before + (after - before) is after up to float rounding
    expected, got = reference.get_parameters(), worker.get_parameters()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0.0, atol=1e-6, msg=f"{name} differs")
    assert_trees_equal(reference.memory.state_dict(), worker.memory.state_dict(), "memory")
    assert_trees_equal(
        {name: o.state_dict() for name, o in reference.optimizers().items()},
        {name: o.state_dict() for name, o in worker.optimizers().items()},
        "optimizers",
    )


NORMALIZED = [  # batch normalization's running statistics and dropout's draws: state that a training pass moves
    {"type": "dense", "size": 8},
    {"type": "tf_layer", "layer": "batch_normalization"},
    {"type": "dropout", "rate": 0.2},
    {"type": "dense", "size": 8},
]


@pytest.mark.parametrize("case", ["ppo", "vpg-float-gae", "trpo-gae"])
def test_summaries_change_nothing_in_training_and_a_resumed_run_matches(case, tmp_path):
    """A reported update makes one more pass of the policy for its statistics; in eval mode it moves no running
    statistics and draws nothing, so training with summaries equals training without them, and a run paused and
    resumed (whose summarizer reports other updates) equals the uninterrupted one."""

    def agent(summaries: str | None = None):
        summarizer = {} if summaries is None else {"summarizer": {"directory": str(tmp_path / summaries), "steps": 7}}
        return build(case, network=NORMALIZED, **summarizer)

    plain = agent()  # each built and driven in turn: dropout draws from torch's global generator, which a seed sets
    drive(plain, 0, 46)
    logged = agent("logged")
    drive(logged, 0, 46)
    assert plain.updates == logged.updates >= 3
    assert_trees_equal(plain.state_dict()["modules"], logged.state_dict()["modules"])
    first = agent("first")
    drive(first, 0, 23)
    first.save_model(str(tmp_path / "paused"))
    second = agent("second")
    second.restore_model(str(tmp_path / "paused"))
    drive(second, 23, 46)
    assert_trees_equal(logged.state_dict()["modules"], second.state_dict()["modules"])


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        ("cut", "damaged, or not a torchforce checkpoint ("),
        ("list", "it holds a list, not a checkpoint's dict"),
        ("parts", "KeyError: 'modules'"),
        ("code", "UnpicklingError"),
        ("pointer", "no checkpoint's file name in it"),
    ],
)
def test_a_damaged_or_foreign_checkpoint_is_an_error_naming_the_file(tmp_path, damage, words):
    """Restoring a file cut short, one that holds something else, one missing a part, or one that would run code
    gives one error naming the file (and runs nothing), not an OSError, AttributeError or KeyError of its insides."""
    import pickle

    from torchforce.agents.checkpoint import CheckpointError

    agent = build("ppo")
    drive(agent, 0, 5)
    path = Path(agent.save_model(str(tmp_path), append_timestep=False))
    if damage == "cut":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "list":
        torch.save([1, 2, 3], path)
    elif damage == "parts":
        payload = torch.load(path, weights_only=True)
        torch.save({key: value for key, value in payload.items() if key != "modules"}, path)
    elif damage == "code":
        path.write_bytes(pickle.dumps(print))  # a pickle that would call something
    else:
        (tmp_path / "checkpoint").write_text("{not json")
    with pytest.raises(CheckpointError) as error:
        build("ppo").restore_model(str(tmp_path))
    shown = str(error.value)
    assert words in shown and (str(path) in shown or damage == "pointer")
    assert "weights_only" not in shown  # torch's advice to load a file from others unsafely is not passed on


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"memory": {"type": "latest", "capacity": 123}}, "capacity"),
        ({"network": [{"type": "dense", "size": 9}, {"type": "dense", "size": 8}]}, "other parameters"),
        ({"network": [{"type": "dense", "size": 9}]}, "has shape"),
    ],
)
def test_a_checkpoint_of_another_spec_fails_before_anything_changed(tmp_path, changes, words):
    """Another memory capacity or another network: the restore fails, and the agent is as it was (its parameters,
    its optimizer's state and its memory), where torch had copied every tensor that fitted before it raised."""
    saved = build("ppo")
    drive(saved, 0, 30)
    saved.save_model(str(tmp_path), append_timestep=False)
    other = build("ppo", seed=9, **changes)
    drive(other, 0, 12)
    before = other.state_dict()
    with pytest.raises(ValueError, match=words):
        other.restore_model(str(tmp_path))
    assert_trees_equal(before, other.state_dict())
