"""V3 pins and errors shared by E3, E8 and E9: framework version, grading scheme, chain.

Error bodies are the spec's table exactly: an unknown ``framework_version`` is 400 with
``supported_versions``; an unknown ``grading_scheme`` is 400 with ``supported_schemes``; a
chain outside the endpoint's set is 400 with the error text ``Invalid chain``. Every V3
response carries ``Service-Api-Version`` and echoes the pins it was scored with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from ...framework.grading import DEFAULT_SCHEME, SUPPORTED_SCHEMES
from ...framework.model import DEFAULT_VERSION, SUPPORTED_VERSIONS
from ...vaults.facts import VAULT_CHAINS
from ..errors import ApiError

API_VERSION = "3.0"
SCHEMA_VERSION = "3.0"
#: The nine V3 vault chains (spec, Limits): the chains the vault facts contract accepts.
#: v2 vaults (E4/E5) cover the first six.
V3_VAULT_CHAINS = VAULT_CHAINS


@dataclass(frozen=True)
class Pins:
    framework_version: str
    grading_scheme: str

    def headers(self) -> dict[str, str]:
        return {"Service-Api-Version": API_VERSION,
                "Service-Framework-Version": self.framework_version,
                "Service-Grading-Scheme": self.grading_scheme}


_API_HEADER = {"Service-Api-Version": API_VERSION}


def parse_pins(query: Mapping[str, str], schemes: bool = True) -> Pins:
    version = query.get("framework_version", DEFAULT_VERSION)
    if version not in SUPPORTED_VERSIONS:
        raise ApiError(400, f"unsupported framework_version {version[:40]!r}",
                       headers=dict(_API_HEADER), supported_versions=list(SUPPORTED_VERSIONS))
    scheme = query.get("grading_scheme", DEFAULT_SCHEME) if schemes else DEFAULT_SCHEME
    if scheme not in SUPPORTED_SCHEMES:
        raise ApiError(400, f"unsupported grading_scheme {scheme[:40]!r}",
                       headers=dict(_API_HEADER), supported_schemes=list(SUPPORTED_SCHEMES))
    return Pins(version, scheme)


@contextmanager
def echoing(pins: Pins) -> Iterator[None]:
    """Errors raised inside still carry the Service-* headers of the pins in force."""
    try:
        yield
    except ApiError as exc:
        exc.headers = {**(exc.headers or {}), **pins.headers()}
        raise


def parse_chain(query: Mapping[str, str], allowed: tuple[str, ...],
                required: bool) -> str | None:
    chain = query.get("chain")
    if chain is None and not required:
        return None
    if chain not in allowed:
        raise ApiError(400, "Invalid chain", parameter="chain", allowed=list(allowed))
    return chain
