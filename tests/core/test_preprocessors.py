"""Preprocessors: outputs and shapes against hand-computed arrays (TensorForce 0.4's semantics), per-row sequence
buffers and running statistics, specs and their errors."""

import copy

import numpy as np
import pytest

from torchforce.core.preprocessors import (
    PREPROCESSORS,
    Clip,
    Divide,
    ExpandDims,
    Flatten,
    Grayscale,
    ImageResize,
    Normalize,
    RunningStandardize,
    Sequence,
    Standardize,
    build_preprocessing,
    build_reward_preprocessing,
)
from torchforce.spec import SpecError, SpecWarning, StateSpec

IMAGE = StateSpec("screen", (210, 160, 3), "float", min_value=0.0, max_value=255.0)
VECTOR = StateSpec("position", (2,), "float")
COUNTER = StateSpec("count", (3,), "int", num_values=10)
STATES = {"count": COUNTER, "position": VECTOR, "screen": IMAGE}


def test_registry_names():
    assert PREPROCESSORS.names() == [
        "clip",
        "divide",
        "expand_dims",
        "flatten",
        "grayscale",
        "image_resize",
        "normalize",
        "running_return_scale",
        "running_standardize",
        "sequence",
        "standardize",
    ]


def test_sequence_and_per_episode_running_standardize_keep_episode_state():
    """What import_experience asks to decide whether steps can be preprocessed as one batch."""
    stacks = build_preprocessing(
        {
            "position": [{"type": "running_standardize"}],
            "count": ["flatten", {"type": "running_standardize", "reset_after_batch": False}],
            "screen": {"type": "sequence"},
        },
        STATES,
    )
    assert stacks["position"].keeps_episode_state and stacks["screen"].keeps_episode_state
    assert not stacks["count"].keeps_episode_state
    assert Sequence().keeps_episode_state and RunningStandardize().keeps_episode_state
    assert not RunningStandardize(reset_after_batch=False).keeps_episode_state
    others = [
        PREPROCESSORS.get(name)
        for name in PREPROCESSORS.names()
        if name not in ("running_standardize", "sequence", "running_return_scale")
    ]
    assert not any(kind.keeps_episode_state for kind in others)


def test_sequence_repeats_the_first_frame_then_shifts():
    sequence = Sequence(length=3, add_rank=True)
    assert sequence.processed_shape((2,)) == (2, 3)
    out = sequence.process(np.array([[1.0, 10.0]]))
    np.testing.assert_array_equal(out, [[[1, 1, 1], [10, 10, 10]]])
    out = sequence.process(np.array([[2.0, 20.0]]))
    np.testing.assert_array_equal(out, [[[1, 1, 2], [10, 10, 20]]])
    out = sequence.process(np.array([[3.0, 30.0]]))
    np.testing.assert_array_equal(out, [[[1, 2, 3], [10, 20, 30]]])
    out = sequence.process(np.array([[4.0, 40.0]]))
    np.testing.assert_array_equal(out, [[[2, 3, 4], [20, 30, 40]]])
    sequence.reset()
    np.testing.assert_array_equal(sequence.process(np.array([[5.0, 50.0]])), [[[5, 5, 5], [50, 50, 50]]])


def test_sequence_concatenates_along_the_last_axis_without_add_rank():
    sequence = Sequence(length=2)
    assert sequence.processed_shape((2,)) == (4,)
    assert sequence.processed_shape(()) == (2,)  # a scalar state gets the new axis
    assert sequence.processed_shape((84, 84, 1)) == (84, 84, 2)
    sequence.process(np.array([[1, 10]]))
    out = sequence.process(np.array([[2, 20]]))
    np.testing.assert_array_equal(out, [[1, 10, 2, 20]])  # oldest frame first
    assert out.dtype == np.int64
    scalar = Sequence(length=2)
    scalar.process(np.array([1.0]))
    np.testing.assert_array_equal(scalar.process(np.array([2.0])), [[1.0, 2.0]])


