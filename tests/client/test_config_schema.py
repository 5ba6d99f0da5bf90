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
    (tmp_path / "out").mkdir()
    code, out, _ = run(capsys, "schema", "--kind", "ppo_agent", "-o", str(tmp_path / "out"))
    assert code == 0
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["ppo.schema.json"]
    assert f"wrote {tmp_path / 'out' / 'ppo.schema.json'}" in out


def editor_url(out: str) -> str:
    return json.loads("{" + out.split('"json.schemas": [{')[1].split("}]")[0] + "}")["url"]


def test_the_editor_url_is_relative_for_a_relative_folder_and_a_file_url_for_an_absolute_one(
    tmp_path, monkeypatch, capsys
):
    """An absolute -o printed "url": ".//abs/folder/ppo.schema.json", which no editor reads."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my schemas").mkdir()
    code, out, _ = run(capsys, "schema", "--kind", "ppo", "-o", str(tmp_path / "my schemas"))
    assert code == 0 and editor_url(out) == (tmp_path / "my schemas" / "ppo.schema.json").as_uri()
    assert editor_url(out).startswith("file:///") and "my%20schemas/ppo.schema.json" in editor_url(out)
    code, out, _ = run(capsys, "schema", "-o", "my schemas")
    assert code == 0 and editor_url(out) == "./my schemas/agent.schema.json"
    code, out, _ = run(capsys, "schema", "--kind", "dqn")
    assert code == 0 and editor_url(out) == "./schemas/dqn.schema.json"


def test_a_missing_output_folder_is_refused_as_plot_and_export_refuse_it(tmp_path, monkeypatch, capsys):
    """-o /nonexistent/x made the whole path (mkdir -p, anywhere on the machine) and wrote there."""
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "nowhere" / "x"
    code, out, err = run(capsys, "schema", "--kind", "ppo", "-o", str(missing))
    assert (code, out) == (2, "")
    assert err == (
        f"tfcli: the folder '{missing}' does not exist\n"
        f"  Create it first ('mkdir -p {missing}'), or give another -o/--output.\n"
    )
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "a-file").write_text("mine")
    code, out, err = run(capsys, "schema", "-o", "a-file")
    assert (code, out) == (2, "") and err.startswith("tfcli: 'a-file' is a file, not a folder to write the schemas")
    assert (tmp_path / "a-file").read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


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
    (tmp_path / "s").mkdir()
    result = tfcli(tmp_path, "config", "schema", "-o", "s")
    assert result.returncode == 0, result.stderr
    schema = json.loads((tmp_path / "s" / "agent.schema.json").read_text())
    for path in sorted(folder("agents").glob("*.json")):
        jsonschema.validate(json.loads(path.read_text()), schema)
    bad = {"type": "dqn", "discont": 0.9}
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    assert Path(tmp_path / "s" / "dqn.schema.json").is_file()
