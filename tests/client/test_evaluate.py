"""``tfcli experiment evaluate`` and ``export`` on a trained experiment (PPO on CartPole, 300 timesteps with a
checkpoint every 100, trained once per module in process), and the library's ``evaluate_episodes``: the agent is
really the checkpoint's, the results are never touched, videos hold every frame, and bad input gets one clear line
with exit code 2."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.client.conftest import copied_project
from tests.tiny_environments import OneNumber
from torchforce.agents import create_agent
from torchforce.client import Experiment, Project
from torchforce.client.cli import main
from torchforce.client.commands.evaluate import episode_bar
from torchforce.client.evaluate import build_environment, environment_spec, find_checkpoint, restore_agent
from torchforce.client.experiment_build import worker_agent_spec
from torchforce.client.experiment_run import ExperimentRun
from torchforce.durable import unwritable
from torchforce.environments import Gym, make
from torchforce.execution.evaluation import VideoError, evaluate, evaluate_episodes

NAME = "cp"
SMALL_PPO = {
    "type": "ppo",
    "network": [{"type": "dense", "size": 16, "activation": "tanh"}],
    "update_mode": {"unit": "timesteps", "batch_size": 64, "frequency": 64},
    "memory": {"type": "latest", "capacity": 256},
    "step_optimizer": {"type": "adam", "learning_rate": 0.01},
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with the experiment 'cp' trained for 300 timesteps; checkpoints 200 and 300 are kept."""
    root = tmp_path_factory.mktemp("evaluate") / "project"
    root.mkdir()
    project, _ = Project.init(root)
    (root / "configs" / "agents" / "small_ppo.json").write_text(json.dumps(SMALL_PPO))
    (root / "configs" / "environments" / "steps.json").write_text('{"type": "minimal", "episode_length": 5}')
    experiment = Experiment(
        project,
        name=NAME,
        agent=str(root / "configs" / "agents" / "small_ppo.json"),
        environment="cartpole",
        total_timesteps=300,
        saver_frequency="100t",
        seed=2,
    )
    ExperimentRun(experiment.generate_locally(), resume=False).run()
    return root


