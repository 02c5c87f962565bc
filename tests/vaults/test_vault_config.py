"""``vaults.blocking_tags`` is checked against the tag catalog; the defaults skip the check
(so a replay does not import the catalog), which is right only while they are catalog tags."""

from __future__ import annotations

import pytest

from monitor.vaults.catalog import TAG_KEYS
from monitor.vaults.config import DEFAULT_BLOCKING, VaultsConfig


def test_the_default_blocking_tags_are_catalog_tags() -> None:
    assert DEFAULT_BLOCKING and set(DEFAULT_BLOCKING) <= TAG_KEYS


def test_other_blocking_tags_are_checked_against_the_catalog() -> None:
    assert VaultsConfig(blocking_tags=("vault-dormant",)).blocking_tags == ("vault-dormant",)
    with pytest.raises(ValueError, match="unknown tag keys \\['vault-no-such-tag'\\]"):
        VaultsConfig(blocking_tags=("vault-dormant", "vault-no-such-tag"))
    with pytest.raises(ValueError, match="unknown tag keys"):
        VaultsConfig(blocking_tags=(*DEFAULT_BLOCKING, "nonsense"))
