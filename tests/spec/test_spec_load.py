"""load_file / load_spec: JSON and YAML files, and the message for each way a file can be wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchforce.spec import SpecError, load_file, load_spec

AGENT = {"type": "dqn_agent", "update_mode": {"unit": "timesteps", "batch_size": 64}, "memory": None}


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_valid_json(tmp_path: Path) -> None:
    text = '{"type": "dqn_agent",\n "update_mode": {"unit": "timesteps", "batch_size": 64},\n "memory": null}\n'
    file = write(tmp_path / "dqn.json", text)
    assert load_file(file) == AGENT
    assert load_file(str(file)) == AGENT


@pytest.mark.parametrize("name", ["dqn.yaml", "dqn.yml", "DQN.YAML"])
def test_valid_yaml(tmp_path: Path, name: str) -> None:
    file = write(tmp_path / name, "type: dqn_agent\nupdate_mode:\n  unit: timesteps\n  batch_size: 64\nmemory: null\n")
    assert load_file(file) == AGENT


def test_yaml_accepts_json_and_an_empty_file_is_null(tmp_path: Path) -> None:
    assert load_file(write(tmp_path / "a.yaml", '{"a": [1, 2]}')) == {"a": [1, 2]}
    assert load_file(write(tmp_path / "empty.yaml", "")) is None


def test_other_suffixes_are_read_as_json(tmp_path: Path) -> None:
    assert load_file(write(tmp_path / "agent.conf", '{"a": 1}')) == {"a": 1}


def test_missing_file(tmp_path: Path) -> None:
    file = tmp_path / "nope.json"
    with pytest.raises(SpecError) as caught:
        load_file(file)
    assert str(caught.value) == (f"spec file not found: {file}.\n  Check the path, or name a config the project ships.")


def test_a_directory_is_not_a_spec_file(tmp_path: Path) -> None:
    folder = tmp_path / "configs.json"
    folder.mkdir()
    with pytest.raises(SpecError) as caught:
        load_file(folder)
    assert str(caught.value) == (
        f"is a directory, not a spec file: {folder}.\n  Check the path, or name a config the project ships."
    )


def test_malformed_json_names_line_and_column(tmp_path: Path) -> None:
    file = write(tmp_path / "bad.json", '{\n  "a": 1,\n  "b": }\n')
    with pytest.raises(SpecError) as caught:
        load_file(file)
    assert str(caught.value) == f"malformed JSON at line 3, column 8: Expecting value (in {file})."
    assert caught.value.file == str(file)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_malformed_json_trailing_comma(tmp_path: Path) -> None:
    file = write(tmp_path / "bad.json", '{"a": 1,}')
    with pytest.raises(SpecError) as caught:
        load_file(file)
    assert str(caught.value) == (
        f"malformed JSON at line 1, column 9: Expecting property name enclosed in double quotes (in {file})."
    )


def test_empty_json_file(tmp_path: Path) -> None:
    file = write(tmp_path / "empty.json", "")
    with pytest.raises(SpecError) as caught:
        load_file(file)
    assert str(caught.value) == f"malformed JSON at line 1, column 1: Expecting value (in {file})."


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: b: c\n", "line 1, column 5: mapping values are not allowed here"),
        ("a:\n  - 1\n - 2\n", "line 3, column 2: expected <block end>, but found '<block sequence start>'"),
    ],
)
def test_malformed_yaml_names_line_and_column(tmp_path: Path, text: str, problem: str) -> None:
    file = write(tmp_path / "bad.yaml", text)
    with pytest.raises(SpecError) as caught:
        load_file(file)
    assert str(caught.value) == f"malformed YAML at {problem} (in {file})."


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    file = write(tmp_path / "latin1.json", '{"name": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(SpecError) as caught:
        load_file(file)
    assert str(caught.value) == f"not UTF-8 text: byte 0xe9 at offset 13 (in {file})."


def test_load_spec_reads_files(tmp_path: Path) -> None:
    file = write(tmp_path / "a.json", '{"type": "ppo"}')
    assert load_spec(file) == ({"type": "ppo"}, str(file))
    assert load_spec(str(file)) == ({"type": "ppo"}, str(file))
    yaml_file = write(tmp_path / "a.YML", "type: ppo\n")
    assert load_spec(str(yaml_file)) == ({"type": "ppo"}, str(yaml_file))


def test_load_spec_passes_data_through() -> None:
    spec = {"type": "ppo"}
    data, file = load_spec(spec)
    assert data is spec and file is None
    assert load_spec("ppo") == ("ppo", None)  # a name, not a file
    assert load_spec(None) == (None, None)
    assert load_spec(["dense"]) == (["dense"], None)


def test_load_spec_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(str(tmp_path / "agent.yaml"))
    assert str(caught.value).startswith(f"spec file not found: {tmp_path / 'agent.yaml'}.")


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("twice.json", '{"agent": {"type": "ppo", "type": "dqn"}}', 'the key "type" is given twice in one object'),
        ("twice.yaml", "agent:\n  type: ppo\n  type: dqn\n", "the key 'type' is given twice (lines 2 and 3)"),
    ],
)
def test_a_key_given_twice_is_an_error_not_the_last_one_silently(tmp_path, name, text, words):
    (tmp_path / name).write_text(text)
    with pytest.raises(SpecError, match=re.escape(words)):
        load_file(tmp_path / name)


def test_yaml_merge_keys_may_be_overridden_in_the_mapping(tmp_path):
    (tmp_path / "merged.yaml").write_text("base: &b {x: 1, y: 2}\nrun:\n  <<: *b\n  x: 3\n")
    assert load_file(tmp_path / "merged.yaml")["run"] == {"x": 3, "y": 2}
