"""The whole configuration and how it is read: a TOML file, then environment variables.

A variable ``DEPEG_<SECTION>__<FIELD>`` (``__`` between nested names) overrides the file;
everything is converted into :class:`Config` in one call, so a wrong value names its field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..vaults.config import VaultsConfig
from .kafka import KafkaConfig
from .model import ModelConfig
from .process import GcConfig, LoggingConfig, MetricsConfig, SpreadConfig, StorageConfig
from .sources import ChainsConfig, RegistryConfig
from .surfaces import ApiConfig, DeliveryConfig, V3Config

ENV_PREFIX = "DEPEG_"
CONFIG_ENV = "DEPEG_CONFIG"


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    model: ModelConfig = ModelConfig()
    kafka: KafkaConfig = KafkaConfig()
    storage: StorageConfig = StorageConfig()
    api: ApiConfig = ApiConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    logging: LoggingConfig = LoggingConfig()
    metrics: MetricsConfig = MetricsConfig()
    registry: RegistryConfig = RegistryConfig()
    chains: ChainsConfig = ChainsConfig()
    v3: V3Config = V3Config()
    #: The vault side: tag thresholds, rating, verdict, topics (monitor/vaults/config.py).
    vaults: VaultsConfig = VaultsConfig()
    spread: SpreadConfig = SpreadConfig()
    gc: GcConfig = GcConfig()


class ConfigError(ValueError):
    pass


def _set_path(tree: dict[str, Any], path: list[str], value: str) -> None:
    node = tree
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(path)}: {part} is not a section")
        node = child
    node[path[-1]] = value


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None,
                data_dir: str | None = None) -> Config:
    """File (argument, else ``$DEPEG_CONFIG``, else none) plus ``DEPEG_*`` variables, then
    ``data_dir`` (the ``--data-dir`` option) on top; runtime paths resolved
    (:func:`monitor.paths.resolve_paths`)."""
    from ..paths import resolve_paths

    env = os.environ if env is None else env
    tree: dict[str, Any] = {}
    path = path or env.get(CONFIG_ENV) or None
    if path:
        import tomllib  # only with a file: its import (regexes compiled) is a few ms

        try:
            tree = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from None
    for name, value in env.items():
        if name.startswith(ENV_PREFIX) and "__" in name:
            parts = [p.lower() for p in name[len(ENV_PREFIX):].split("__")]
            _set_path(tree, parts, value)
    if data_dir:
        _set_path(tree, ["storage", "data_dir"], data_dir)
    if not tree:
        # No file and no variables (a replay's usual start): the defaults, which is what
        # converting {} gives (tests/test_config.py), without msgspec first building its
        # converter for every section (~2.5 ms of CPU).
        return resolve_paths(Config(), env)
    try:
        # strict=False lets environment strings become ints, floats and booleans.
        config = msgspec.convert(tree, Config, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    return resolve_paths(config, env)


def to_toml_comments() -> str:
    """The defaults as a commented TOML document, for ``depeg-monitor config --defaults``
    (generated from the sections' field comments: monitor/config_doc.py)."""
    from ..config_doc import render

    return render()
