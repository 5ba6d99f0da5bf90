"""Next states kept once: a memory links each row to the stored row whose states are its next states, and every
retrieval still returns exactly the next states that were stored. Checked against a plain list of every stored row,
over random streams whose states often repeat (so that links by value are tempted everywhere)."""

import numpy as np
import pytest

from torchforce.core.memories import FieldSpec, build_memory

FIELDS = {
    "states/x": FieldSpec((2,), np.float32),
    "next_states/x": FieldSpec((2,), np.float32),
    "states/frame": FieldSpec((32, 32), np.uint8),  # with x: 1,032 bytes a row, enough to link (LINK_BYTES)
    "next_states/frame": FieldSpec((32, 32), np.uint8),
    "actions/a": FieldSpec((), np.int64),
    "terminal": FieldSpec((), np.int8),
    "reward": FieldSpec((), np.float32),
}
STATES = ("x", "frame")


def one_state(shape, dtype, name="x"):
    """The fields of a memory with one state of ``shape`` and ``dtype``, and its next state."""
    return {
        f"states/{name}": FieldSpec(shape, dtype),
        f"next_states/{name}": FieldSpec(shape, dtype),
        "terminal": FieldSpec((), np.int8),
        "reward": FieldSpec((), np.float32),
    }


def make(kind, capacity, seed=0, fields=FIELDS):
    return build_memory({"type": kind, "capacity": capacity}, fields, rng=np.random.default_rng(seed))


class Streams:
    """``count`` environments stepping at once, with states drawn from a few values (repeats are common), episodes
    that end (terminal 1: the next state is the state itself) or are cut (terminal 2: a final state of its own)."""

    def __init__(self, count, rng):
        self.count, self.rng, self.serial = count, rng, 0
        self.states = [self._state() for _ in range(count)]

    def _state(self):
        self.serial += 1
        pick = int(self.rng.integers(0, 4))
        return {
            "x": np.array([pick, -pick], dtype=np.float32),
            "frame": np.full((32, 32), pick * 10, dtype=np.uint8),
        }

    def step(self):
        """One transition per environment: (row, whether its episode ended)."""
        transitions = []
        for env in range(self.count):
            state, terminal = self.states[env], int(self.rng.choice([0, 0, 0, 0, 0, 0, 1, 2]))
            following = state if terminal == 1 else self._state()
            self.serial += 1
            row = {
                **{f"states/{name}": state[name] for name in STATES},
                **{f"next_states/{name}": following[name] for name in STATES},
                "actions/a": np.int64(self.serial),  # every row recognizable
                "terminal": np.int8(terminal),
                "reward": np.float32(env),
            }
            self.states[env] = self._state() if terminal else following
            transitions.append((row, terminal > 0))
        return transitions


def batch_of(rows):
    return {name: np.stack([row[name] for row in rows]) for name in FIELDS}


def check_contents(memory, expected):
    links = memory._next_states  # every stored row links to a row, or holds its next states apart: never both
    assert sorted(links.held) == np.flatnonzero(links.successor[: len(memory)] < 0).tolist()
    assert sorted(row for rows in links.waiting.values() for row in rows) == sorted(links.held)
    contents = memory.contents()
    assert len(contents["reward"]) == len(expected)
    for name in FIELDS:
        want = np.stack([row[name] for row in expected])
        assert contents[name].tobytes() == want.tobytes(), name