def test_sequence_keeps_a_buffer_per_row_and_resets_rows():
    sequence = Sequence(length=2, add_rank=True)
    out = sequence.process(np.array([[1.0], [100.0]]))
    np.testing.assert_array_equal(out, [[[1, 1]], [[100, 100]]])
    out = sequence.process(np.array([[2.0], [200.0]]))
    np.testing.assert_array_equal(out, [[[1, 2]], [[100, 200]]])
    sequence.reset([1])  # row 1 starts a new episode
    out = sequence.process(np.array([[3.0], [7.0]]))
    np.testing.assert_array_equal(out, [[[2, 3]], [[7, 7]]])
    # a subset of rows: only row 1 acts; row 0's buffer is untouched
    np.testing.assert_array_equal(sequence.process(np.array([[8.0]]), rows=[1]), [[[7, 8]]])
    np.testing.assert_array_equal(sequence.process(np.array([[4.0]]), rows=np.array([True, False])), [[[3, 4]]])
    # a row beyond the buffer starts fresh
    np.testing.assert_array_equal(sequence.process(np.array([[9.0]]), rows=[3]), [[[9, 9]]])
    with pytest.raises(ValueError, match="rows names 2 rows for a batch of 1"):
        sequence.process(np.array([[1.0]]), rows=[0, 1])


def test_sequence_state_dict_round_trip():
    sequence = Sequence(length=3)
    for value in (1.0, 2.0):
        sequence.process(np.array([[value], [10 * value]]))
    restored = Sequence(length=3)
    restored.load_state_dict(copy.deepcopy(sequence.state_dict()))
    batch = np.array([[3.0], [30.0]])
    np.testing.assert_array_equal(restored.process(batch), sequence.process(batch))
    np.testing.assert_array_equal(restored.process(batch), [[2, 3, 3], [20, 30, 30]])
    empty = Sequence()
    empty.load_state_dict(Sequence().state_dict())
    np.testing.assert_array_equal(empty.process(np.array([[1.0]])), [[1.0, 1.0]])


def test_standardize_per_instance_and_across_batch():
    batch = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
    std_row0, std_row1 = np.sqrt(2 / 3), 2 * np.sqrt(2 / 3)  # population standard deviations
    expected = [[-1 / std_row0, 0, 1 / std_row0], [-2 / std_row1, 0, 2 / std_row1]]
    out = Standardize().process(batch)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    std = np.sqrt(((batch - 3.0) ** 2).mean())  # mean of all six values is 3
    np.testing.assert_allclose(Standardize(across_batch=True).process(batch), (batch - 3.0) / std, rtol=1e-6)


def test_standardize_floors_the_deviation_at_epsilon():
    """2018: (x - mean) / max(std, 1e-6), not / (std + 1e-6)."""
    np.testing.assert_allclose(Standardize().process(np.array([[0.0, 4e-6]])), [[-1.0, 1.0]], rtol=1e-4)  # std 2e-6
    np.testing.assert_allclose(Standardize().process(np.array([[0.0, 1e-6]])), [[-0.5, 0.5]], rtol=1e-4)  # std 5e-7
    np.testing.assert_array_equal(Standardize().process(np.array([[3.0, 3.0]])), [[0.0, 0.0]])
    batch = np.array([[0.0], [4e-6]])
    np.testing.assert_allclose(Standardize(across_batch=True).process(batch), [[-1.0], [1.0]], rtol=1e-4)


def test_running_standardize_over_episodes_with_a_reset_between():
    """2018 (one environment): the statistics restart with every episode; a first state passes through raw, then
    (x - mean) / max(sample std, 1e-6) with the current state counted in. Column 1 is constant: std 0, output 0."""
    running = RunningStandardize()
    episode_1 = [[2.0, 1.0], [4.0, 1.0], [9.0, 1.0]]
    expected_1 = [[2.0, 1.0], [1 / np.sqrt(2), 0.0], [4 / np.sqrt(13), 0.0]]  # means 3, 5; variances 2, 13
    for state, expected in zip(episode_1, expected_1, strict=True):
        out = running.process(np.array([state]))
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, [expected], rtol=1e-6, atol=1e-7)
    running.reset([0])  # the agent's episode start for its one row
    np.testing.assert_array_equal(running.process(np.array([[10.0, 5.0]])), [[10.0, 5.0]])
    # mean (8, 4); sample variances 8 and 2
    np.testing.assert_allclose(running.process(np.array([[6.0, 3.0]])), [[-1 / np.sqrt(2), -1 / np.sqrt(2)]], rtol=1e-6)
    running.reset()  # a full reset clears every row
    assert running.state_dict() == {"count": None, "mean": None, "m2": None}
    np.testing.assert_array_equal(running.process(np.array([[7.0, 7.0]])), [[7.0, 7.0]])


