"""Frames kept once (``stacked_frames``): a memory pools each distinct plane of its image states, and every retrieval
still returns exactly the states that were stored. Checked against the same memory without pooling, fed the same rows
and drawing with the same generator, over streams of frame stacks from several environments at once, whose frames
often repeat (so that sharing by value is tempted everywhere)."""

import numpy as np
import pytest

from torchforce.core.memories import FieldSpec, build_memory
from torchforce.core.memories import frames as frames_module
from torchforce.spec import SpecError

SHAPE = (12, 10, 4)  # height, width, 4 stacked frames: 480 bytes a stack, linked next states (LINK_BYTES)
FIELDS = {
    "states/screen": FieldSpec(SHAPE, np.uint8),
    "next_states/screen": FieldSpec(SHAPE, np.uint8),
    "states/vector": FieldSpec((3,), np.float32),  # not an image: kept in the ring
    "next_states/vector": FieldSpec((3,), np.float32),
    "actions/a": FieldSpec((), np.int64),
    "terminal": FieldSpec((), np.int8),
    "reward": FieldSpec((), np.float32),
}


def make(kind, capacity, stacked=True, seed=0, fields=FIELDS):
    spec = {"type": kind, "capacity": capacity, "stacked_frames": stacked}
    return build_memory(spec, fields, rng=np.random.default_rng(seed))


class Stacks:
    """``count`` environments at once, each showing its last 4 frames; a new frame is one of a few (repeats are
    common, also across environments); episodes end (1) or are cut (2: a final state of their own)."""

    def __init__(self, count, rng):
        self.count, self.rng, self.serial = count, rng, 0
        self.stacks = [self._start() for _ in range(count)]

    def _frame(self):
        return np.full(SHAPE[:2], int(self.rng.integers(0, 6)) * 40, dtype=np.uint8)

    def _start(self):
        return np.stack([self._frame()] * 4, axis=-1)  # a reset repeats its first frame, as the wrappers do

    def _push(self, stack):
        return np.concatenate([stack[..., 1:], self._frame()[..., None]], axis=-1)

    def step(self):
        rows = []
        for env in range(self.count):
            stack, terminal = self.stacks[env], int(self.rng.choice([0] * 8 + [1, 2]))
            following = stack if terminal == 1 else self._push(stack)
            self.serial += 1
            rows.append(
                {
                    "states/screen": stack,
                    "next_states/screen": following,
                    "states/vector": np.array([env, stack[0, 0, 0], -1.0], np.float32),
                    "next_states/vector": np.array([env, following[0, 0, 0], -1.0], np.float32),
                    "actions/a": np.int64(self.serial),
                    "terminal": np.int8(terminal),
                    "reward": np.float32(env),
                }
            )
            self.stacks[env] = self._start() if terminal else following
        return rows


def batch_of(rows):
    return {name: np.stack([row[name] for row in rows]) for name in FIELDS}


def check_pool(memory):
    """The pool's bookkeeping: every row slot counted, every pooled plane used by some row, each distinct plane once,
    and every pooled plane findable by its key."""
    frames = memory._frames["states/screen"]
    ids = frames.ids[: len(memory)].ravel()
    refs = np.bincount(ids, minlength=len(frames.refs))
    np.testing.assert_array_equal(frames.refs, refs)
    live = np.flatnonzero(refs)
    assert sorted(frames.free) == sorted(set(range(frames.used)) - set(live.tolist()))
    planes = frames._pooled(live)
    assert len({plane.tobytes() for plane in planes}) == len(live)  # no plane twice
    assert sorted(pooled for same in frames.index.values() for pooled in same) == live.tolist()


def same(one, other):
    assert one.keys() == other.keys()
    for name in one:
        assert one[name].dtype == other[name].dtype and one[name].flags.c_contiguous, name
        assert one[name].tobytes() == other[name].tobytes(), name