@pytest.fixture
def root(trained: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(trained)
    return trained


def tfcli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """The command line in this process: exit code, stdout, stderr."""
    try:
        code = main(list(args))
    except SystemExit as exit:  # argparse's errors
        code = int(exit.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file and folder under ``folder``: size, modification time and content hash."""
    return {
        str(path.relative_to(folder)): (
            (path.stat().st_size, path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
            if path.is_file()
            else (0, path.stat().st_mtime_ns, "folder")
        )
        for path in sorted(folder.rglob("*"))
    }


def checkpoint_agent(root: Path, folder: str):
    """The experiment's agent as the worker built it, loaded from ``checkpoints/<folder>/`` by hand."""
    spec = json.loads((root / "experiments" / NAME / "experiment.json").read_text())
    env = make(spec["environment"])
    agent = create_agent(worker_agent_spec(spec), states=env.states, actions=env.actions)
    agent.restore_model(root / "experiments" / NAME / "results" / "checkpoints" / folder, file="model.pt")
    return agent, env


# ---------------------------------------------------------------------------------------------- evaluate


def test_evaluate_plays_the_checkpoints_agent_and_leaves_the_results_alone(root, capsys):
    results = root / "experiments" / NAME / "results"
    assert sorted(p.name for p in (results / "checkpoints").iterdir()) == [
        "000000000200",
        "000000000300",
        "latest.json",
    ]
    before = snapshot(results)
    code, out, err = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--episodes", "3", "--seed", "5", "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["checkpoint"] == {"which": "latest", "folder": "000000000300", "timesteps": 300, "mean_return": None}
    assert (report["experiment"], report["environment"], report["seed"]) == (NAME, "Gym(CartPole-v1)", 5)
    returns = [row["return"] for row in report["episodes"]]
    assert [row["episode"] for row in report["episodes"]] == [1, 2, 3]
    assert returns == [float(row["length"]) for row in report["episodes"]]  # CartPole: reward 1 per step
    assert report["mean_return"] == pytest.approx(np.mean(returns))
    assert report["std_return"] == pytest.approx(np.std(returns))
    assert (report["video"], report["frames"]) == (None, 0)
    # the same episodes as the checkpoint's agent plays them, loaded by hand, in an environment seeded alike
    agent, env = checkpoint_agent(root, "000000000300")
    env.seed(5)
    assert evaluate(agent, env, episodes=3) == returns
    assert snapshot(results) == before  # nothing written, nothing touched


def test_evaluate_prints_a_table_and_the_mean_with_its_spread(root, capsys):
    _, out, _ = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--episodes", "2", "--json")
    report = json.loads(out)
    code, text, err = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--episodes", "2")
    assert (code, err) == (0, "")
    lines = text.splitlines()
    assert lines[0] == (
        f"'{NAME}' at its latest checkpoint (timestep 300): 2 deterministic episodes of Gym(CartPole-v1), seed 2"
    )
    assert lines[2].split() == ["Episode", "Return", "Length"]
    for line, row in zip(lines[4:6], report["episodes"], strict=True):  # the default seed is the experiment's
        assert line.split() == [str(row["episode"]), f"{row['return']:.2f}", str(row["length"])]
    assert lines[-1] == (
        f"Mean return {report['mean_return']:.2f} ± {report['std_return']:.2f} (std), "
        f"mean length {report['mean_length']:.1f}"
    )


def test_checkpoints_by_timestep_and_the_best(root, capsys):
    pointer = root / "experiments" / NAME / "results" / "checkpoints" / "best.json"
    code, _, err = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--checkpoint", "best")
    assert code == 2
    assert err.startswith(f"tfcli: experiment '{NAME}' has no best checkpoint yet (no ")
    assert "use --checkpoint latest meanwhile" in err
    experiment = Experiment.load(Project.find(), NAME)
    environment = make("CartPole-v1")
    older, newer = (
        restore_agent(experiment, find_checkpoint(experiment, which), environment) for which in ("200", "latest")
    )
    environment.close()
    assert (older.timestep, newer.timestep) == (200, 300)
    changed = [
        name for name, value in older.get_parameters().items() if not torch.equal(value, newer.get_parameters()[name])
    ]
    assert changed  # an update came between the two checkpoints: which one is restored matters
    older.close()
    newer.close()
    try:
        pointer.write_text(json.dumps({"timesteps": 200, "mean_return": 41.5, "folder": "000000000200"}))
        code, out, _ = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--checkpoint", "best", "--json")
        best = json.loads(out)
        assert code == 0
        assert best["checkpoint"] == {"which": "best", "folder": "000000000200", "timesteps": 200, "mean_return": 41.5}
        _, out, _ = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--checkpoint", "200", "--json")
        assert json.loads(out)["episodes"] == best["episodes"]
        agent, env = checkpoint_agent(root, "000000000200")
        env.seed(2)
        assert evaluate(agent, env, episodes=10) == [row["return"] for row in best["episodes"]]
        code, out, _ = tfcli(
            capsys,
            "experiment",
            "export",
            "-e",
            NAME,
            "--format",
            "torchscript",
            "--checkpoint",
            "best",
            "-o",
            "best.pt",
        )
        assert (code, out) == (
            0,
            f"Exported the acting policy of '{NAME}' from its best checkpoint (timestep 200, evaluation mean return "
            "41.5): best.pt\n",
        )
        pointer.write_text(json.dumps({"timesteps": 100, "mean_return": 9.0, "folder": "000000000100"}))
        code, _, err = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--checkpoint", "best")
        assert code == 2 and "names the checkpoint folder '000000000100', which is not there (any more)" in err
        for damaged in ('{"timesteps": 200, "folder": "../../.."}', '{"timesteps": 200', "[]"):
            pointer.write_text(damaged)
            code, _, err = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--checkpoint", "best")
            assert code == 2 and "best.json" in err and "Traceback" not in err, damaged
    finally:
        pointer.unlink(missing_ok=True)
        Path("best.pt").unlink(missing_ok=True)
    code, _, err = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--checkpoint", "12345")
    assert code == 2
    assert err == (
        f"tfcli: experiment '{NAME}' has no checkpoint at timestep 12,345\n"
        "  Kept: 200, 300. Give --checkpoint latest, best or one of those timesteps.\n"
    )


def test_bad_input_is_one_clear_line(root, capsys, tmp_path):
    expected = "expected 'best', 'latest' or a timestep (a whole number), got 'newest'"
    cases = [
        (("--checkpoint", "newest"), f"argument --checkpoint: {expected}"),
        (("--episodes", "0"), "argument --episodes: expected a whole number >= 1, got 0"),
        (("--video", "out.avi"), "video 'out.avi': videos are written as MP4; name the file '....mp4'"),
        (("--video", str(tmp_path / "missing" / "out.mp4")), f"the folder '{tmp_path / 'missing'}' does not exist"),
    ]
    for flags, message in cases:
        code, out, err = tfcli(capsys, "experiment", "evaluate", "-e", NAME, *flags)
        assert code == 2 and out == "" and message in err and "Traceback" not in err, (flags, err)
    code, _, err = tfcli(capsys, "experiment", "evaluate", "-e", "cq")
    assert code == 2 and "no experiment named 'cq'" in err and "Known: cp." in err


def test_a_model_file_linked_out_of_the_results_is_refused(trained, tmp_path, monkeypatch, capsys):
    # runner.json names "evil", and what loads is evil.pt: a link out of the results folder
    root = copied_project(trained, tmp_path, monkeypatch)
    checkpoints = root / "experiments" / NAME / "results" / "checkpoints"
    folder = checkpoints / json.loads((checkpoints / "latest.json").read_text())["folder"]
    outside = tmp_path / "elsewhere.pt"
    outside.write_bytes(b"not yours")
    (folder / "evil.pt").symlink_to(outside)
    runner = json.loads((folder / "runner.json").read_text())
    (folder / "runner.json").write_text(json.dumps({**runner, "model": "evil"}))
    for command in (["evaluate", "--episodes", "1"], ["export", "--format", "torchscript"]):
        code, out, err = tfcli(capsys, "experiment", *command, "-e", NAME)
        assert code == 2 and "evil.pt leads out of" in err and "Traceback" not in err, (command, err)


def test_evaluate_and_export_read_neither_the_memory_nor_the_optimizers(trained, tmp_path, monkeypatch, capsys):
    """They restore the agent only to act: a checkpoint whose agent file lacks the memory and the optimizers' state
    (a DQN's replay memory is gigabytes on Atari) evaluates to the same returns and exports the same policy as the
    whole one did, where resuming training from it is refused."""
    from torchforce.agents.checkpoint import load_checkpoint, save_checkpoint
    from torchforce.client.checkpoints import Checkpoints

    root = copied_project(trained, tmp_path, monkeypatch)
    evaluate_args = ("experiment", "evaluate", "-e", NAME, "--episodes", "3", "--json")
    _, out, _ = tfcli(capsys, *evaluate_args)
    whole = json.loads(out)["episodes"]
    checkpoints = root / "experiments" / NAME / "results" / "checkpoints"
    folder = checkpoints / "000000000300"
    payload = load_checkpoint(folder / "model.pt")
    assert payload["memory"]["size"] > 0 and payload["optimizers"]
    manifest = json.loads((folder / "model.json").read_text())
    acting = {key: value for key, value in payload.items() if key not in ("memory", "optimizers")}
    save_checkpoint(folder, "model", acting, manifest)

    code, out, err = tfcli(capsys, *evaluate_args)
    assert (code, err) == (0, "")
    assert json.loads(out)["episodes"] == whole
    code, _, err = tfcli(capsys, "experiment", "export", "-e", NAME, "--format", "torchscript", "-o", "light.pt")
    assert (code, err) == (0, "")
    agent, _ = checkpoint_agent(trained, "000000000300")  # the whole checkpoint, in the fixture's project
    states = np.random.default_rng(1).normal(size=(32, 4)).astype(np.float32)
    expected = agent.act(states, deterministic=True, independent=True)
    np.testing.assert_array_equal(torch.jit.load(str(root / "light.pt"))(torch.from_numpy(states)).numpy(), expected)
    with pytest.raises(ValueError, match=r"model\.pt: damaged, or not a torchforce checkpoint \(KeyError: 'memory'\)"):
        Checkpoints(checkpoints).load(agent)  # resuming needs them


def test_an_experiment_without_a_checkpoint(root, capsys):
    project = Project.find()
    (root / "configs" / "agents" / "random_agent.json").write_text('{"type": "random"}')
    try:
        Experiment(
            project, name="fresh", agent="random_agent", environment="steps", total_timesteps=10
        ).generate_locally()
        for command in (["evaluate"], ["export", "--format", "onnx"]):
            code, _, err = tfcli(capsys, "experiment", *command, "-e", "fresh")
            assert code == 2
            assert err.startswith("tfcli: experiment 'fresh' has no checkpoint yet (no ")
            assert "Start the experiment and let it run until it checkpoints." in err
    finally:
        Experiment.load(project, "fresh").delete()


def test_results_on_a_cluster_are_read_from_the_download(root, capsys, monkeypatch):
    from torchforce.client.storage import Storage

    monkeypatch.setattr(Experiment, "storage", lambda self: Storage("gs://bucket/project/cp/results"))
    experiment = Experiment.load(Project.find(), NAME)
    assert (
        find_checkpoint(experiment).folder == root / "experiments" / NAME / "results" / "checkpoints" / "000000000300"
    )
    code, _, err = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--checkpoint", "100")
    assert code == 2 and "Its results are on a cluster: bring them here with 'tfcli experiment download -e cp'." in err


# ---------------------------------------------------------------------------------------------- videos


def test_a_video_holds_every_frame_of_the_episodes(root, capsys, tmp_path):
    imageio = pytest.importorskip("imageio.v2")
    pytest.importorskip("imageio_ffmpeg")
    video = tmp_path / "cp.mp4"
    code, out, err = tfcli(
        capsys, "experiment", "evaluate", "-e", NAME, "--episodes", "2", "--video", str(video), "--json"
    )
    assert (code, err) == (0, "")
    report = json.loads(out)
    frames = sum(row["length"] + 1 for row in report["episodes"])  # the first state of each episode, then a step each
    assert (report["video"], report["frames"]) == (str(video), frames)
    reader = imageio.get_reader(str(video))
    assert reader.count_frames() == frames
    assert reader.get_data(0).shape == (400, 600, 3)
    assert [p.name for p in tmp_path.iterdir()] == ["cp.mp4"]  # no partial file left behind


def test_an_environment_that_cannot_render_is_named(root, capsys, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    env = make({"type": "minimal", "episode_length": 3})
    agent = create_agent(SMALL_PPO, states=env.states, actions=env.actions)
    with pytest.raises(
        VideoError, match=r"^Minimal\(int\) cannot record a video: it is no Gymnasium environment and has no render\(\)"
    ):
        evaluate_episodes(agent, env, episodes=1, video=tmp_path / "m.mp4")
    cartpole = make("CartPole-v1")
    with pytest.raises(
        VideoError,
        match=r"^Gym\(CartPole-v1\) cannot record a video: it was made with render_mode=None; make it with "
        "render_mode='rgb_array_list'",
    ):
        evaluate_episodes(agent, cartpole, episodes=1, video=tmp_path / "c.mp4")

    import gymnasium

    class Text(gymnasium.Env):
        metadata = {"render_modes": ["ansi"]}
        observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
        action_space = gymnasium.spaces.Discrete(2)

    with pytest.raises(VideoError, match=r"Gymnasium's 'Text' renders 'ansi', not 'rgb_array' images"):
        evaluate_episodes(agent, Gym(Text()), episodes=1, video=tmp_path / "t.mp4")
    assert list(tmp_path.iterdir()) == []


def test_videos_without_their_packages_say_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed
    env = make({"type": "gym", "gym_id": "CartPole-v1", "render_mode": "rgb_array"})
    agent = create_agent(SMALL_PPO, states=env.states, actions=env.actions)
    with pytest.raises(
        VideoError, match=r"needs the imageio and imageio-ffmpeg packages: pip install 'torchforce\[video\]'"
    ):
        evaluate_episodes(agent, env, episodes=1, video=tmp_path / "v.mp4")
    assert list(tmp_path.iterdir()) == []


def test_every_step_is_recorded_also_between_repeated_actions(tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    env = make(
        {
            "type": "repeat_actions",
            "environment": {"type": "gym", "gym_id": "CartPole-v1", "render_mode": "rgb_array_list"},
            "repeat": 3,
        }
    )
    env.seed(0)
    agent = create_agent(SMALL_PPO, states=env.states, actions=env.actions)
    result = evaluate_episodes(agent, env, episodes=2, video=tmp_path / "r.mp4", fps=10)
    steps = [int(value) for value in result.returns]  # reward 1 per CartPole step: the steps the wrapper took
    assert all(3 * (length - 1) < step <= 3 * length for step, length in zip(steps, result.lengths, strict=True))
    assert result.frames == sum(steps) + 2


def test_mujoco_renders_headless_through_egl(tmp_path, monkeypatch):
    imageio = pytest.importorskip("imageio.v2")
    pytest.importorskip("imageio_ffmpeg")
    pytest.importorskip("mujoco")
    for variable in ("MUJOCO_GL", "SDL_VIDEODRIVER", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(variable, raising=False)
    env = make({"type": "gym", "gym_id": "InvertedPendulum-v5", "render_mode": "rgb_array", "width": 64, "height": 48})
    agent = create_agent(
        {"type": "ddpg", "network": [{"type": "dense", "size": 8}]}, states=env.states, actions=env.actions
    )
    try:
        result = evaluate_episodes(agent, env, episodes=2, max_episode_timesteps=3, video=tmp_path / "m.mp4")
    finally:
        env.close()
    assert os.environ["MUJOCO_GL"] == "egl"
    assert (result.lengths, result.frames) == ([3, 3], 8)
    frame = imageio.get_reader(str(tmp_path / "m.mp4")).get_data(0)
    assert frame.shape == (48, 64, 3) and frame.std() > 5  # a picture, not a blank


class Painted(OneNumber):
    """No Gymnasium: a ``render()`` of its own that paints the step number."""

    def __init__(self) -> None:
        self.t = 0

    def reset(self):
        self.t = 0
        return np.zeros(1, dtype=np.float32)

    def execute(self, actions):
        self.t += 1
        return np.full(1, self.t, dtype=np.float32), int(self.t >= 4), 0.5

    def render(self):
        return np.full((16, 24, 3), 40 * self.t, dtype=np.uint8)


def test_an_environment_with_its_own_render_records_and_evaluation_reports_lengths(tmp_path):
    imageio = pytest.importorskip("imageio.v2")
    pytest.importorskip("imageio_ffmpeg")
    env = Painted()
    agent = create_agent(SMALL_PPO, states=env.states, actions=env.actions)
    result = evaluate_episodes(agent, env, episodes=2, video=tmp_path / "p.mp4", fps=5)
    assert (result.returns, result.lengths, result.frames) == ([2.0, 2.0], [4, 4], 10)
    assert (result.mean_return, result.std_return, result.mean_length) == (2.0, 0.0, 4.0)
    frames = [frame for frame in imageio.get_reader(str(tmp_path / "p.mp4"))]
    assert len(frames) == 10
    assert [round(float(frame.mean()) / 40) for frame in frames] == [0, 1, 2, 3, 4] * 2
    short = evaluate_episodes(agent, env, episodes=3, max_episode_timesteps=2)
    assert (short.lengths, short.video) == ([2, 2, 2], None)


def test_each_step_reaches_the_hook_with_its_episode_and_step():
    env = Painted()
    agent = create_agent(SMALL_PPO, states=env.states, actions=env.actions)
    seen: list[tuple[int, int]] = []
    evaluate_episodes(agent, env, episodes=2, on_step=lambda episode, step: seen.append((episode, step)))
    assert seen == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (2, 2), (2, 3), (2, 4)]


def test_a_terminal_gets_a_bar_of_episodes_and_steps_and_anything_else_none(capsys):
    with episode_bar(3, video=False, shown=False) as hook:
        assert hook is None
    assert capsys.readouterr().err == ""
    with episode_bar(2, video=True, shown=True) as hook:
        assert capsys.readouterr().err == ""  # nothing before the first step: restoring the agent is not counted
        for episode, step in [(1, 1), (1, 2), (2, 1)]:
            time.sleep(0.2)  # past the bar's refresh interval: each step is drawn
            hook(episode, step)
    bar = capsys.readouterr().err
    assert "episode 1/2" in bar and "episode 2/2: 3step" in bar and "rendering every frame for the video" in bar
    assert bar.endswith("\r")  # cleared at the end, before the table


# ---------------------------------------------------------------------------------------------- environment


def test_evaluation_drops_the_monitor_and_renders_every_step_for_a_video():
    spec = {
        "environment": {
            "type": "openai_gym",
            "gym_id": "CartPole-v1",
            "monitor": "mon",
            "monitor_video": 5,
            "visualize": False,
        },
        "repeat_actions": 2,
    }
    assert environment_spec(spec) == {
        "type": "repeat_actions",
        "environment": {"type": "openai_gym", "gym_id": "CartPole-v1"},
        "repeat": 2,
    }
    assert environment_spec({**spec, "repeat_actions": 1}, video=True) == {
        "type": "openai_gym",
        "gym_id": "CartPole-v1",
        "render_mode": "rgb_array_list",
    }
    atari = {"environment": {"type": "atari", "game": "Pong", "monitor": "games"}, "repeat_actions": 1}
    assert environment_spec(atari, video=True) == {"type": "atari", "game": "Pong", "render_mode": "rgb_array_list"}
    own = {"environment": {"type": "mymodule:Maze", "monitor": "kept: not a Gymnasium option"}, "repeat_actions": 1}
    assert environment_spec(own, video=True) == own["environment"]
    # a wrapper's spec written out: the Gymnasium environment inside it loses its monitor too
    nested = {
        "type": "repeat_actions",
        "repeat": 3,
        "environment": {"type": "gym", "gym_id": "CartPole-v1", "monitor": "m"},
    }
    assert environment_spec({"environment": nested, "repeat_actions": 1}) == {
        "type": "repeat_actions",
        "repeat": 3,
        "environment": {"type": "gym", "gym_id": "CartPole-v1"},
    }


def test_evaluating_a_diverged_checkpoint_says_so_and_where_to_look(root, capsys, monkeypatch):
    from torchforce.agents.errors import NonFiniteActionError
    from torchforce.execution import evaluation

    def diverged(*args, **kwargs):  # what acting a diverged policy raises
        raise NonFiniteActionError("ppo", "action", 300, policy_finite=False)

    monkeypatch.setattr(evaluation, "evaluate_episodes", diverged)
    code, _, err = tfcli(capsys, "experiment", "evaluate", "-e", NAME, "--checkpoint", "latest")
    assert code == 2 and "Traceback" not in err
    assert "latest checkpoint (timestep 300)" in err and "--checkpoint best" in err


def test_build_environment_is_the_experiments(root):
    environment = build_environment(Experiment.load(Project.find(), NAME), video=True)
    try:
        assert isinstance(environment, Gym) and environment.gym.render_mode == "rgb_array_list"
    finally:
        environment.close()


# ---------------------------------------------------------------------------------------------- export


def test_export_writes_the_checkpoints_policy(root, capsys, tmp_path):
    code, out, err = tfcli(capsys, "experiment", "export", "-e", NAME, "--format", "torchscript")
    default = root / "experiments" / NAME / "exports" / "policy-300.pt"
    assert (code, err) == (0, "")
    assert (
        out == f"Exported the acting policy of '{NAME}' from its latest checkpoint (timestep 300): "
        f"experiments/{NAME}/exports/policy-300.pt\n"
    )
    agent, env = checkpoint_agent(root, "000000000300")
    states = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    expected = agent.act(states, deterministic=True, independent=True)
    assert set(expected.tolist()) == {0, 1}
    np.testing.assert_array_equal(torch.jit.load(str(default))(torch.from_numpy(states)).numpy(), expected)
    code, _, err = tfcli(
        capsys, "experiment", "export", "-e", NAME, "--format", "torchscript", "-o", str(tmp_path / "p.onnx")
    )
    assert code == 2 and "is named as onnx, but --format says torchscript" in err
    code, _, err = tfcli(
        capsys, "experiment", "export", "-e", NAME, "--format", "onnx", "-o", str(tmp_path / "no" / "p.onnx")
    )
    assert code == 2 and "the folder of the output" in err and "does not exist" in err
    code, _, err = tfcli(capsys, "experiment", "export", "-e", NAME, "--format", "tflite")
    assert code == 2 and "argument --format: invalid choice: 'tflite'" in err
    assert list(tmp_path.iterdir()) == []
    # the format from -o's suffix, as export_policy takes it (--format was required)
    code, out, err = tfcli(capsys, "experiment", "export", "-e", NAME, "-o", str(tmp_path / "p.pt"))
    assert (code, err) == (0, ""), err
    np.testing.assert_array_equal(torch.jit.load(str(tmp_path / "p.pt"))(torch.from_numpy(states)).numpy(), expected)
    code, _, err = tfcli(capsys, "experiment", "export", "-e", NAME, "-o", str(tmp_path / "p.bin"))
    assert code == 2 and err.startswith("tfcli: which format? --format is not given, and"), err
    assert "Give --format torchscript or onnx, or -o FILE.onnx or FILE.pt." in err
    assert [path.name for path in tmp_path.iterdir()] == ["p.pt"]
    # neither --format nor -o: TorchScript (torch alone loads it), where the help says it goes
    default.unlink()
    code, out, err = tfcli(capsys, "experiment", "export", "-e", NAME)
    assert (code, err) == (0, ""), err
    np.testing.assert_array_equal(torch.jit.load(str(default))(torch.from_numpy(states)).numpy(), expected)


# ---------------------------------------------------------------------------------------------- unwritable outputs

UNWRITABLE = Path("/proc")  # a folder that takes no new file, also for root (whom no file mode stops)
needs_unwritable = pytest.mark.skipif(
    not UNWRITABLE.is_dir() or unwritable(UNWRITABLE) is None, reason="no folder here refuses new files"
)
OUTPUTS = [
    ("evaluate", "--episodes", "1", "--video", "x.mp4"),
    ("plot", "-o", "x.png"),
    ("export", "--format", "onnx", "-o", "x.onnx"),
    ("export", "--format", "torchscript", "-o", "x.pt"),
]


def output_command(command: tuple[str, ...], folder: Path) -> list[str]:
    """``tfcli experiment COMMAND -e cp ...`` writing its file into ``folder``."""
    return ["experiment", command[0], "-e", NAME, *command[1:-1], str(folder / command[-1])]


@needs_unwritable
@pytest.mark.parametrize("command", OUTPUTS, ids=lambda command: command[-1])
def test_an_output_folder_that_takes_no_file_is_refused_before_the_work(root, capsys, command, monkeypatch):
    from torchforce.client import evaluate as client_evaluate

    monkeypatch.setattr(client_evaluate, "build_environment", lambda *a, **k: pytest.fail("the work began"))
    before = snapshot(root / "experiments")
    code, out, err = tfcli(capsys, *output_command(command, UNWRITABLE))
    path = UNWRITABLE / command[-1]
    assert (code, out) == (2, ""), err
    assert err.startswith(f"tfcli: {'video ' if command[0] == 'evaluate' else 'cannot write '}") and f"'{path}'" in err
    assert f"the folder '{UNWRITABLE}' takes no new file (" in err and "Traceback" not in err
    assert "you can write to." in err and len(err.strip().splitlines()) == 2
    assert snapshot(root / "experiments") == before


@pytest.mark.parametrize("command", OUTPUTS, ids=lambda command: command[-1])
def test_a_folder_given_as_the_output_file_is_refused(root, capsys, command, tmp_path):
    (tmp_path / command[-1]).mkdir()
    code, out, err = tfcli(capsys, *output_command(command, tmp_path))
    assert (code, out) == (2, "") and f"'{tmp_path / command[-1]}' is a folder" in err and "Traceback" not in err
    assert [path.name for path in tmp_path.iterdir()] == [command[-1]]


@needs_unwritable
@pytest.mark.parametrize("command", OUTPUTS, ids=lambda command: command[-1])
def test_a_final_write_that_fails_is_one_line_naming_the_file(root, capsys, command, monkeypatch):
    # the folder looked writable (a disk that filled up meanwhile): the write's OSError names the file and the reason
    from torchforce import export
    from torchforce.client import project
    from torchforce.execution import evaluation

    for module in (export, project, evaluation):
        monkeypatch.setattr(module, "unwritable", lambda folder: None, raising=False)
    code, out, err = tfcli(capsys, *output_command(command, UNWRITABLE))
    path = UNWRITABLE / command[-1]
    assert (code, out) == (2, ""), err
    assert "Traceback" not in err and "unexpected error" not in err and "FFMPEG" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfcli: "), err
    written = "video '{}': writing it failed: " if command[0] == "evaluate" else "cannot write '{}': "
    assert written.format(path) in err.replace("the plot ", "")
