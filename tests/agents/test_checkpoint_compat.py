"""Checkpoints written by older code still restore: the fixtures of ``data/checkpoints_v1/`` (a recurrent PPO with a
``sequence`` preprocessor and PPO on timesteps saved mid-episode with two rows, DQN with a replay and with a
prioritized replay memory, DDPG) were saved by the agents of format 1, together with what each agent did next in
memory (``expected.json``). A fresh agent restored from each must do exactly that: the same actions (sampling and
exploration draw from the restored RNG states), the same updates and the same parameters.

``data/make_checkpoints_v1.py`` wrote them; it drives the agents, and this test reuses its stream and steps.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data"
spec = importlib.util.spec_from_file_location("make_checkpoints_v1", DATA / "make_checkpoints_v1.py")
generator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generator)
EXPECTED = json.loads((generator.FOLDER / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(generator.CASES))
def test_a_v1_checkpoint_continues_as_the_saved_agent_did(name: str) -> None:
    expected = EXPECTED[name]
    agent = generator.build(name)
    agent.restore_model(generator.FOLDER / name)
    assert agent.timestep == expected["saved_after"] * generator.CASES[name][1]
    got = generator.outcome(agent, name, expected["saved_after"])
    assert got["counters"] == expected["counters"]
    np.testing.assert_allclose(np.asarray(got["actions"], dtype=np.float64), expected["actions"], rtol=1e-6, atol=1e-6)
    assert got["parameters"].keys() == expected["parameters"].keys()
    for key, value in expected["parameters"].items():
        assert got["parameters"][key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


@pytest.mark.parametrize("name", sorted(generator.CASES))
def test_a_v1_checkpoint_saves_again_as_it_was(name: str, tmp_path: Path) -> None:
    """Restored and saved at once, an agent writes the same state tree it read."""
    from torchforce.agents.checkpoint import load_checkpoint

    agent = generator.build(name)
    agent.restore_model(generator.FOLDER / name)
    agent.save_model(tmp_path, append_timestep=False)
    before = load_checkpoint(generator.FOLDER / name / "model.pt")
    after = load_checkpoint(tmp_path / "model.pt")
    assert_trees_equal(rows_in_use(before), without_fallbacks(in_full(after), before))


@pytest.mark.parametrize("name", sorted(generator.CASES))
def test_a_v1_checkpoint_restores_for_acting_as_in_full(name: str) -> None:
    """Checkpoints of older code restore only to act too (their memory is left unread): the same parameters, and
    the same actions, deterministic and explored or sampled, for acts that record nothing."""
    rows = generator.CASES[name][1]

    def acting(for_acting: bool) -> tuple[dict, list]:
        agent = generator.build(name)
        agent.restore_model(generator.FOLDER / name, for_acting=for_acting)
        parameters = agent.get_parameters()
        states = generator.STREAM[40:46, :rows]
        done = [np.asarray(agent.act(s, deterministic=True, independent=True)) for s in states]
        return parameters, done + [np.asarray(agent.act(s, independent=True)) for s in states]

    whole, light = acting(False), acting(True)  # one after the other: torch's global generator is part of both
    assert whole[0].keys() == light[0].keys()
    assert all(np.array_equal(whole[0][key], light[0][key]) for key in whole[0])
    for got, wanted in zip(light[1], whole[1], strict=True):
        np.testing.assert_array_equal(got, wanted)


def without_fallbacks(tree, saved):
    """``tree`` without the fields format 1 did not have and their fallbacks filled in (``next_internals/x``, each a
    copy of ``internals/x`` where the checkpoint had none), checked to be those copies."""
    if not isinstance(tree, dict):
        return tree
    kept = {}
    for key, value in tree.items():
        if isinstance(saved, dict) and key not in saved and key.startswith("next_internals/"):
            np.testing.assert_array_equal(np.asarray(value), np.asarray(tree["internals/" + key.split("/", 1)[1]]))
            continue
        kept[key] = without_fallbacks(value, saved.get(key) if isinstance(saved, dict) else None)
    return kept


def in_full(tree):
    """The tree with each memory's linked next states written out in its data, as format 1 stored them: row i's next
    states are the states of row ``successor[i]``, or those held apart for it."""
    if isinstance(tree, dict):
        if "next_states" in tree and {"capacity", "data", "size"} <= tree.keys():
            links, data = tree["next_states"], dict(tree["data"])
            successor = np.asarray(links["successor"])
            apart = np.flatnonzero(successor < 0)
            assert np.asarray(links["rows"]).tolist() == apart.tolist()
            for name, held in links["values"].items():
                values = np.asarray(data["states/" + name[len("next_states/") :]])[np.maximum(successor, 0)]
                values[apart] = held
                data[name] = values
            order = list(tree["data"])  # format 1's field order: each next_states field after its states field
            for name in links["values"]:
                order.insert(order.index("states/" + name[len("next_states/") :]) + 1, name)
            rest = {key: value for key, value in tree.items() if key != "next_states"}
            return {**rest, "data": {name: data[name] for name in order}}
        return {key: in_full(value) for key, value in tree.items()}
    return tree


def rows_in_use(tree):
    """The tree with each memory's data cut to its rows in use: format 1 saved all ``capacity`` rows (the rest
    zeros), and memories now save only those they hold."""
    if isinstance(tree, dict):
        if {"capacity", "data", "size", "next"} <= tree.keys():
            for values in tree["data"].values():
                assert not np.asarray(values)[tree["size"] :].any()
            return {**tree, "data": {key: values[: tree["size"]] for key, values in tree["data"].items()}}
        return {key: rows_in_use(value) for key, value in tree.items()}
    return tree


def assert_trees_equal(a, b, path: str = "") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_trees_equal(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_trees_equal(x, y, f"{path}[{index}]")
    elif isinstance(a, np.ndarray) or hasattr(a, "numpy"):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=path)
    else:
        assert a == b, path