@pytest.mark.parametrize("kind", ["replay", "latest", "prioritized_replay"])
def test_retrievals_equal_those_of_a_memory_without_pooling(kind):
    """Three environments, rows stored as an off-policy agent stores them (one or several a step), over several
    wraps of the ring: contents and every retrieval match, byte for byte, and the pool stays consistent."""
    rng = np.random.default_rng(5)
    stacks, pooled, plain = Stacks(3, rng), make(kind, 29), make(kind, 29, stacked=False)
    for step in range(150):
        rows = stacks.step()
        for part in (rows[:1], rows[1:]) if step % 3 else (rows,):
            pooled.store(batch_of(part))
            plain.store(batch_of(part))
        if step % 10 == 9:
            check_pool(pooled)
            same(pooled.contents(), plain.contents())
            if kind == "latest":
                same(pooled.retrieve_timesteps(7), plain.retrieve_timesteps(7))
                same(pooled.retrieve_episodes(1), plain.retrieve_episodes(1))
            else:
                same(pooled.retrieve_timesteps(16), plain.retrieve_timesteps(16))
    frames = pooled._frames["states/screen"]
    assert frames.planes <= 6  # six distinct frames in the whole stream, each pooled once
    assert "states/screen" not in pooled._data and "states/vector" in pooled._data


def test_an_atari_like_stream_keeps_about_one_frame_a_row():
    """84x84 frames, each new one different: a row adds one frame, an episode's start four (the memory cannot know
    they repeat the reset's frame: here they are all different), so the pool holds about a quarter of the stacks."""
    fields = {
        "states/state": FieldSpec((84, 84, 4), np.uint8),
        "next_states/state": FieldSpec((84, 84, 4), np.uint8),
        "terminal": FieldSpec((), np.int8),
        "reward": FieldSpec((), np.float32),
    }
    pooled, plain = make("replay", 300, fields=fields), make("replay", 300, False, fields=fields)
    rng = np.random.default_rng(0)
    stack = rng.integers(0, 256, size=(84, 84, 4), dtype=np.uint8)
    for step in range(1000):
        following = np.concatenate([stack[..., 1:], rng.integers(0, 256, size=(84, 84, 1), dtype=np.uint8)], axis=-1)
        terminal = np.int8(step % 100 == 99)
        row = {"states/state": stack, "next_states/state": stack if terminal else following, "terminal": terminal}
        batch = {**{name: np.asarray(value)[None] for name, value in row.items()}, "reward": np.zeros(1, np.float32)}
        pooled.store(batch)
        plain.store(batch)
        stack = rng.integers(0, 256, size=(84, 84, 4), dtype=np.uint8) if terminal else following
    frames = pooled._frames["states/state"]
    assert 300 + 3 <= frames.planes <= 300 + 3 + 3 * 4  # one frame a row, three more for each episode's start
    assert frames.used <= 300 + 4 * 5  # freed planes are reused: the pool never held many more
    same(pooled.contents(), plain.contents())
    assert pooled.nbytes < 0.3 * plain.nbytes  # a quarter, and the pool's last block


def test_planes_are_shared_by_bytes_not_by_hash(monkeypatch):
    """Every plane hashed alike: planes are still told apart by their bytes. And bytes, not values: -0.0 is not
    0.0."""
    monkeypatch.setattr(frames_module, "hash", lambda data: 7, raising=False)
    fields = {
        "states/image": FieldSpec((2, 2, 3), np.float32),
        "terminal": FieldSpec((), np.int8),
        "reward": FieldSpec((), np.float32),
    }
    memory = make("replay", 4, fields=fields)
    images = np.zeros((3, 2, 2, 3), np.float32)
    images[1, ..., 0] = -0.0
    images[2, ..., 2] = 1.5
    memory.store({"states/image": images, "terminal": np.zeros(3, np.int8), "reward": np.zeros(3, np.float32)})
    stored = memory.contents()["states/image"]
    assert stored.tobytes() == images.tobytes() and np.signbit(stored[1, 0, 0, 0])
    frames = memory._frames["states/image"]
    assert frames.planes == 3 and list(frames.index) == [7]  # zeros, minus zeros, and the 1.5 plane


def filled(stacked=True, seed=3, capacity=17):
    rng = np.random.default_rng(seed)
    stacks, memory = Stacks(2, rng), make("prioritized_replay", capacity, stacked=stacked)
    for _ in range(40):
        memory.store(batch_of(stacks.step()))
    return memory, stacks


