"""Shell completion for ``tfcli``, written from its own argparse tree (nothing to install): ``tfcli
--print-completion bash`` prints a bash completion function, ``zsh`` the same function loaded through zsh's
bash-completion emulation (``bashcompinit``).

It completes commands, options and choices, the project's experiment and group names (``-e``), sweep names
(``--sweep``)
and config names (``-A``, ``-E``, ``-M``, ``-f``...) as ``tfcli`` resolves them: ``configs/<kind>/NAME.json`` is
``NAME``, a YAML config keeps its suffix (a sweep file is ``NAME`` either way, and ``sweep new -f`` also offers the
shipped examples). Names are read from the project around the current folder each time TAB is pressed.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from torchforce.configs import names

SHELLS = ("bash", "zsh")
# Options whose values are config names of a kind (the folder in configs/); "file" depends on the command.
CONFIG_OPTIONS = {"agent": "agents", "environment": "environments", "network": "networks"}
FILE_CONFIGS = {"experiment new": "experiments", "cluster create": "clusters", "sweep new": "sweeps"}
# Options whose values are paths on this machine.
PATH_OPTIONS = frozenset({"key_file", "source", "output", "storage"})


@dataclass
class Command:
    """What completes after ``tfcli PATH``: its subcommands, its options, the bash snippet that fills COMPREPLY
    with the value of each option that takes one (the options sharing a snippet together), and the snippet for
    its positional argument, if it has one."""

    subcommands: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    values: dict[str, list[str]] = field(default_factory=dict)
    argument: str | None = None


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for ``shell`` (bash or zsh)."""
    script = _bash(_commands(parser))
    if shell == "bash":
        return script
    if shell == "zsh":
        return ZSH_PREAMBLE + script
    raise ValueError(f"no completion for the shell {shell!r}; known: {', '.join(SHELLS)}")


def _commands(parser: argparse.ArgumentParser, path: str = "tfcli") -> dict[str, Command]:
    """Every command of the tree under ``parser`` by its path (``tfcli experiment new``)."""
    found = {path: Command()}
    command = path.removeprefix("tfcli").strip()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[path].subcommands.append(name)
                found.update(_commands(child, f"{path} {name}"))
        elif not action.option_strings:
            found[path].argument = _value_completion(command, action)
        else:
            found[path].options += action.option_strings
            if action.nargs != 0:
                found[path].values.setdefault(_value_completion(command, action), []).extend(action.option_strings)
    return found


def _value_completion(command: str, action: argparse.Action) -> str:
    """The bash snippet that completes a value of ``action`` in ``command``."""
    if action.choices is not None:
        return _words(" ".join(str(choice) for choice in action.choices))
    if action.dest in ("experiment", "experiments"):
        return _words("$(_tfcli_names experiments; _tfcli_groups)")
    if action.dest == "sweep":
        return _words("$(_tfcli_names .tfcli/sweeps)")
    kind = CONFIG_OPTIONS.get(action.dest) or (FILE_CONFIGS.get(command) if action.dest == "file" else None)
    if action.dest == "cluster" and command == "experiment new":
        kind = "clusters"  # a cluster config; elsewhere -c names a cluster the project made
    if kind == "sweeps":  # the project's sweep files, and the shipped examples 'sweep new -f' also takes by name
        return _words("$(_tfcli_sweep_files)") + '; [[ "$cur" == */* ]] && _tfcli_paths'
    if kind is not None:
        return _words(f"$(_tfcli_names configs/{kind})") + '; [[ "$cur" == */* ]] && _tfcli_paths'
    if action.dest == "cluster" and command == "experiment start":
        return _words("local")
    if action.dest in PATH_OPTIONS:
        return "_tfcli_paths"
    return ":"  # a value of the user's own (a name, a number): nothing to offer


def _words(words: str) -> str:
    return f'COMPREPLY=($(compgen -W "{words}" -- "$cur"))'


def _bash(commands: dict[str, Command]) -> str:
    subcommands, values, offers = [], [], []
    for path, command in commands.items():
        if command.subcommands:
            subcommands.append(f'    "{path}") echo "{" ".join(command.subcommands)}" ;;')
        for snippet, options in command.values.items():
            values.append("    " + "|".join(f'"{path} {option}"' for option in options) + f") {snippet}; return ;;")
        otherwise = _words(" ".join(command.subcommands)) if command.subcommands else command.argument
        offers.append(
            f'    "{path}") if [[ "$cur" == -* ]]; then {_words(" ".join(command.options))}'
            + (f"; else {otherwise}" if otherwise else "")
            + "; fi ;;"
        )
    return BASH.format(
        subcommands="\n".join(subcommands),
        values="\n".join(values),
        offers="\n".join(offers),
        shipped_sweeps=" ".join(names("sweeps")),
    )


ZSH_PREAMBLE = """#compdef tfcli
# zsh completion for tfcli (tfcli --print-completion zsh): its bash completion, through zsh's bashcompinit
(( $+functions[compdef] )) || { autoload -U +X compinit && compinit }
autoload -U +X bashcompinit && bashcompinit
"""

BASH = r"""# bash completion for tfcli (tfcli --print-completion bash), written from its parser

_tfcli_names() {{  # the names in the project folder $1 (experiments, configs/agents...) as tfcli takes them
  local dir="$PWD" name
  while [[ "$dir" != / && ! -f "$dir/.tfcli/project.json" ]]; do dir="$(dirname "$dir")"; done
  [[ -d "$dir/$1" ]] || return 0
  command ls -1 "$dir/$1" 2>/dev/null | while read -r name; do
    case "$1:$name" in
      *:.*) ;;
      configs/sweeps:*.json|configs/sweeps:*.yaml|configs/sweeps:*.yml) printf '%s\n' "${{name%.*}}" ;;  # any, by name
      configs/*:*.json|.tfcli/sweeps:*.json) printf '%s
' "${{name%.json}}" ;;
      configs/*:*.yaml|configs/*:*.yml|experiments:*) printf '%s
' "$name" ;;
    esac
  done
}}

_tfcli_groups() {{  # the groups of the project's experiments (the "group" of their experiment.json), each once
  local dir="$PWD"
  while [[ "$dir" != / && ! -f "$dir/.tfcli/project.json" ]]; do dir="$(dirname "$dir")"; done
  command grep -ho '"group": *"[a-z0-9_-]*"' "$dir"/experiments/*/experiment.json 2>/dev/null \
    | command sed 's/.*"\([^"]*\)"$/\1/' | sort -u
}}

_tfcli_sweep_files() {{  # the sweep files 'sweep new -f' takes by name: the project's, then the shipped ones
  {{ _tfcli_names configs/sweeps; printf '%s\n' {shipped_sweeps}; }} | sort -u
}}

_tfcli_paths() {{  # files and folders, added to what COMPREPLY offers already
  COMPREPLY+=($(compgen -f -- "$cur"))
}}

_tfcli_subcommands() {{  # the subcommands of the command $1
  case "$1" in
{subcommands}
  esac
}}

_tfcli() {{  # the command the words so far name; then the value of the option before the cursor, or what it takes
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" command=tfcli word i
  COMPREPLY=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${{COMP_WORDS[i]}}"
    [[ " $(_tfcli_subcommands "$command") " == *" $word "* ]] && command="$command $word"
  done
  case "$command $prev" in
{values}
  esac
  case "$command" in
{offers}
  esac
}}

complete -F _tfcli tfcli
"""


__all__ = ["SHELLS", "completion_script"]
