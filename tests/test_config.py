"""Configuration: file, then environment, validated once with the field named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import ConfigError, load_config


def test_file_then_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[model]\nrefresh_seconds = 60\n[kafka]\nbootstrap_servers = "a:9092"\n')
    config = load_config(cfg, env={"DEPEG_KAFKA__BOOTSTRAP_SERVERS": "b:9092",
                                   "DEPEG_MODEL__WEIGHTS__SLIPPAGE": "25"})
    assert config.model.refresh_seconds == 60
    assert config.kafka.bootstrap_servers == "b:9092"
    assert config.model.weights.slippage == 25.0


def test_no_file_and_no_variables_is_the_converted_empty_tree(tmp_path: Path) -> None:
    """Without a file or variables load_config builds ``Config()`` instead of converting
    an empty tree: the same configuration, and one the converter accepts as it stands."""
    import msgspec

    from monitor.config import Config
    from monitor.paths import resolve_paths

    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    converted = resolve_paths(msgspec.convert({}, Config, strict=False), env)
    assert load_config(None, env=env) == converted
    empty = tmp_path / "empty.toml"
    empty.write_text("# nothing set\n")
    assert load_config(empty, env=env) == converted
    assert msgspec.convert(msgspec.to_builtins(Config()), Config) == Config()


def test_wrong_values_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="refresh_seconds"):
        load_config(None, env={"DEPEG_MODEL__REFRESH_SECONDS": "often"})
    with pytest.raises(ConfigError, match="nonsense"):
        load_config(None, env={"DEPEG_MODEL__NONSENSE": "1"})


def test_gc_section_from_file_and_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[gc]\nthreshold0 = 20000\nfreeze = false\n")
    config = load_config(cfg, env={"DEPEG_GC__ENABLED": "false"})
    assert (config.gc.enabled, config.gc.freeze, config.gc.threshold0) == (False, False, 20000)
    with pytest.raises(ConfigError, match="threshold"):
        load_config(None, env={"DEPEG_GC__THRESHOLD0": "0"})


def test_cli_help_lists_commands_and_config_prints_defaults() -> None:
    out = subprocess.run([sys.executable, "-m", "monitor", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "replay" in out and "config" in out
    out = subprocess.run([sys.executable, "-m", "monitor", "config", "--defaults"],
                         capture_output=True, text=True, check=True).stdout
    assert "[model]" in out and "calm_decay_per_hour = 40.0" in out


def test_config_command_masks_secrets() -> None:
    env = {**__import__("os").environ,
           "DEPEG_DELIVERY__SECRET_ENCRYPTION_KEY": "s3cr3t-value",
           "DEPEG_STORAGE__URL": "postgresql://app:hunter2@db:5432/depeg"}
    out = subprocess.run([sys.executable, "-m", "monitor", "config"], capture_output=True,
                         text=True, check=True, env=env).stdout
    assert "s3cr3t-value" not in out and "hunter2" not in out
    assert "postgresql://app:[redacted]@db:5432/depeg" in out