def test_pooled_frames_save_once_and_continue_exactly():
    memory, stacks = filled()
    state = memory.state_dict()
    assert "states/screen" not in state["data"]
    saved = state["frames"]["states/screen"]
    assert saved["ids"].shape == (17, 4) and len(saved["planes"]) == memory._frames["states/screen"].planes
    restored = make("prioritized_replay", 17, seed=99)
    restored.load_state_dict(state)
    check_pool(restored)
    same(restored.contents(), memory.contents())
    for _ in range(5):
        rows = batch_of(stacks.step())
        memory.store(rows)
        restored.store(rows)
        same(memory.retrieve_timesteps(9), restored.retrieve_timesteps(9))
    check_pool(restored)


@pytest.mark.parametrize("saved_stacked", [True, False])
def test_a_memory_loads_frames_saved_the_other_way(saved_stacked):
    """Pooled frames load into a memory that keeps states in its ring, and states saved in full into a pooling one."""
    memory, _ = filled(stacked=saved_stacked)
    restored = make("prioritized_replay", 17, stacked=not saved_stacked, seed=1)
    restored.load_state_dict(memory.state_dict())
    same(restored.contents(), memory.contents())
    assert ("frames" in restored.state_dict()) is (not saved_stacked)
    if not saved_stacked:
        check_pool(restored)


def test_bad_saved_frames_are_refused_and_change_nothing():
    memory, _ = filled()
    target, _ = filled(seed=11)
    before = target.contents()

    def with_frames(change):
        state = memory.state_dict()
        change(state["frames"])
        return state

    def dense():
        state = memory.state_dict()
        state["data"]["states/screen"] = memory.contents()["states/screen"]
        return state

    cases = [
        (with_frames(lambda f: f["states/screen"].pop("ids")), "must be a dict of ids and planes"),
        (with_frames(lambda f: f["states/screen"].update(ids=f["states/screen"]["ids"][:-1])), r"expected \(17, 4\)"),
        (with_frames(lambda f: f["states/screen"]["ids"].__setitem__((0, 0), 10**6)), "must index the"),
        (with_frames(lambda f: f["states/screen"].update(planes=f["states/screen"]["planes"][:, :3])), "planes have"),
        (with_frames(lambda f: f.update({"states/other": f["states/screen"]})), "this memory does not have"),
        (with_frames(lambda f: f.clear()), "differ from this memory's"),
        (dense(), "the saved data also holds"),
    ]
    for state, message in cases:
        with pytest.raises(ValueError, match=message):
            target.load_state_dict(state)
    after = target.contents()
    same(before, after)
    check_pool(target)


def test_stacked_frames_needs_image_states():
    fields = {key: value for key, value in FIELDS.items() if "screen" not in key}
    with pytest.raises(SpecError, match=r"memory\.stacked_frames.*no image: states/vector \(3,\)"):
        make("replay", 10, fields=fields)
    with pytest.raises(SpecError, match=r"memory\.stacked_frames.*not a boolean"):
        build_memory({"type": "replay", "capacity": 10, "stacked_frames": "yes"}, FIELDS, rng=np.random.default_rng())
    assert make("replay", 10, stacked=False, fields=fields).stacked_frames is False


def test_a_replay_of_frames_past_one_array_s_limit_is_pooled_or_refused_with_a_hint():
    """100,000 Atari frame stacks are 2.8e9 elements: more than one array may hold (2^31). In full that is a SpecError
    that names stacked_frames; pooled, the memory builds (its pool grows by blocks as rows arrive)."""
    fields = {
        "states/state": FieldSpec((84, 84, 4), np.uint8),
        "next_states/state": FieldSpec((84, 84, 4), np.uint8),
        "terminal": FieldSpec((), np.int8),
        "reward": FieldSpec((), np.float32),
    }
    with pytest.raises(SpecError, match=r"memory\.capacity.*Or, for stacked frames .*memory\.stacked_frames: true"):
        make("replay", 100_000, stacked=False, fields=fields)
    memory = make("replay", 100_000, fields=fields)
    assert memory.nbytes <= 100_000 * (4 * 8 + 8 + 1 + 4)  # per row its frames' ids, a link, terminal, reward
    stack = np.arange(84 * 84 * 4, dtype=np.uint32).astype(np.uint8).reshape(1, 84, 84, 4)
    zeros = {"terminal": np.zeros(1, np.int8), "reward": np.zeros(1, np.float32)}
    memory.store({"states/state": stack, "next_states/state": stack, **zeros})
    np.testing.assert_array_equal(memory.contents()["states/state"], stack)
