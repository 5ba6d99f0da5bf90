"""``tfcli config schema``: JSON Schemas of the agent configs written for editors."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.client.conftest import tfcli
from torchforce.agents.config import CONFIGS
from torchforce.agents.schema import schemas
from torchforce.client.cli import main
from torchforce.configs import folder


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["config", *argv])
    except SystemExit as exit:  # argparse's own usage errors
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def test_writes_every_kind_into_schemas(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "schema")
    assert (code, err) == (0, "")
    written = sorted(path.name for path in (tmp_path / "schemas").iterdir())
    assert written == sorted(f"{kind}.schema.json" for kind in [*CONFIGS, "agent"])
    for name in written:
        assert f"wrote schemas/{name}" in out
    assert json.loads((tmp_path / "schemas" / "ppo.schema.json").read_text()) == schemas()["ppo"]
    assert '"json.schemas"' in out


def test_one_kind_into_a_folder_by_its_2018_name(tmp_path, capsys):
    code, out, _ = run(capsys, "schema", "--kind", "ppo_agent", "-o", str(tmp_path / "out"))
    assert code == 0
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["ppo.schema.json"]
    assert f"wrote {tmp_path / 'out' / 'ppo.schema.json'}" in out


def test_to_standard_output(capsys):
    code, out, _ = run(capsys, "schema", "--kind", "dqn", "-o", "-")
    assert code == 0 and json.loads(out) == schemas()["dqn"]
    code, out, _ = run(capsys, "schema", "-o", "-")  # one document: the schema of any agent
    assert code == 0 and json.loads(out) == schemas()["agent"]


def test_an_unknown_kind_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "schema", "--kind", "ppp")
    assert code == 2 and out == ""
    assert err.startswith('tfcli: --kind: unknown config kind "ppp".\n  Known: agent, constant, ddpg')
    assert "Did you mean 'ppo'?" in err
    assert not (tmp_path / "schemas").exists()


def test_the_help_says_what_editors_do_with_them(capsys):
    code, out, _ = run(capsys, "schema", "--help")
    assert code == 0
    assert '"json.schemas"' in out and '"yaml.schemas"' in out and "agent.schema.json" in out


@pytest.mark.slow
def test_the_written_schemas_check_the_shipped_configs(tmp_path):
    """End to end with the real command line: the files it writes validate every shipped agent config."""
    result = tfcli(tmp_path, "config", "schema", "-o", "s")
    assert result.returncode == 0, result.stderr
    schema = json.loads((tmp_path / "s" / "agent.schema.json").read_text())
    for path in sorted(folder("agents").glob("*.json")):
        jsonschema.validate(json.loads(path.read_text()), schema)
    bad = {"type": "dqn", "discont": 0.9}
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    assert Path(tmp_path / "s" / "dqn.schema.json").is_file()
