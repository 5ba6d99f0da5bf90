"""Projects (init, finding them, config lookup), experiment specs (2018 files, frequencies, names, unknown fields)
and the command line's help."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import stat

import pytest

from tests.client.conftest import tfcli
from torchforce.client import ClientError, Project
from torchforce.client.cli import build_parser, main
from torchforce.client.experiment_file import check_name, resolve_experiment
from torchforce.configs import KINDS, folder, names
from torchforce.spec import SpecError, load_file

SHIPPED = {kind: sorted(p.name for p in folder(kind).glob("*") if p.suffix in (".json", ".yaml")) for kind in KINDS}


def minimal(**fields) -> dict:
    return {"name": "spec-test", "agent": "ppo_cartpole", "environment": "cartpole", **fields}


def resolve(project: Project, **fields) -> dict:
    return resolve_experiment(project, minimal(**fields), build=False)


# ---------------------------------------------------------------------------------------------- init


def test_init_makes_a_project(tmp_path):
    result = tfcli(tmp_path, "init", "-n", "demo")
    assert result.returncode == 0, result.stderr
    assert f"{sum(len(files) for files in SHIPPED.values())} default config files written" in result.stdout
    settings = json.loads((tmp_path / ".tfcli" / "project.json").read_text())
    assert settings["name"] == "demo" and settings["cloud_provider"] == "google" and settings["created_at"]
    assert (tmp_path / ".tfcli" / "state.db").is_file() and Project(tmp_path).store.experiments() == []
    assert [p.name for p in (tmp_path / "experiments").iterdir()] == []
    assert (tmp_path / "configs" / "sweeps" / "ppo_cartpole.yaml").is_file()  # the README's sweep example, by name
    for kind, files in SHIPPED.items():
        assert sorted(p.name for p in (tmp_path / "configs" / kind).iterdir()) == files
        for file in files:
            assert (tmp_path / "configs" / kind / file).read_bytes() == (folder(kind) / file).read_bytes()


@pytest.mark.parametrize(("flags", "source"), [(["-n", "Bad Name!"], ""), ([], " (the folder's name)")])
def test_init_warns_of_a_name_that_gke_cannot_use(tmp_path, flags, source):
    # GKE refused such a name only at an experiment's start; here and on Ray it is fine
    folder = tmp_path / "Bad Name!"
    folder.mkdir()
    result = tfcli(folder, "init", *flags)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(
        f"tfcli: warning: the project name 'Bad Name!'{source} cannot run experiments on GKE"
    )
    assert "'tfcli init --force -n NAME' renames the project" in result.stderr
    (tmp_path / "fine").mkdir()
    assert "warning" not in tfcli(tmp_path / "fine", "init", "-n", "fine_name-2").stderr


def test_rerunning_init_never_overwrites_a_users_configs(tmp_path):
    Project.init(tmp_path, name="mine")
    settings = (tmp_path / ".tfcli" / "project.json").read_bytes()
    edited = tmp_path / "configs" / "agents" / "ppo_cartpole.json"
    edited.write_text('{"type": "ppo", "my": "edit"}\n')
    own = tmp_path / "configs" / "networks" / "own.yaml"
    own.write_text("- {type: dense, size: 8}\n")
    removed = tmp_path / "configs" / "environments" / "pendulum.json"
    removed.unlink()

    again = tfcli(tmp_path, "init")
    assert again.returncode == 0, again.stderr
    total = sum(len(files) for files in SHIPPED.values())
    assert f"1 default config files written ({total - 1} existing ones kept)" in again.stdout
    assert edited.read_text() == '{"type": "ppo", "my": "edit"}\n'
    assert own.read_text() == "- {type: dense, size: 8}\n"
    assert removed.read_bytes() == (folder("environments") / "pendulum.json").read_bytes()  # a missing one returns
    assert (tmp_path / ".tfcli" / "project.json").read_bytes() == settings

    forced = tfcli(tmp_path, "init", "--force", "-n", "renamed")
    assert forced.returncode == 0, forced.stderr
    assert edited.read_bytes() == (folder("agents") / "ppo_cartpole.json").read_bytes()
    assert own.is_file()  # not one of ours: even --force keeps it
    renamed = json.loads((tmp_path / ".tfcli" / "project.json").read_text())
    assert renamed["name"] == "renamed" and renamed["created_at"] == json.loads(settings)["created_at"]


def test_init_again_with_the_projects_own_name_is_fine(tmp_path):
    first = tfcli(tmp_path, "init", "-n", "demo")
    assert first.returncode == 0 and "existing ones kept" not in first.stdout
    again = tfcli(tmp_path, "init", "-n", "demo")  # as scripts/demo.sh does on every run
    assert again.returncode == 0, again.stderr
    assert "0 default config files written" in again.stdout and "existing ones kept" in again.stdout
    other = tfcli(tmp_path, "init", "-n", "other")
    assert other.returncode == 2 and "is already a project named 'demo', not 'other'" in other.stderr
    remote = tfcli(tmp_path, "init", "-r", "my-gcp-project")
    assert (
        remote.returncode == 2 and "already a project with no remote project id, not 'my-gcp-project'" in remote.stderr
    )
    assert json.loads((tmp_path / ".tfcli" / "project.json").read_text())["name"] == "demo"


def test_init_refuses_a_folder_inside_another_project(tmp_path):
    Project.init(tmp_path, name="outer")
    inner = tmp_path / "notes" / "inner"
    inner.mkdir(parents=True)
    refused = tfcli(inner, "init")
    assert refused.returncode == 2, refused.stdout
    assert refused.stderr.startswith(f"tfcli: {inner} is inside the tfcli project at {tmp_path}")
    assert "--force" in refused.stderr and list(inner.iterdir()) == []
    forced = tfcli(inner, "init", "--force")
    assert forced.returncode == 0, forced.stderr
    assert Project.find(inner).root == inner and Project.find(tmp_path / "notes").name == "outer"


def test_files_the_client_writes_have_the_usual_permissions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    previous = os.umask(0o022)
    try:
        project, _ = Project.init(tmp_path)
        from torchforce.client import Experiment

        folder = Experiment(
            project, name="perms", agent="ppo_cartpole", environment="cartpole", total_timesteps=100
        ).generate_locally()
        os.umask(0o027)
        Project.init(tmp_path, name="renamed", force=True)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((folder / "experiment.json").stat().st_mode) == 0o644
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / ".tfcli" / "project.json").stat().st_mode) == 0o640  # the umask of the time


def test_init_with_force_repairs_damaged_settings(tmp_path):
    Project.init(tmp_path, name="fixme")
    (tmp_path / ".tfcli" / "project.json").write_text("{")
    with pytest.raises(ClientError, match="damaged"):
        Project(tmp_path)
    project, _ = Project.init(tmp_path, force=True)
    assert project.name == tmp_path.name


def test_init_refuses_a_damaged_database_before_it_writes_anything(tmp_path):
    """Found by the CLI fuzz test: with the settings gone, init wrote them and the configs, then failed on the
    database."""
    Project.init(tmp_path, name="alpha")
    (tmp_path / ".tfcli" / "project.json").unlink()
    shutil.rmtree(tmp_path / "configs")
    (tmp_path / ".tfcli" / "state.db").write_bytes(b"\x00\x00")
    with pytest.raises(ClientError, match="state.db cannot be used"):
        Project.init(tmp_path, name="alpha")
    assert sorted(path.name for path in tmp_path.rglob("*")) == [".tfcli", "experiments", "state.db"]


# ---------------------------------------------------------------------------------------------- finding the project


def test_every_command_finds_the_project_by_walking_up(tmp_path, monkeypatch, capsys):
    root = tmp_path / "project"
    root.mkdir()
    Project.init(root)
    deep = root / "notes" / "2024" / "january"
    deep.mkdir(parents=True)
    assert Project.find(deep).root == root.resolve()

    listed = tfcli(deep, "experiment", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    monkeypatch.chdir(deep)
    argv = ["experiment", "new", "-n", "from-deep", "-A", "configs/agents/ppo_cartpole.json", "-E", "cartpole"]
    assert main([*argv, "-t", "1000"]) == 0  # a path relative to the project root works from a subfolder too
    assert "Created experiment 'from-deep'" in capsys.readouterr().out
    assert (root / "experiments" / "from-deep" / "experiment.json").is_file()
    assert not (deep / "experiments").exists()
    assert main(["experiment", "show", "-e", "from-deep", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "new" and shown["spec"]["sources"]["agent"] == "configs/agents/ppo_cartpole.json"


def test_outside_any_project(tmp_path):
    with pytest.raises(ClientError, match="no tfcli project here"):
        Project.find(tmp_path)
    result = tfcli(tmp_path, "experiment", "list")
    assert result.returncode == 2 and result.stderr.startswith("tfcli: no tfcli project here")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------- config lookup


@pytest.mark.parametrize(
    ("value", "kind", "found"),
    [
        ("ppo_cartpole", "agents", "configs/agents/ppo_cartpole.json"),
        ("ppo_cartpole.json", "agents", "configs/agents/ppo_cartpole.json"),
        ("configs/agents/ppo_cartpole.json", "agents", "configs/agents/ppo_cartpole.json"),
        ("cnn_dqn_network", "networks", "configs/networks/cnn_dqn_network.json"),
        ("cartpole", "environments", "configs/environments/cartpole.json"),
        ("small_cluster.json", "clusters", "configs/clusters/small_cluster.json"),
        ("simple_a3c", "experiments", "configs/experiments/simple_a3c.json"),
        ("own", "networks", "configs/networks/own.json"),
        ("own.yaml", "networks", "configs/networks/own.yaml"),
        ("elsewhere/cartpole.json", "environments", "elsewhere/cartpole.json"),
    ],
)
def test_config_lookup(project, value, kind, found):
    (project.root / "configs" / "networks" / "own.json").write_text('[{"type": "dense", "size": 4}]')
    (project.root / "configs" / "networks" / "own.yaml").write_text("- {type: dense, size: 8}\n")
    (project.root / "elsewhere").mkdir()
    (project.root / "elsewhere" / "cartpole.json").write_text('{"type": "gym", "gym_id": "CartPole-v1"}')
    assert project.find_config(value, kind, "experiment.x") == project.root / found


def test_an_existing_file_wins_over_a_name_in_configs(project, tmp_path, monkeypatch):
    local = project.root / "cartpole.json"
    local.write_text('{"type": "gym", "gym_id": "CartPole-v1", "max_episode_timesteps": 50}')
    assert project.find_config("cartpole.json", "environments", "e") == local
    assert project.find_config("cartpole", "environments", "e") == project.root / "configs/environments/cartpole.json"
    outside = tmp_path / "outside.json"
    outside.write_text('{"type": "gym", "gym_id": "Pendulum-v1"}')
    data, source = project.load_config(str(outside), "environments", "experiment.environment")
    assert data["gym_id"] == "Pendulum-v1" and source == str(outside)
    data, source = project.load_config({"type": "gym", "gym_id": "CartPole-v1"}, "environments", "e")
    assert source is None  # inline values pass through


def test_a_folder_named_like_a_config_does_not_hide_the_config(project):
    (project.root / "cartpole").mkdir()
    assert project.find_config("cartpole", "environments", "e") == project.root / "configs/environments/cartpole.json"


@pytest.mark.parametrize("file", SHIPPED["experiments"])
def test_every_shipped_experiment_config_validates(project, file):
    raw = load_file(folder("experiments") / file)
    spec = resolve_experiment(project, raw, build=False)
    assert spec["name"] == raw["name"] and spec["agent"] and spec["environment"]


@pytest.mark.parametrize("file", SHIPPED["clusters"])
def test_every_shipped_cluster_config_validates(file):
    from torchforce.client.cluster import cluster_from_spec

    values = load_file(folder("clusters") / file)
    spec = cluster_from_spec(values).spec()
    assert spec["type"] == values.get("type", "gke")
    expected = values["name"] if spec["type"] == "ray" else values["name"].replace("_", "-")  # GKE names have no _
    assert spec["name"] == expected


def test_a_cluster_file_is_found_by_its_bare_name_like_an_experiment_file(project, tmp_path, monkeypatch):
    from torchforce.client import Cluster

    (project.root / "configs" / "clusters" / "small_cluster.json").write_text('{"name": "mine", "num_nodes": 7}')
    assert Cluster(file="small_cluster").spec()["num_nodes"] == 7  # the project's configs/clusters/
    assert Cluster(file="small_cluster.json", num_nodes=2).spec()["num_nodes"] == 2
    with pytest.raises(SpecError) as error:
        Cluster(file="small_clustr")
    assert "cluster.file: no cluster config named 'small_clustr'" in str(error.value)
    assert "Did you mean 'small_cluster'?" in str(error.value)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)  # outside any project: the configs torchforce ships
    assert Cluster(file="small_cluster").spec()["num_nodes"] == 3
    with pytest.raises(SpecError, match="nor a shipped cluster config 'large_clustr.json'"):
        Cluster(file="large_clustr")


def test_shipped_config_names():
    assert "ppo_cartpole" in names("agents") and "simple_a3c" in names("experiments")


# ---------------------------------------------------------------------------------------------- 2018 experiment files


def test_the_2018_simple_a3c_file_loads(project):
    raw = load_file(project.root / "configs" / "experiments" / "simple_a3c.json")
    assert raw["timesteps"] == 1000000 and raw["agent"] == "dqn_visual.json"
    spec = resolve_experiment(project, raw, build=False)
    assert spec["total_timesteps"] == 1000000 and "timesteps" not in spec
    assert spec["episodes"] == 1000 and spec["max_timesteps_per_episode"] == 1000 and spec["repeat_actions"] == 4
    assert spec["agent"]["type"] == "dqn_agent" and spec["agent"]["memory"]["capacity"] == 10000
    assert spec["network"] == load_file(project.root / "configs" / "networks" / "cnn_dqn_network.json")
    assert spec["sources"] == {
        "environment": None,  # inline
        "agent": "configs/agents/dqn_visual.json",
        "network": "configs/networks/cnn_dqn_network.json",
        "cluster": "configs/clusters/small_cluster.json",
    }
    assert spec["cluster"]["name"] == "small-cluster" and spec["cluster"]["num_nodes"] == 3
    assert (spec["run_mode"], spec["num_workers"], spec["num_parameter_servers"]) == ("distributed", 3, 1)
    assert (spec["saver_frequency"], spec["summary_frequency"]) == ("600s", "600s")
    assert spec["debug_logging"] is True and spec["deterministic"] is False


def test_the_verbatim_2018_file_with_bare_second_frequencies_loads(project):
    raw = {
        "type": "experiment",
        "name": "simple_a3c",
        "description": "Simple A3C Example Experiment on an openAI gym Environment (Space Invaders)",
        "environment": {"type": "tensorforce.contrib.openai_gym.OpenAIGym", "gym_id": "SpaceInvaders-v0"},
        "agent": "dqn_visual.json",
        "network": "configs/networks/cnn_dqn_network.json",
        "repeat_actions": 4,
        "episodes": 1000,
        "timesteps": 1000000,
        "max_timesteps_per_episode": 1000,
        "deterministic": False,
        "run_mode": "distributed",
        "num_workers": 3,
        "num_parameter_servers": 1,
        "cluster": "small_cluster.json",
        "debug_logging": True,
        "saver_frequency": 600,
        "summary_frequency": 600,
    }
    spec = resolve_experiment(project, raw, build=False)
    assert (spec["saver_frequency"], spec["summary_frequency"]) == ("600s", "600s")
    assert spec["environment"]["gym_id"] == "SpaceInvaders-v0" and spec["total_timesteps"] == 1000000


def test_the_2018_file_builds_into_an_experiment(project, capsys):
    pytest.importorskip("ale_py")
    assert main(["experiment", "new", "-f", "simple_a3c"]) == 0
    assert "Created experiment 'simple_a3c'" in capsys.readouterr().out
    stored = json.loads((project.root / "experiments" / "simple_a3c" / "experiment.json").read_text())
    assert stored["total_timesteps"] == 1000000 and stored["network"][0]["type"] == "conv2d"


def test_flags_override_the_file(project):
    from torchforce.client import Experiment

    experiment = Experiment(project, file="cartpole_ppo", name="shorter", total_timesteps=500, seed=7)
    spec = resolve_experiment(project, experiment.raw, build=False)
    written = load_file(project.root / "configs" / "experiments" / "cartpole_ppo.json")
    assert (spec["name"], spec["total_timesteps"], spec["seed"]) == ("shorter", 500, 7)
    assert spec["num_environments"] == written["num_environments"] and written["total_timesteps"] != 500


def test_a_cluster_file_is_checked_like_a_cluster_config(tmp_path):
    from torchforce.client import Cluster

    typo = tmp_path / "typo.json"
    typo.write_text('{"name": "c", "num_nodez": 3}')
    with pytest.raises(SpecError) as error:
        Cluster(file=str(typo))
    assert str(error.value) == f"cluster.num_nodez: unknown cluster field (in {typo}).\n  Did you mean 'num_nodes'?"
    assert Cluster(file=str(folder("clusters") / "small_cluster.json"), num_nodes=5).spec()["num_nodes"] == 5


# ---------------------------------------------------------------------------------------------- frequencies


@pytest.mark.parametrize(
    ("value", "normalised"),
    [("600s", "600s"), ("100e", "100e"), ("5000t", "5000t"), (600, "600s"), ("600", "600s"), (1.0e3, "1000s")],
)
def test_saver_frequencies(project, value, normalised):
    assert resolve(project, saver_frequency=value)["saver_frequency"] == normalised


@pytest.mark.parametrize(("value", "normalised"), [("120s", "120s"), ("1000t", "1000t"), (60, "60s")])
def test_summary_frequencies(project, value, normalised):
    assert resolve(project, summary_frequency=value)["summary_frequency"] == normalised


def test_summaries_are_not_written_by_episode(project):
    with pytest.raises(SpecError) as error:
        resolve(project, summary_frequency="100e")
    assert error.value.path == "experiment.summary_frequency"
    assert "summaries are written by time or by timesteps" in str(error.value) and "'1000t'" in str(error.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10m", "There is no 'm' unit; write '600s'."),
        ("2h", "write '7200s'"),
        ("600S", "Write '600s'."),
        ("0t", "out of range"),
        ("-5s", "not a frequency"),
        ("5 s", "not a frequency"),
        ("fast", "not a frequency"),
        (1.5, "not a frequency"),
        (True, "not a frequency"),
        ([600], "not a frequency"),
    ],
)
def test_bad_frequencies(project, value, message):
    with pytest.raises(SpecError) as error:
        resolve(project, saver_frequency=value)
    assert error.value.path == "experiment.saver_frequency" and message in str(error.value)


def test_default_frequencies_follow_the_run_mode(project):
    single = resolve(project)
    assert (single["saver_frequency"], single["summary_frequency"]) == ("100e", "1000t")
    distributed = resolve(project, run_mode="distributed", num_parameter_servers=1)
    assert (distributed["saver_frequency"], distributed["summary_frequency"]) == ("600s", "120s")


# ---------------------------------------------------------------------------------------------- fields and names


@pytest.mark.parametrize(
    ("field", "guess"),
    [
        ("totl_timesteps", "total_timesteps"),
        ("timestep", "timesteps"),
        ("num_worker", "num_workers"),
        ("agnet", "agent"),
        ("enviroment", "environment"),
        ("saver_frequncy", "saver_frequency"),
    ],
)
def test_unknown_fields_get_a_did_you_mean(project, field, guess):
    with pytest.raises(SpecError) as error:
        resolve(project, **{field: 1})
    assert error.value.path == f"experiment.{field}"
    assert str(error.value) == f"experiment.{field}: unknown experiment field.\n  Did you mean '{guess}'?"


def test_an_unknown_field_with_no_near_name_lists_the_known_ones(project):
    with pytest.raises(SpecError) as error:
        resolve(project, zzz=1)
    assert "Known: agent, cluster, debug_logging," in str(error.value) and "name," in str(error.value)


@pytest.mark.parametrize("name", ["a", "cartpole-ppo", "run_1", "a1-b2_c3", "x" * 40, "dqn-2018"])
def test_valid_names(name):
    assert check_name(name) == name


@pytest.mark.parametrize(
    "name", ["A", "1st", "-a", "a-", "a_", "_a", "a b", "a/b", "a.b", "..", ".", "", "x" * 41, "é", None, 7, "nul"]
)
def test_invalid_names(name):
    with pytest.raises(SpecError) as error:
        check_name(name)
    assert error.value.path == "experiment.name"


def test_the_name_limit_leaves_room_for_kubernetes_suffixes():
    accepted = []
    for length in range(1, 80):
        try:
            accepted.append(check_name("a" + "_" * (length - 2) + "z" if length > 1 else "a"))
        except SpecError:
            break
    longest = accepted[-1]
    with pytest.raises(SpecError):
        check_name(longest + "z")
    # Kubernetes writes "_" as "-"; Jobs and Services NAME-parameter-server-N must be DNS-1035 labels (<= 63).
    resource = f"{longest.replace('_', '-')}-parameter-server-99"
    assert len(resource) <= 63 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", resource)


# ---------------------------------------------------------------------------------------------- help


def all_commands() -> list[list[str]]:
    """Every command path of the parser: [], ["init"], ["experiment"], ["experiment", "new"], ..."""
    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        found.append(path)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, [*path, name])

    walk(build_parser(), [])
    return found


@pytest.mark.parametrize("command", all_commands(), ids=lambda command: " ".join(command) or "tfcli")
def test_help_works_on_every_command(command, capsys):
    with pytest.raises(SystemExit) as exit:
        main([*command, "--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tfcli" + "".join(f" {part}" for part in command))
    assert "``" not in out and "`" not in out  # plain text, not reStructuredText
    description, _, examples = out.partition("\nexamples:\n")
    assert examples.startswith("  tfcli"), out  # every command shows an example or two
    assert len(description.split("\n\n")[1]) > 40, out  # and a description paragraph after the usage


def parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    found = []

    def walk(parser: argparse.ArgumentParser) -> None:
        found.append((parser.prog, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in dict.fromkeys(action.choices.values()):
                    walk(child)

    walk(build_parser())
    return found


@pytest.mark.parametrize(("prog", "parser"), parsers(), ids=[prog for prog, _ in parsers()])
def test_every_argument_has_a_help_text(prog, parser):
    assert isinstance(parser.formatter_class(prog), argparse.RawDescriptionHelpFormatter)
    for action in parser._actions:
        assert action.help and action.help != argparse.SUPPRESS, f"{prog}: {action.option_strings or action.dest}"


@pytest.mark.parametrize(
    ("argv", "guess"),
    [
        (["experiment", "strat", "-e", "x"], "start"),
        (["experimnt", "list"], "experiment"),
        (["cluster", "lst"], "list"),
        (["experiment", "new", "--run-mode", "singel"], "single"),
    ],
)
def test_a_mistyped_command_gets_a_did_you_mean(argv, guess, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    lines = err.rstrip("\n").split("\n")
    assert len(lines) == 2 and lines[0].startswith("tfcli: error: ") and "invalid choice" in lines[0]
    assert lines[1].startswith(f"  Did you mean '{guess}'? See 'tfcli")


def test_every_command_is_handled():
    from torchforce.client.commands import HANDLERS

    leaves = {tuple(c) for c in all_commands() if c and (c[0] == "init" or len(c) == 2)}
    assert leaves == {key if key[1] is not None else (key[0],) for key in HANDLERS}


@pytest.mark.parametrize("argv", [[], ["experiment"], ["cluster"]])
def test_no_command_prints_help_and_exits_2(argv, capsys):
    assert main(argv) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: tfcli") and "COMMAND" in out


def test_help_and_usage_through_the_real_command_line(tmp_path):
    bare = tfcli(tmp_path, timeout=60)
    assert bare.returncode == 2 and bare.stdout.startswith("usage: tfcli") and "tfcli init" in bare.stdout
    helped = tfcli(tmp_path, "experiment", "new", "--help")
    assert helped.returncode == 0 and "--total-timesteps" in helped.stdout and helped.stderr == ""
    version = tfcli(tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("tfcli (torchforce) ")
