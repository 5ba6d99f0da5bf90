"""log pi_old(a|s) and V(s) kept from acting (``PolicyGradientAgent._acted_fields``): for image states an update
takes them from the rows as acting computed them, runs the policy over the rows acted with other parameters, and
gets what a pass over the whole batch would give; checkpoints keep them, and older ones without them still load."""

import copy

import numpy as np
import pytest
import torch

from torchforce.agents import create_agent
from torchforce.agents.policy_gradient import ACTED_BYTES, PolicyGradientAgent

IMAGE = {"type": "uint8", "shape": (32, 32, 4)}  # 4,096 bytes a row
ACTION = {"type": "int", "num_actions": 3}
CONV = [
    {"type": "divide", "scale": 255},
    {"type": "conv2d", "size": 4, "window": 4, "stride": 4},
    {"type": "flatten"},
    {"type": "dense", "size": 16},
]
SHARED = {"baseline_mode": "network", "baseline": {"type": "mlp", "sizes": []}}
ROWS = 3  # environments acted at once; an update every 4 acts (12 timesteps)


def ppo(states=IMAGE, **options):
    spec = {
        "type": "ppo",
        "network": CONV,
        "update_mode": {"unit": "timesteps", "batch_size": 12, "frequency": 12},
        "memory": {"type": "latest", "capacity": 24},
        "epochs": 2,
        "minibatch_size": 6,
        "seed": 0,
        **SHARED,
        **options,
    }
    return create_agent(spec, states=states, actions=ACTION)


def play(agent, acts, seed=0):
    """``acts`` steps of ``ROWS`` rows of random images, each row's episode ending every 5 steps."""
    generator = np.random.default_rng(seed)
    shape = agent.states_spec["state"].shape
    for step in range(acts):
        agent.act(generator.integers(0, 256, (ROWS, *shape), dtype=np.uint8))
        terminal = np.full(ROWS, int(step % 5 == 4), dtype=np.int8)
        agent.observe(terminal=terminal, reward=generator.normal(size=ROWS).astype(np.float32))


def watching(agent):
    """Per update: the rows each pass of the collecting policy ran on, and the kept values against a pass over the
    whole batch with the parameters of the update's start."""
    updates = []
    collecting, passing = agent._collecting_policy, agent._pass

    def counted(states, internals, actions):
        updates[-1]["passes"].append(len(next(iter(actions.values()))))
        return passing(states, internals, actions)

    def compared(batch):
        updates.append({"passes": []})
        log_prob, values = collecting(batch)
        whole = PolicyGradientAgent._pass(agent, batch.states, batch.internals, batch.actions)
        updates[-1].update(log_prob=(log_prob, whole[0]), values=(values, whole[1]), size=len(batch))
        return log_prob, values

    agent._pass, agent._collecting_policy = counted, compared
    return updates


def assert_as_a_pass(update):
    for kept, passed in (update["log_prob"], update["values"]):
        torch.testing.assert_close(kept, passed, rtol=1e-6, atol=1e-6)


def test_an_update_takes_log_pi_old_and_v_from_acting():
    agent = ppo()
    assert ACTED_BYTES == 4096 and agent._records_acting
    assert {"acted/log_prob", "acted/value", "acted/version"} <= agent.fields.keys()
    updates = watching(agent)
    play(agent, 9)  # two updates
    assert [update["passes"] for update in updates] == [[], []]  # no pass over the batch
    assert [update["size"] for update in updates] == [12, 12]
    for update in updates:
        assert_as_a_pass(update)


def test_rows_acted_with_other_parameters_run_through_the_policy():
    agent = ppo()
    updates = watching(agent)
    play(agent, 2)  # 6 rows acted with the first parameters (two of them complete only at the next act)
    agent.set_parameters({name: value + 0.01 for name, value in agent.get_parameters().items()})
    play(agent, 3, seed=1)  # the update at the third act
    assert updates[0]["passes"] == [6]
    assert_as_a_pass(updates[0])


def test_actions_changed_by_exploration_are_what_the_log_probabilities_are_of():
    agent = ppo(actions_exploration={"type": "constant", "constant": 1.0})  # every action replaced, at random
    updates = watching(agent)
    play(agent, 5)
    assert updates[0]["passes"] == []
    assert_as_a_pass(updates[0])


def test_a_worker_sharing_the_model_sees_its_rows_go_stale():
    from torchforce.execution.sharing import share_model

    main, worker = ppo(), ppo()
    share_model(worker, main)
    updates = watching(worker)
    play(worker, 2)
    play(main, 5, seed=1)  # the main agent's update changes the shared parameters
    play(worker, 3, seed=2)
    assert updates[0]["passes"] == [6]
    assert_as_a_pass(updates[0])


@pytest.mark.parametrize(
    "options",
    [
        {"states": {"type": "uint8", "shape": (8, 8, 4)}},  # 256 bytes a row: a pass is cheaper
        {"baseline_mode": "states", "baseline": {"type": "cnn", "conv_sizes": [4], "dense_sizes": []}},
        {"variable_noise": 0.1},
        {"network": [*CONV, {"type": "dropout", "rate": 0.5}]},
    ],
    ids=["small states", "a baseline network of its own", "variable noise", "dropout"],
)
def test_what_acting_computes_is_not_kept_where_an_update_computes_otherwise(options):
    agent = ppo(**options)
    assert not agent._records_acting
    updates = watching(agent)
    play(agent, 5)
    assert updates[0]["passes"] == [12]


def strip_acted(state):
    """A checkpoint as code before log pi_old and V were kept wrote it."""
    state = dict(state)
    del state["parameters_version"]
    memory = dict(state["memory"])
    memory["data"] = {name: data for name, data in memory["data"].items() if not name.startswith("acted/")}
    state["memory"] = memory
    state["open"] = {**state["open"], "record": dict(state["open"]["record"])}
    state["segments"] = {**state["segments"], "buffer": dict(state["segments"]["buffer"])}
    for staged in (state["open"]["record"], state["segments"]["buffer"]):
        for name in [name for name in staged if name.startswith("acted/")]:
            del staged[name]
    return state


@pytest.mark.parametrize("older", [False, True], ids=["saved with them", "saved without them"])
def test_a_checkpoint_continues_exactly(older):
    straight, restored = ppo(), ppo()
    play(straight, 7)  # one update, then rows acted with its parameters in the memory's newest segment and staged
    state = copy.deepcopy(straight.state_dict())  # its module tensors are the live parameters
    play(straight, 4, seed=1)
    restored.load_state_dict(strip_acted(state) if older else state)  # torch's generator too: as it was then
    updates = watching(restored)
    play(restored, 4, seed=1)
    assert updates[0]["passes"] == ([9] if older else [])  # the 9 restored rows of the 12 (3 acted since)
    assert_as_a_pass(updates[0])
    for name, value in straight.get_parameters().items():
        torch.testing.assert_close(restored.get_parameters()[name], value, rtol=0, atol=1e-6 if older else 0)


def test_experience_imported_has_no_acted_values():
    agent = ppo()
    images = np.random.default_rng(0).integers(0, 256, (4, 32, 32, 4), dtype=np.uint8)
    agent.import_experience(
        {"states": list(images), "actions": [0, 1, 2, 0], "terminal": [0, 0, 0, 1], "reward": [1.0] * 4}
    )
    contents = agent.memory.contents()
    assert contents["acted/version"].tolist() == [0, 0, 0, 0]  # no parameters' version: they run through the policy
    assert contents["acted/log_prob"].tolist() == [0.0] * 4