def test_running_standardize_keeps_statistics_per_row():
    running = RunningStandardize()
    np.testing.assert_array_equal(running.process(np.array([[1.0], [100.0]])), [[1.0], [100.0]])
    np.testing.assert_allclose(running.process(np.array([[3.0], [100.0]])), [[1 / np.sqrt(2)], [0.0]], rtol=1e-6)
    running.reset([1])  # row 1 starts an episode; row 0 goes on
    out = running.process(np.array([[8.0], [50.0]]))
    np.testing.assert_allclose(out, [[4 / np.sqrt(13)], [50.0]], rtol=1e-6)  # row 0: 1, 3, 8 -> mean 4, var 13
    # a subset of rows, and a row beyond those seen (it starts fresh)
    np.testing.assert_allclose(running.process(np.array([[40.0]]), rows=[1]), [[-1 / np.sqrt(2)]], rtol=1e-6)
    np.testing.assert_array_equal(running.process(np.array([[-3.0]]), rows=[4]), [[-3.0]])
    # one row twice in a batch: its values in order
    np.testing.assert_allclose(running.process(np.array([[1.0], [3.0]]), rows=[2, 2]), [[1.0], [1 / np.sqrt(2)]])
    state = running.state_dict()
    np.testing.assert_array_equal(state["count"], [3, 2, 2, 0, 1])
    np.testing.assert_allclose(state["mean"][:, 0], [4.0, 45.0, 2.0, 0.0, -3.0])
    np.testing.assert_allclose(state["m2"][:, 0], [26.0, 50.0, 2.0, 0.0, 0.0])


def test_running_standardize_without_reset_after_batch_is_shared_and_never_cleared():
    running = RunningStandardize(reset_after_batch=False)
    np.testing.assert_array_equal(running.process(np.array([[1.0]])), [[1.0]])  # one sample: raw
    running.reset()  # no effect: 2018 reset only with reset_after_batch
    running.reset([0])
    np.testing.assert_allclose(running.process(np.array([[3.0]])), [[1 / np.sqrt(2)]], rtol=1e-6)  # mean 2, var 2
    # two rows fold in together, then both are standardized: 1, 3, 5, 11 -> mean 5, sample variance 56 / 3
    out = running.process(np.array([[5.0], [11.0]]))
    np.testing.assert_allclose(out, [[0.0], [6 / np.sqrt(56 / 3)]], rtol=1e-6)
    assert running.state_dict()["count"] == 4
    np.testing.assert_array_equal(RunningStandardize(reset_after_batch=False).process(np.array([[4.0]])), [[4.0]])


def test_running_standardize_state_dict_round_trip():
    for reset_after_batch in (True, False):
        running = RunningStandardize(reset_after_batch=reset_after_batch)
        running.process(np.array([[1.0, 2.0], [3.0, 5.0]]))
        running.process(np.array([[2.0, 2.0], [4.0, 6.0]]))
        restored = RunningStandardize(reset_after_batch=reset_after_batch)
        restored.load_state_dict(copy.deepcopy(running.state_dict()))
        batch = np.array([[6.0, 1.0], [0.0, 9.0]])
        np.testing.assert_array_equal(restored.process(batch), running.process(batch))
        empty = RunningStandardize(reset_after_batch=reset_after_batch)
        empty.load_state_dict(RunningStandardize(reset_after_batch=reset_after_batch).state_dict())
        np.testing.assert_array_equal(empty.process(batch[:1]), batch[:1])


def test_imported_experience_is_standardized_per_episode():
    """import_experience runs a per-episode running_standardize over each episode from its start, as acting does."""
    from torchforce.agents.experience import experience_states

    stacks = build_preprocessing({"type": "running_standardize"}, {"position": StateSpec("position", (1,))})
    states = {"position": np.array([[2.0], [4.0], [9.0], [10.0], [6.0]])}
    terminal = np.array([0, 0, 1, 0, 1])
    processed, following = experience_states(
        states, terminal, stacks, lambda batch: {k: stacks[k].process(v) for k, v in batch.items()}
    )
    expected = [[2.0], [1 / np.sqrt(2)], [4 / np.sqrt(13)], [10.0], [-1 / np.sqrt(2)]]
    np.testing.assert_allclose(processed["position"], expected, rtol=1e-6)
    assert stacks["position"].state_dict() == {"0": {"count": None, "mean": None, "m2": None}}  # left untouched


