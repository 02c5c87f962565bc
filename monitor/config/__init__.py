"""One configuration for every process: a TOML file, then environment variables on top.

Environment variables are ``DEPEG_<SECTION>__<FIELD>`` (for example
``DEPEG_KAFKA__BOOTSTRAP_SERVERS=broker:9092`` or ``DEPEG_MODEL__REFRESH_SECONDS=60``).
Values are validated once, here, into typed structs; a wrong value stops start-up with a
message that names the field.

One idea per module: ``load`` (the root :class:`Config`, reading the file and the
environment), ``model`` (the rating model), ``kafka``, ``surfaces`` (API, delivery, V3),
``sources`` (registry, chains) and ``process`` (storage, logs, metrics, gc, spread stage).
The vault side's section is ``monitor/vaults/config.py``; the check every section's
``__post_init__`` uses is ``monitor/config_section.py``. Import from here:
``from monitor.config import X``.
"""

from __future__ import annotations

from .kafka import KafkaConfig
from .load import CONFIG_ENV, ENV_PREFIX, Config, ConfigError, load_config, to_toml_comments
from .model import ModelConfig, Weights
from .process import GcConfig, LoggingConfig, MetricsConfig, SpreadConfig, StorageConfig
from .sources import ChainConfig, ChainsConfig, RegistryConfig
from .surfaces import ApiConfig, DeliveryConfig, KeyRateLimit, V3Config

__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "ApiConfig",
    "ChainConfig",
    "ChainsConfig",
    "Config",
    "ConfigError",
    "DeliveryConfig",
    "GcConfig",
    "KafkaConfig",
    "KeyRateLimit",
    "LoggingConfig",
    "MetricsConfig",
    "ModelConfig",
    "RegistryConfig",
    "SpreadConfig",
    "StorageConfig",
    "V3Config",
    "Weights",
    "load_config",
    "to_toml_comments",
]
