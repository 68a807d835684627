"""CLI option parsing alone (tests/integration/test_cli.py runs the commands): a bad
--storage-options is one error line and exit status 1 before any work, -v/-vv set
vcfvirtual's log level, and every command's --help names each of its options."""

from __future__ import annotations

import logging

import click
import pytest
from click.testing import CliRunner

from vcfvirtual.cli import main

COMMANDS = ["index", "relocate", "inspect", "verify"]


def args_for(command, tmp_path):
    """Arguments that parse; the files need not exist for an option error to come first."""
    bcf = tmp_path / "absent.bcf"
    refs = tmp_path / "absent.vcz.json"
    return {
        "index": [str(bcf)],
        "relocate": [str(refs), "s3://bucket/"],
        "inspect": [str(refs)],
        "verify": [str(refs)],
    }[command]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "text,message",
    [
        ("{not json", "--storage-options is not JSON"),
        ('["a list"]', "--storage-options must be a JSON object"),
        ("null", "--storage-options must be a JSON object"),
    ],
)
def test_storage_options_errors(command, text, message, tmp_path):
    result = CliRunner().invoke(main, [command, *args_for(command, tmp_path), "--storage-options", text])
    assert result.exit_code == 1
    assert f"vcfvirtual: error: <input>: {message}" in result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.fixture
def restore_log_level():
    logger = logging.getLogger("vcfvirtual")
    before = logger.level
    yield logger
    logger.setLevel(before)


@pytest.mark.parametrize("flags,level", [([], logging.WARNING), (["-v"], logging.INFO), (["-vv"], logging.DEBUG)])
def test_verbose_levels(flags, level, tmp_path, restore_log_level):
    CliRunner().invoke(main, ["inspect", str(tmp_path / "absent.vcz.json"), *flags])
    assert restore_log_level.level == level


@pytest.mark.parametrize("command", COMMANDS)
def test_help_mentions_every_option(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    cmd = main.commands[command]
    options = [p for p in cmd.params if isinstance(p, click.Option)]
    assert options
    for option in options:
        for name in option.opts + option.secondary_opts:
            assert name in result.output, (command, name)


def test_unknown_option_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["index", str(tmp_path / "x.bcf"), "--no-such-option"])
    assert result.exit_code == 2
    assert "No such option" in result.output


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_workers_must_be_a_positive_integer(value, tmp_path):
    result = CliRunner().invoke(main, ["index", str(tmp_path / "x.bcf"), "-j", value])
    assert result.exit_code == 2
    assert "--workers" in result.output