def test_normalize_grayscale_divide_clip():
    np.testing.assert_allclose(
        Normalize().process(np.array([[0.0, 5.0, 10.0], [2.0, 2.0, 4.0]])), [[0, 0.5, 1], [0, 0, 1]], atol=1e-6
    )
    image = np.array([[[[1.0, 2.0, 3.0], [0.0, 0.0, 10.0]]]])  # [B=1, H=1, W=2, C=3]
    gray = Grayscale().process(image)
    np.testing.assert_allclose(gray, [[[[0.299 + 1.174 + 0.342], [1.14]]]], rtol=1e-6)
    assert gray.dtype == np.float32 and Grayscale().processed_shape((1, 2, 3)) == (1, 2, 1)
    assert Grayscale(remove_rank=True).process(image).shape == (1, 1, 2)
    assert Grayscale(weights=[0.5, 0.5], remove_rank=True).processed_shape((4, 4, 2)) == (4, 4)
    divided = Divide(scale=255).process(np.array([[0, 51, 255]], dtype=np.uint8))
    assert divided.dtype == np.float32
    np.testing.assert_allclose(divided, [[0.0, 0.2, 1.0]], rtol=1e-6)
    clipped = Clip(min_value=-1, max_value=2.5).process(np.array([[-5, 0, 5]]))
    assert clipped.dtype == np.int64
    np.testing.assert_array_equal(clipped, [[-1, 0, 2]])
    np.testing.assert_array_equal(Clip(min_value=-1, max_value=2.5).process(np.array([[-5.0, 5.0]])), [[-1.0, 2.5]])


def test_flatten_and_expand_dims():
    batch = np.arange(12).reshape(2, 2, 3)
    assert Flatten().processed_shape((2, 3)) == (6,) and Flatten().process(batch).shape == (2, 6)
    np.testing.assert_array_equal(Flatten().process(batch)[1], np.arange(6, 12))
    assert Flatten().processed_shape(()) == (1,)
    for axis, shape in ((0, (1, 2, 3)), (1, (2, 1, 3)), (2, (2, 3, 1)), (-1, (2, 3, 1)), (-3, (1, 2, 3))):
        expand = ExpandDims(axis=axis)
        assert expand.processed_shape((2, 3)) == shape
        assert expand.process(batch).shape == (2, *shape)


def test_image_resize():
    resize = ImageResize(width=84, height=84)
    assert resize.processed_shape((210, 160, 3)) == (84, 84, 3)
    assert resize.processed_shape((210, 160)) == (84, 84)
    constant = np.full((2, 210, 160, 3), 7.0, dtype=np.float32)
    out = resize.process(constant)
    assert out.shape == (2, 84, 84, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, 7.0, rtol=1e-5)
    # a horizontal ramp stays a ramp: increasing along the width, constant down the height, range kept
    ramp = np.tile(np.linspace(0.0, 100.0, 160, dtype=np.float32), (1, 210, 1))
    out = ImageResize(width=40, height=30).process(ramp)
    assert out.shape == (1, 30, 40)
    assert np.all(np.diff(out[0, 0]) > 0) and np.allclose(out[0], out[0, :1])
    assert 0.0 <= out.min() < 2.0 and 98.0 < out.max() <= 100.0
    np.testing.assert_allclose(out[0, 0, 20], 50.0, atol=2.0)


