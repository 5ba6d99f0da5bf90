"""``tfcli config schema``: JSON Schemas of the agent configs, for editors to check and complete config files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from torchforce.client.commands import add_command, command
from torchforce.client.project import check_output_folder
from torchforce.spec import unknown_name_error

DEFAULT_FOLDER = "schemas"
DESCRIPTION = f"""Write the JSON Schema (draft 2020-12) of each agent type's config: every option with its
one-line doc, default, type and range, and no other keys. Editors use them to check config files as you type
(a typo'd key or a wrong type is underlined) and to complete keys and values. 'agent.schema.json' covers every
type (its "type" picks the options); '<type>.schema.json' one type each.

Without -o the files go into ./{DEFAULT_FOLDER}/ (created if missing); -o DIR names a folder that exists. Files
there are replaced. '-o -' prints one schema (--kind, by default 'agent') to standard output.

Point your editor at them, e.g. in VS Code's .vscode/settings.json:
  "json.schemas": [{{"fileMatch": ["configs/agents/*.json"], "url": "./{DEFAULT_FOLDER}/agent.schema.json"}}]
(a relative "url" is read from the workspace folder; a schema elsewhere is a file:/// URL, as tfcli prints it)
and for YAML configs (Red Hat's YAML extension):
  "yaml.schemas": {{"./{DEFAULT_FOLDER}/agent.schema.json": "configs/agents/*.yaml"}}
PyCharm: Settings > Languages & Frameworks > Schemas and DTDs > JSON Schema Mappings."""


def add_parser(groups: argparse._SubParsersAction) -> None:
    group = add_command(
        groups,
        "config",
        help="tools for config files (JSON Schemas for editors)",
        description="Tools for config files: 'schema' writes JSON Schemas of the agent configs, so that editors\n"
        "check config files as you type and complete their keys.",
        examples=["tfcli config schema", "tfcli config schema --kind ppo -o -"],
    )
    commands = group.add_subparsers(dest="command", metavar="COMMAND", help="one of:")
    schema = add_command(
        commands,
        "schema",
        help="write JSON Schemas of the agent configs, for editors",
        description=DESCRIPTION,
        examples=[
            f"tfcli config schema                 # all of them into ./{DEFAULT_FOLDER}/",
            "tfcli config schema --kind ppo -o configs   # one type, into a folder that exists",
            "tfcli config schema --kind dqn -o - > dqn.schema.json",
        ],
    )
    schema.add_argument("-k", "--kind", metavar="KIND", help="one agent type (ppo, dqn...), or 'agent' for any")
    schema.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help=f"an existing folder to write into, '-' for standard output (default: ./{DEFAULT_FOLDER}, created)",
    )


def select(kind: str | None, *, default: str | None = None) -> dict[str, dict[str, Any]]:
    """The schemas to write by kind: all without ``kind`` (or ``default``'s alone), else the one named (a 2018
    alias such as ``ppo_agent`` names its type); an unknown kind is a SpecError with did-you-mean."""
    from torchforce.agents import AGENTS
    from torchforce.agents.schema import schemas

    every = schemas()
    kind = kind if kind is not None else default
    if kind is None:
        return every
    name = kind if kind in every else AGENTS.canonical(kind)
    if name not in every:
        raise unknown_name_error("--kind", "config kind", kind, every, aliases=AGENTS.aliases)
    return {name: every[name]}


def output_folder(output: str | None) -> Path:
    """The folder to write the schemas into: ``output`` (``-o``), which must exist, or ./schemas/, made if
    missing."""
    folder = Path(DEFAULT_FOLDER if output is None else output)
    if output is None and not folder.exists():
        folder.mkdir()
    check_output_folder(folder, "the schemas")
    return folder


def schema_url(path: Path) -> str:
    """``path`` as the "url" of VS Code's json.schemas setting: a relative path as one (from the workspace folder),
    an absolute one as a file:// URL."""
    if path.is_absolute():
        return path.as_uri()
    shown = path.as_posix()
    return shown if shown.startswith("../") else f"./{shown}"


def write(chosen: dict[str, dict[str, Any]], folder: Path) -> list[Path]:
    """Write ``<kind>.schema.json`` files into ``folder``; the paths written."""
    written = []
    for kind, schema in chosen.items():
        path = folder / f"{kind}.schema.json"
        path.write_text(json.dumps(schema, indent=2) + "\n")
        written.append(path)
    return written


@command("config", "schema")
def config_schema(args: argparse.Namespace) -> None:
    if args.output == "-":
        (schema,) = select(args.kind, default="agent").values()
        print(json.dumps(schema, indent=2))
        return
    chosen = select(args.kind)
    folder = output_folder(args.output)
    written = write(chosen, folder)
    for path in written:
        print(f"wrote {path}")
    example = written[0] if len(written) == 1 else folder / "agent.schema.json"
    print(
        f'Editors: map config files to a schema, e.g. VS Code "json.schemas": [{{"fileMatch": '
        f'["configs/agents/*.json"], "url": {json.dumps(schema_url(example))}}}] (tfcli config schema --help).'
    )
