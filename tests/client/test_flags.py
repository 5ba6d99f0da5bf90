"""Flags without surprises: each short flag means one thing in every command (walked on the real parser tree), an old
short flag whose meaning changed is an error that spells out its long form (never a different setting), and the
shell completion that ``tfcli --print-completion`` writes completes commands, flags and the project's names."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from tests.client.test_bad_input import bad
from torchforce.client import Project
from torchforce.client.cli import build_parser, main


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser of the real tree by its command (``experiment new``; the top one is "")."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, command: str) -> None:
        found[command] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{command} {name}".strip())

    walk(build_parser(), "")
    return found


def options() -> list[tuple[str, list[str], list[str]]]:
    """``(command, short flags, long options)`` of every option of every command."""
    return [
        (
            command,
            [s for s in action.option_strings if not s.startswith("--")],
            [s for s in action.option_strings if s.startswith("--")],
        )
        for command, parser in parsers().items()
        for action in parser._actions
        if action.option_strings
    ]


def test_every_short_flag_has_exactly_one_long_meaning_across_all_commands():
    meanings: dict[str, set[str]] = defaultdict(set)
    where: dict[str, list[str]] = defaultdict(list)
    for command, shorts, longs in options():
        for short in shorts:
            assert len(longs) == 1, f"'tfcli {command}': {short} should have exactly one long form, has {longs}"
            meanings[short].add(longs[0])
            where[short].append(f"{command or 'tfcli'}: {longs[0]}")
    assert len(meanings) >= 10  # the walk saw the tree
    twofold = {short: sorted(where[short]) for short, longs in meanings.items() if len(longs) > 1}
    assert twofold == {}


def test_a_long_option_has_the_same_short_flag_wherever_it_has_one():
    shorts: dict[str, set[str]] = defaultdict(set)
    for _, short, longs in options():
        for long in longs:
            shorts[long].update(short)
    assert {long: sorted(s) for long, s in shorts.items() if len(s) > 1} == {}


def test_the_table_of_short_flags_is_the_tree():
    from torchforce.client.commands import SHORT_FLAGS

    used = {short: longs[0] for _, shorts, longs in options() for short in shorts}
    assert used == SHORT_FLAGS
    assert (used["-e"], used["-f"], used["-c"], used["-n"]) == ("--experiment", "--file", "--cluster", "--name")


def test_every_retired_flag_is_gone_from_its_command_and_names_an_option_it_has():
    from torchforce.client.commands import RETIRED_FLAGS

    tree = parsers()
    for command, retired in RETIRED_FLAGS.items():
        strings = {s for action in tree[command]._actions for s in action.option_strings}
        for flag, long in retired.items():
            assert flag not in strings, f"'tfcli {command}' still has {flag}"
            assert long in strings, f"'tfcli {command}' has no {long}"
    assert RETIRED_FLAGS["experiment new"]["-e"] == "--episodes"


def test_the_episodes_of_a_new_experiment_are_no_longer_dash_e(project, capsys):
    argv = ["experiment", "new", "-n", "cp", "-A", "ppo_cartpole", "-E", "cartpole", "-e", "5"]
    err = bad(project.root, capsys, *argv)
    assert err.splitlines() == [
        "tfcli: error: 'tfcli experiment new' has no -e any more: it was --episodes (elsewhere -e is --experiment)",
        "  Give --episodes 5. See 'tfcli experiment new --help'.",
    ]
    assert not (project.root / "experiments" / "cp").exists() and project.store.experiments() == []
    assert main([*argv[:-2], "--episodes", "5", "-t", "100"]) == 0
    assert Project(project.root).store.experiment("cp") is not None
    assert '"episodes": 5' in (project.root / "experiments" / "cp" / "experiment.json").read_text()


@pytest.mark.parametrize(
    ("argv", "flag", "hint"),
    [
        (["experiment", "new", "-n", "x", "-e5"], "-e", "Give --episodes 5."),
        (["experiment", "new", "-n", "x", "-R", "distributed"], "-R", "Give --run-mode distributed."),
        (["experiment", "new", "-n", "x", "-w", "4", "-p", "1"], "-w", "Give --num-workers 4."),
        (["experiment", "new", "-n", "x", "-p", "-1"], "-p", "Give --num-parameter-servers -1."),
        (["experiment", "new", "-n", "x", "-C", "small_cluster"], "-C", "Give --cluster small_cluster."),
        (["experiment", "new", "-n", "x", "-d"], "-d", "Give --deterministic."),
        (["experiment", "new", "-n", "x", "-s"], "-s", "Give --start."),
        (["experiment", "start", "-e", "x", "-R"], "-R", "Give --resume."),
        (["experiment", "logs", "-e", "x", "-f"], "-f", "Give --follow (or -F)."),
        (["experiment", "plot", "-e", "x", "-w", "50"], "-w", "Give --window 50."),
        (["init", "-f"], "-f", "Give --force."),
        (["cluster", "create", "-f", "small_cluster", "-d", "50"], "-d", "Give --disk-size 50."),
        (["cluster", "delete", "-A"], "-A", "Give --all."),
    ],
)
def test_an_old_short_flag_is_an_error_that_names_its_long_form(project, capsys, argv, flag, hint):
    err = bad(project.root, capsys, *argv)
    command = "init" if argv[0] == "init" else " ".join(argv[:2])
    assert err.startswith(f"tfcli: error: 'tfcli {command}' has no {flag} any more: it was --")
    assert err.splitlines()[1] == f"  {hint} See 'tfcli {command} --help'."


def test_the_new_spellings_parse():
    parser = build_parser()
    new = parser.parse_args(["experiment", "new", "-n", "x", "--run-mode", "distributed", "--num-workers", "4"])
    assert (new.run_mode, new.num_workers, new.episodes, new.start) == ("distributed", 4, None, False)
    logs = parser.parse_args(["experiment", "logs", "-e", "x", "-F"])
    assert (logs.experiment, logs.follow) == ("x", True)
    start = parser.parse_args(["experiment", "start", "-e", "x", "--resume", "-c", "local", "-F"])
    assert (start.resume, start.cluster, start.follow) == (True, "local", True)
    delete = parser.parse_args(["cluster", "delete", "--all"])
    assert (delete.all, delete.cluster) == (True, None)
    create = parser.parse_args(["cluster", "create", "-f", "small_cluster", "-s", "2", "--disk-size", "50"])
    assert (create.size, create.disk_size) == (2, 50)


# ---------------------------------------------------------------------------------------------- shell completion


def completion(shell: str, capsys: pytest.CaptureFixture) -> str:
    assert main(["--print-completion", shell]) == 0
    return capsys.readouterr().out


def test_the_bash_script_knows_every_command(capsys):
    script = completion("bash", capsys)
    assert script.rstrip().endswith("complete -F _tfcli tfcli")
    for command in ("init", "gcloud", "image", "cluster", "experiment", "project", "config"):
        assert command in script.split('"tfcli") echo "')[1].split('"')[0].split()
    listed = script.split('"tfcli experiment") echo "')[1].split('"')[0].split()
    assert {"new", "start", "pause", "stop", "logs", "plot", "compare", "delete"} <= set(listed)


def test_the_zsh_script_loads_the_bash_function_through_bashcompinit(capsys):
    script = completion("zsh", capsys)
    assert script.startswith("#compdef tfcli\n")
    assert "autoload -U +X bashcompinit && bashcompinit" in script
    assert script.endswith(completion("bash", capsys))


def test_an_unknown_shell_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--print-completion", "bsh"])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert "argument --print-completion: invalid choice: 'bsh'" in err and "Did you mean 'bash'?" in err


def test_the_help_tells_how_to_install_completion(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "--print-completion SHELL" in out and "source <(tfcli --print-completion bash)" in out


@pytest.fixture
def complete(project, capsys, tmp_path):
    """``complete("experiment new -A ")``: what bash offers at the end of that command line, in the project."""
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    script = tmp_path / "tfcli.bash"
    script.write_text(completion("bash", capsys))

    def run(line: str, cwd: Path = project.root) -> list[str]:
        program = (
            f'source "{script}"\n'
            f"read -ra COMP_WORDS <<< 'tfcli {line}'\n"
            + ('COMP_WORDS+=("")\n' if line.endswith(" ") else "")
            + "COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n_tfcli\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
        )
        done = subprocess.run(["bash", "-c", program], cwd=cwd, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return sorted(word for word in done.stdout.split("\n") if word)

    return run


def test_bash_completes_commands_and_flags(complete):
    assert complete("exp") == ["experiment"]
    assert complete("experiment st") == ["start", "stop"]
    assert complete("experiment logs -") == ["--debug", "--experiment", "--follow", "--help", "-F", "-e", "-h"]
    assert complete("experiment new --run-mode m") == ["multi-threaded"]
    assert complete("--print-completion ") == ["bash", "zsh"]
    assert complete("experiment new -n ") == []  # a name of the user's own


def test_bash_completes_the_projects_names(complete, project):
    (project.root / "configs" / "agents" / "mine.yaml").write_text("type: random\n")
    (project.root / "experiments" / "cartpole-1").mkdir()
    (project.root / "experiments" / ".staging").mkdir()
    assert complete("experiment new -A ppo_ca") == ["ppo_cartpole"]
    assert complete("experiment new -A mi") == ["mine.yaml"]
    assert complete("experiment new -E ") == [
        "breakout",
        "cartpole",
        "halfcheetah",
        "hopper",
        "openai_space_invaders",
        "pendulum",
        "pong",
    ]
    assert complete("experiment new -f cartpole_p") == ["cartpole_ppo"]
    assert complete("experiment new --cluster ray_") == ["ray_local", "ray_remote"]
    assert complete("experiment start -e ") == ["cartpole-1"]
    assert complete("experiment compare ") == ["cartpole-1"]
    assert complete("cluster create -f single_node_c") == ["single_node_cluster"]
    inner = project.root / "experiments" / "cartpole-1"
    assert complete("experiment show -e c", cwd=inner) == ["cartpole-1"]  # the project is found from below
    for run in ("lr-s0", "lr-s1"):  # a group's runs: the group's name is offered too, once (-e takes groups)
        (project.root / "experiments" / run).mkdir()
        (project.root / "experiments" / run / "experiment.json").write_text(json.dumps({"name": run, "group": "lr"}))
    (project.root / "experiments" / "cartpole-1" / "experiment.json").write_text('{"group": null}')
    assert complete("experiment start -e l") == ["lr", "lr-s0", "lr-s1"]
    assert complete("experiment stop -e ") == ["cartpole-1", "lr", "lr-s0", "lr-s1"]


def test_bash_completes_sweep_delete_and_the_projects_sweeps(complete, project):
    sweeps = project.root / ".tfcli" / "sweeps"
    sweeps.mkdir()
    for name in ("lr.json", "lr.db", "big-lr.json", ".lr-2.123.json"):  # a state file names a sweep; not staging
        (sweeps / name).write_text("{}")
    assert complete("sweep d") == ["delete"]
    assert complete("sweep delete -") == ["--debug", "--help", "--keep-trials", "--sweep", "-h"]
    assert complete("sweep delete --sweep ") == ["big-lr", "lr"]
    assert complete("sweep show --sweep b") == ["big-lr"]


def test_bash_completes_sweep_new_f_with_the_projects_sweep_files_and_the_shipped_examples(complete, project):
    """'sweep new -f ' offered nothing: the sweep files are offered by name as 'sweep new -f' takes them (a YAML
    one without its suffix too), with the shipped examples it also takes by name, each once."""
    own = project.root / "configs" / "sweeps"
    assert sorted(path.name for path in own.iterdir()) == ["ppo_cartpole.yaml"]  # tfcli init copied the example
    (own / "lr.json").write_text("{}")
    (own / "big.yml").write_text("{}")
    (own / ".lr.json.swp").write_text("")
    assert complete("sweep new -f ") == ["big", "lr", "ppo_cartpole"]
    assert complete("sweep new --file l") == ["lr"]
    (own / "ppo_cartpole.yaml").unlink()  # a shipped example is still offered, as 'sweep new -f' still takes it
    assert complete("sweep new -f pp") == ["ppo_cartpole"]
    assert complete("experiment new -f ppo_cartpole") == []  # not an experiment config


# ---------------------------------------------------------------------------------------------- examples


ROOT = Path(__file__).resolve().parents[2]


def command_lines(text: str, *, markdown: bool = False) -> list[str]:
    """The ``tfcli ...`` commands of a help text's examples, or of a Markdown file's code blocks and inline code:
    a trailing backslash joins the next line; a comment or a redirection ends a command, and ``a | b`` after
    ``tfcli GROUP a`` stands for ``tfcli GROUP b``, as the README's summary lines write it."""
    text = re.sub(r"\\\n\s*", " ", text)
    lines = text.splitlines()
    if markdown:
        fenced = [i for i, line in enumerate(lines) if line.startswith("```")]
        lines = [line for start, end in zip(fenced[::2], fenced[1::2], strict=True) for line in lines[start:end]]
    found = [line.strip() for line in lines if line.strip().startswith("tfcli ")]
    found += [match[1] for match in re.finditer(r"`(tfcli [^`]+)`", text)] if markdown else []
    commands = []
    for line in found:
        line = re.split(r"\s(?:#|>)\s?", line)[0].replace("[", "").replace("]", "")
        first, *others = [part.split() for part in line.split(" | ")]
        commands.append(first)
        commands += [first[:2] + other for other in others]
    return [" ".join(command) for command in commands]