def test_build_forms_and_processed_specs():
    # the dqn_visual.json stack, as a list for every state
    stacks = build_preprocessing(
        [{"type": "image_resize", "width": 84, "height": 84}, {"type": "grayscale"}, {"type": "divide", "scale": 255}],
        {"screen": IMAGE},
    )
    stack = stacks["screen"]
    assert stack.processed_spec == StateSpec("screen", (84, 84, 1), "float")
    assert stack.unprocessed_spec is IMAGE and len(stack) == 3
    frame = np.full((1, 210, 160, 3), 255.0, dtype=np.float32)
    out = stack.process(frame)
    assert out.shape == (1, 84, 84, 1) and out.dtype == np.float32
    np.testing.assert_allclose(out, 1.0, rtol=1e-4)
    # one step for every state: int states become float after a value-computing step
    stacks = build_preprocessing({"type": "divide", "scale": 2}, STATES)
    assert sorted(stacks) == ["count", "position", "screen"]
    assert stacks["count"].processed_spec == StateSpec("count", (3,), "float")
    assert stacks["screen"].processed_spec.max_value == 127.5
    # per-state dict: only the named states; sequence keeps int states int
    stacks = build_preprocessing({"count": [{"type": "sequence", "length": 4}], "position": None}, STATES)
    assert list(stacks) == ["count"]
    assert stacks["count"].processed_spec == StateSpec("count", (12,), "int", num_values=10)
    assert build_preprocessing(None, STATES) == {} and build_preprocessing([], STATES) == {}
    # the dqn_ue4.json stack
    stack = build_preprocessing(
        [{"type": "divide", "scale": 255}, {"type": "sequence", "length": 4, "add_rank": True}], {"position": VECTOR}
    )["position"]
    assert stack.processed_spec.shape == (2, 4)
    clip = build_preprocessing({"type": "clip", "min_value": 0, "max_value": 100}, {"screen": IMAGE})["screen"]
    assert (clip.processed_spec.min_value, clip.processed_spec.max_value) == (0.0, 100.0)


def test_stacks_are_separate_per_state_and_round_trip():
    states = {"a": StateSpec("a", (2,)), "b": StateSpec("b", (2,))}
    stacks = build_preprocessing([{"type": "running_standardize"}, {"type": "sequence", "length": 2}], states)
    assert stacks["a"].preprocessors[1] is not stacks["b"].preprocessors[1]
    stacks["a"].process(np.array([[1.0, 2.0], [3.0, 5.0]]))
    stacks["a"].process(np.array([[2.0, 2.0], [4.0, 6.0]]))
    state = copy.deepcopy(stacks["a"].state_dict())
    assert sorted(state) == ["0", "1"]
    stacks["b"].load_state_dict(state)
    batch = np.array([[0.0, 1.0], [7.0, 7.0]])
    np.testing.assert_array_equal(stacks["b"].process(batch), stacks["a"].process(batch))
    stacks["a"].reset([0])
    np.testing.assert_array_equal(stacks["a"].process(np.array([[5.0, 5.0]]), rows=[0]), [[5.0, 5.0, 5.0, 5.0]])
    stacks["a"].reset()
    with pytest.raises(ValueError, match="a state of 1 preprocessors for a stack of 2"):
        stacks["a"].load_state_dict({"0": {}})
    with pytest.raises(ValueError, match=r"preprocessing of 'a' expects a batch of shape \[B, 2\], got \[1, 3\]"):
        stacks["a"].process(np.zeros((1, 3)))


def test_reward_preprocessing():
    assert build_reward_preprocessing(None) is None
    stack = build_reward_preprocessing([{"type": "clip", "min_value": -1, "max_value": 1}])
    np.testing.assert_array_equal(stack.process(np.array([-3.0, 0.5, 2.0], dtype=np.float32)), [-1.0, 0.5, 1.0])
    # rewards one step at a time; the agent never resets reward preprocessing (nor did 2018's Model.reset)
    running = build_reward_preprocessing({"type": "running_standardize"})
    outs = [running.process(np.array([reward], dtype=np.float32)) for reward in (1.0, 3.0, 8.0)]
    np.testing.assert_allclose(np.concatenate(outs), [1.0, 1 / np.sqrt(2), 4 / np.sqrt(13)], rtol=1e-6)
    with pytest.warns(SpecWarning, match="maps every scalar reward to 0") as caught:
        build_reward_preprocessing({"type": "standardize"})
    assert caught[0].filename == __file__
    # across the batch is one step's rewards, one per environment: a single environment's reward is 0 too
    with pytest.warns(SpecWarning, match="maps the reward of a single environment to 0"):
        across = build_reward_preprocessing({"type": "standardize", "across_batch": True})
    assert [across.process(np.array([reward]))[0] for reward in (1.0, 5.0, -3.0)] == [0.0, 0.0, 0.0]