@pytest.mark.parametrize("kind", ["replay", "latest", "prioritized_replay"])
@pytest.mark.parametrize("order", ["transitions", "segments"])
def test_retrievals_return_every_stored_next_state(kind, order):
    """Stored as an off-policy agent stores (ended rows at once, the others at the next step) or as an on-policy one
    (each environment's steps as one segment every few steps), over several wraps of the ring."""
    rng = np.random.default_rng(7)
    streams, memory, stored = Streams(3, rng), make(kind, 23), []
    pending, segments = [], [[] for _ in range(3)]

    def store(rows):
        if rows:
            memory.store(batch_of(rows))
            stored.extend(rows)
            check_contents(memory, stored[-memory.capacity :])

    for step in range(120):
        transitions = streams.step()
        if order == "transitions":
            store(pending)
            store([row for row, ended in transitions if ended])
            pending = [row for row, ended in transitions if not ended]
        else:
            for env, (row, _) in enumerate(transitions):
                segments[env].append(row)
            if step % 5 == 4:
                store([row for segment in segments for row in segment])
                segments = [[] for _ in range(3)]
    # held apart: at most each environment's newest row and the rows whose final state no row has
    finals = sum(int(row["terminal"] == 2) for row in stored[-memory.capacity :])
    assert len(memory._next_states) <= 3 + finals
    assert len(memory._next_states) < memory.capacity // 2  # links, not copies, hold most next states


def test_a_stream_of_frames_stores_each_frame_once():
    fields = one_state((4, 84, 84), np.uint8, "frame")
    memory, rng = make("replay", 200, fields=fields), np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(4, 84, 84), dtype=np.uint8)
    for step in range(500):
        following = np.concatenate([frames[1:], rng.integers(0, 256, size=(1, 84, 84), dtype=np.uint8)])
        terminal = np.int8(step % 97 == 96)
        memory.store(
            {
                "states/frame": frames[None],
                "next_states/frame": (frames if terminal else following)[None],
                "terminal": terminal[None],
                "reward": np.zeros(1, np.float32),
            }
        )
        frames = following
    frame_stack = 4 * 84 * 84
    # the ring's frame stacks, one held next state (the newest row's), the links: not a second copy of the ring
    assert len(memory._next_states) == 1
    assert memory.nbytes < 200 * frame_stack + 2 * frame_stack + 200 * 8 + 200 * 5
    contents = memory.contents()  # oldest first: each row's successor is the row after it
    for age in range(199):
        following = contents["states/frame"][age if contents["terminal"][age] else age + 1]
        assert np.array_equal(contents["next_states/frame"][age], following)


def test_links_compare_bytes_not_values():
    """-0.0 equals 0.0 as a float but is another state: a row whose next state is -0.0 keeps it."""
    memory = make("replay", 8)
    rows = []
    for sign in (1.0, -1.0, 1.0):
        state = np.array([0.0, 1.0], dtype=np.float32)
        following = np.array([0.0 * sign, 1.0], dtype=np.float32)
        rows.append(
            {
                "states/x": state,
                "next_states/x": following,
                "states/frame": np.zeros((32, 32), np.uint8),
                "next_states/frame": np.zeros((32, 32), np.uint8),
                "actions/a": np.int64(0),
                "terminal": np.int8(0),
                "reward": np.float32(0),
            }
        )
    memory.store(batch_of(rows))
    check_contents(memory, rows)
    assert np.signbit(memory.contents()["next_states/x"][1, 0])


def filled(kind="replay", seed=3):
    rng = np.random.default_rng(seed)
    streams, memory, stored, pending = Streams(2, rng), make(kind, 17), [], []
    for _ in range(40):
        transitions = streams.step()
        for rows in (pending, [row for row, ended in transitions if ended]):
            if rows:
                memory.store(batch_of(rows))
                stored.extend(rows)
        pending = [row for row, ended in transitions if not ended]
    return memory, stored, streams, pending


@pytest.mark.parametrize("kind", ["replay", "prioritized_replay"])
def test_links_and_held_next_states_save_and_continue_exactly(kind):
    memory, stored, streams, pending = filled(kind)
    state = memory.state_dict()
    assert "next_states/x" not in state["data"]  # the saved ring holds each state once
    restored = make(kind, 17, seed=99)
    restored.load_state_dict(state)
    check_contents(restored, stored[-17:])
    for each in (memory, restored):
        each.store(batch_of(pending))
    for _ in range(3):
        one, other = memory.retrieve_timesteps(9), restored.retrieve_timesteps(9)
        assert all(np.array_equal(one[name], other[name]) for name in one)
    assert restored.state_dict()["next_states"]["rows"].tolist() == memory.state_dict()["next_states"]["rows"].tolist()