def test_command_lines_are_found():
    text = "x\n  tfcli experiment list | show -e cp   # comment\ntfcli a \\\n    --b c > f\n"
    assert command_lines(text) == ["tfcli experiment list", "tfcli experiment show -e cp", "tfcli a --b c"]
    markdown = "tfcli has no daemon\n```bash\ntfcli init -f\n```\nsee `tfcli cluster create -s`, `tfcli`"
    assert command_lines(markdown, markdown=True) == ["tfcli init -f", "tfcli cluster create -s"]


def misspelled(command: str, capsys: pytest.CaptureFixture) -> str | None:
    """The usage error of ``command`` when it has a flag, command or choice tfcli does not know; None when it
    parses, or is only short of arguments (a mention such as 'tfcli gcloud link' in a sentence)."""
    try:
        build_parser().parse_args(shlex.split(command)[1:])
    except SystemExit as exit:
        err = capsys.readouterr().err
        if exit.code and re.search(r"unrecognized arguments|any more|invalid choice", err):
            return err
    capsys.readouterr()
    return None


@pytest.mark.parametrize("command", sorted(parsers()))
def test_every_example_in_the_help_parses(command, capsys):
    parser = parsers()[command]
    examples = command_lines((parser.epilog or "").removeprefix("examples:"))
    assert examples or parser.epilog is None
    assert {example: misspelled(example, capsys) for example in examples} == dict.fromkeys(examples)
    assert all(example.startswith(f"tfcli {command}".strip()) for example in examples if command), examples