def test_a_running_return_scale_state_stack_apart_leaves_the_training_rows_returns():
    stack = build_preprocessing({"type": "running_return_scale"}, {"s": StateSpec("s", (), "float")})["s"]
    for _ in range(2):
        stack.process(np.array([1.0, 2.0]))
    before = stack.state_dict()
    apart = stack.apart()  # evaluation's copy, restarted whenever an evaluation episode starts
    apart.reset([0, 1])
    apart.process(np.array([5.0, 5.0]))
    after = stack.state_dict()
    assert str(before) == str(after)  # the training rows' discounted returns and statistics untouched


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            [{"type": "center"}],
            "states_preprocessing[0].type: preprocessor 'center' was never registered in TensorForce",
        ),
        ("center", "Use 'standardize' (per instance) or 'running_standardize' (running statistics)."),
        ({"type": "grayscal"}, 'states_preprocessing.type: unknown preprocessor "grayscal"'),
        ({"type": "grayscal"}, "Did you mean 'grayscale'?"),
        (
            {"positon": {"type": "flatten"}},
            'states_preprocessing.positon: unknown state "positon".\n'
            "  Known: count, position, screen. Did you mean 'position'?",
        ),
        ({"type": "image_resize", "width": 84}, "states_preprocessing: preprocessor 'image_resize' needs 'height'"),
        ({"type": "image_resize", "width": 0, "height": 84}, "states_preprocessing.width: out of range"),
        ({"type": "sequence", "length": "4"}, "states_preprocessing.length: not an integer"),
        ({"type": "sequence", "add_rank": 1}, "states_preprocessing.add_rank: not a boolean"),
        ({"type": "divide", "scale": 0}, "states_preprocessing.scale: cannot divide by zero"),
        ({"type": "clip", "min_value": 1, "max_value": 0}, "states_preprocessing.max_value: must be above min_value"),
        ({"type": "grayscale", "weights": "rgb"}, "states_preprocessing.weights: not a list of numbers"),
        (
            {"screen": [{"type": "flatten"}, {"type": "grayscale"}]},
            "states_preprocessing.screen[1]: grayscale cannot process 'screen' of shape [100800]: "
            "the last axis must hold the 3 color channels",
        ),
        (
            {"position": {"type": "image_resize", "width": 8, "height": 8}},
            "states_preprocessing.position: image_resize cannot process 'position' of shape [2]: "
            "images must have shape (height, width)",
        ),
        ({"position": {"type": "expand_dims", "axis": 3}}, "axis 3 is outside [-2, 1] for this shape"),
    ],
)
def test_spec_errors(spec, message):
    with pytest.raises(SpecError) as error:
        build_preprocessing(spec, STATES)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"type": "sequence"},
            "reward_preprocessing: reward preprocessing must keep the reward a scalar, not make it [2]",
        ),
        ({"reward": {"type": "clip"}}, "reward_preprocessing: not a reward preprocessing spec"),
        ([{"type": "center"}], "reward_preprocessing[0].type: preprocessor 'center' was never registered"),
    ],
)
def test_reward_spec_errors(spec, message):
    with pytest.raises(SpecError) as error:
        build_reward_preprocessing(spec)
    assert message in str(error.value)


def test_running_standardize_restores_statistics_saved_before_they_were_per_row():
    """A checkpoint written before statistics were kept per row holds one shared set (count 3 here): with
    reset_after_batch the rows start over, as each would at its next episode, and the first state passes raw."""
    from torchforce.core.preprocessors import RunningStandardize

    preprocessor = RunningStandardize()
    preprocessor.load_state_dict({"count": 3, "mean": np.array([1.0, 2.0]), "m2": np.array([2.0, 8.0])})
    first = preprocessor.process(np.array([[5.0, -1.0]]))
    np.testing.assert_array_equal(first, [[5.0, -1.0]])
    shared = RunningStandardize(reset_after_batch=False)
    shared.load_state_dict({"count": 3, "mean": np.array([1.0, 2.0]), "m2": np.array([2.0, 8.0])})
    assert shared.state_dict()["count"] == 3