def test_a_memory_saved_with_its_next_states_in_full_loads():
    """Checkpoints from before the links store next states like any field: they load, and link where they can."""
    memory, stored, _, _ = filled()
    state = memory.state_dict()
    contents = memory.contents()
    order = np.argsort(contents.pop("indices"))
    full = dict(state)
    del full["next_states"]
    full["data"] = {name: contents[name][order] for name in FIELDS}
    restored = make("replay", 17)
    restored.load_state_dict(full)
    check_contents(restored, stored[-17:])
    assert len(restored._next_states) < 17


def test_bad_saved_links_are_refused_and_change_nothing():
    memory, stored, _, _ = filled()
    target, _, _, _ = filled(seed=11)
    before = target.contents()
    good = memory.state_dict()
    for change, message in [
        (lambda links: links.update(successor=links["successor"][:-1]), "successor must be 17 int64"),
        (lambda links: links["successor"].__setitem__(0, 17), "must be -1 or one of the 17 stored rows"),
        (lambda links: links.update(rows=links["rows"][1:]), "rows must be the rows whose successor is -1"),
        (lambda links: links["values"].pop("next_states/x"), "values must hold the fields"),
        (lambda links: links["values"].update({"next_states/x": links["values"]["next_states/x"][:, :1]}), "shape"),
    ]:
        state = memory.state_dict()
        change(state["next_states"])
        with pytest.raises(ValueError, match=message):
            target.load_state_dict(state)
    state = memory.state_dict()
    successor = state["next_states"]["successor"]
    ages = (np.arange(17) - memory._next) % 17
    row = np.flatnonzero((successor >= 0) & (ages > 0))[0]
    successor[row] = memory._next  # the oldest row: overwritten first, before the row that links to it
    with pytest.raises(ValueError, match="links to an older row"):
        target.load_state_dict(state)
    del good["next_states"]
    with pytest.raises(ValueError, match="has no next_states"):
        target.load_state_dict(good)
    after = target.contents()
    assert all(np.array_equal(before[name], after[name]) for name in before)


def test_a_fingerprint_match_is_not_a_link():
    """Fingerprints sample a few bytes: states that agree there and differ elsewhere are different states."""
    fields = one_state((2000,), np.uint8)
    memory = make("replay", 4, fields=fields)
    first, second = np.zeros(2000, np.uint8), np.ones(2000, np.uint8)
    almost = second.copy()
    almost[1] = 9  # byte 1 is not among the fingerprint's 64 samples of 2000 bytes
    for state, following in [(first, second), (almost, first)]:
        row = {"states/x": state, "next_states/x": following, "terminal": np.int8(0), "reward": np.float32(0)}
        memory.store({name: np.asarray(value)[None] for name, value in row.items()})
    contents = memory.contents()
    np.testing.assert_array_equal(contents["next_states/x"], [second, first])
    assert len(memory._next_states) == 2  # the first row's next state is still held: no row has it


def test_small_states_are_stored_twice():
    """Under LINK_BYTES a row, a copy is cheaper than a link: CartPole's 16 bytes are stored as they come."""
    fields = one_state((4,), np.float32)
    memory = make("replay", 5, fields=fields)
    assert memory._next_states is None and "next_states/x" in memory.state_dict()["data"]
    states = np.arange(12, dtype=np.float32).reshape(3, 4)
    memory.store(
        {
            "states/x": states,
            "next_states/x": -states,
            "terminal": np.zeros(3, np.int8),
            "reward": np.zeros(3, np.float32),
        }
    )
    np.testing.assert_array_equal(memory.contents()["next_states/x"], -states)