@pytest.mark.parametrize("file", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_every_tfcli_command_in_the_docs_parses(file, capsys):
    commands = command_lines((ROOT / file).read_text(encoding="utf-8"), markdown=True)
    assert len(commands) > 3 or file != "README.md"
    assert {command: misspelled(command, capsys) for command in commands} == dict.fromkeys(commands)


def test_zsh_runs_the_completion_through_its_bash_emulation(project, capsys, tmp_path):
    if shutil.which("zsh") is None:
        pytest.skip("no zsh here")
    script = tmp_path / "tfcli.zsh"
    script.write_text(completion("zsh", capsys))
    program = (
        f'source "{script}"\n'
        'COMP_WORDS=(tfcli experiment new --run-mode ""); COMP_CWORD=4\n'
        'compgen -F _tfcli -- ""\n'
        "COMP_WORDS=(tfcli experiment new -A ppo_ca); COMP_CWORD=4\n"
        "compgen -F _tfcli -- ppo_ca\n"
    )
    done = subprocess.run(["zsh", "-c", program], cwd=project.root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    offered = done.stdout.split()  # zsh filters by what is typed itself, after compgen
    assert offered[:3] == ["single", "multi-threaded", "distributed"]
    assert "ppo_cartpole" in offered[3:] and "dqn_cartpole" in offered[3:]
