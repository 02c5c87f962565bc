"""The V3 risk framework as data: load a versioned TOML file and validate it, once.

The taxonomy (categories, weights, criteria, which vault tags decide which criterion) lives
in ``monitor/framework/v1.toml``, not in code, so E9 serves exactly what E8 scores with.
:func:`load_framework` turns the file into frozen structs and refuses a file that breaks a
rule (weights not summing to 1, a tag in two criteria, a planned criterion with tags, ...)
with a :class:`FrameworkError` naming the entry.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Set
from functools import cache
from importlib import resources
from typing import Literal

import msgspec

from .grading import SCHEMES

Outcome = Literal["warn", "fail"]
CriterionStatus = Literal["live", "planned"]

#: The seven category keys of every framework version, in display order.
CATEGORY_KEYS = ("smart_contract", "operational_governance", "asset_collateral",
                 "market_liquidity", "counterparty", "hack_exploit_history",
                 "chain_infrastructure")
#: Framework versions this build can score with (E8 ``framework_version``).
SUPPORTED_VERSIONS = ("v1",)
DEFAULT_VERSION = "v1"


class FrameworkError(ValueError):
    """The framework file breaks a rule; the message names the entry."""


class Criterion(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    key: str
    name: str
    status: CriterionStatus
    description: str
    #: Vault facts that decide the criterion: with none of them known it is not evaluated.
    facts: list[str]
    #: Vault tag -> the outcome its presence forces.
    tags: dict[str, Outcome] = {}


class Category(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    key: str
    name: str
    weight: float
    description: str
    criteria: list[Criterion]


class Points(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Risk points of an outcome (0 best, 100 worst)."""

    # ``pass`` is a keyword; the file says "pass".
    pass_: float = msgspec.field(name="pass")
    warn: float
    fail: float


class Cap(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A grade ceiling: with any of ``tags_any`` present, or an upstream risk of at least
    ``upstream_min``, the grade is never above ``max_grade``."""

    key: str
    name: str
    max_grade: str
    tags_any: list[str] = []
    upstream_min: float | None = None

    def applies(self, tags: Set[str], upstream: float | None) -> bool:
        return any(t in tags for t in self.tags_any) or (
            self.upstream_min is not None and upstream is not None
            and upstream >= self.upstream_min)


class Framework(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: str
    #: What the framework grades: ERC-4626 vaults (E8) or pegged tokens (E3).
    kind: Literal["vault", "rwa"]
    published: str
    description: str
    points: Points
    caps: list[Cap]
    categories: list[Category]

    def criteria(self) -> list[tuple[Category, Criterion]]:
        return [(cat, crit) for cat in self.categories for crit in cat.criteria]

    def tag_owner(self) -> dict[str, str]:
        """Vault tag -> the key of the one criterion it belongs to."""
        return {tag: crit.key for _, crit in self.criteria() for tag in crit.tags}


def validate(fw: Framework) -> Framework:
    keys = tuple(c.key for c in fw.categories)
    if fw.kind == "vault" and keys != CATEGORY_KEYS:
        raise FrameworkError(f"categories must be {list(CATEGORY_KEYS)} in that order, "
                             f"got {list(keys)}")
    if len(set(keys)) != len(keys):
        raise FrameworkError(f"category keys repeat: {list(keys)}")
    for cat in fw.categories:
        if not 0.0 <= cat.weight <= 1.0:
            raise FrameworkError(f"category {cat.key}: weight {cat.weight} outside [0, 1]")
        if not cat.criteria:
            raise FrameworkError(f"category {cat.key}: no criteria")
    total = math.fsum(c.weight for c in fw.categories)
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise FrameworkError(f"category weights sum to {total}, not 1")
    if not 0 <= fw.points.pass_ <= fw.points.warn <= fw.points.fail <= 100:
        raise FrameworkError("points must satisfy 0 <= pass <= warn <= fail <= 100")
    seen_criteria: set[str] = set()
    owner: dict[str, str] = {}
    for _, crit in fw.criteria():
        if crit.key in seen_criteria:
            raise FrameworkError(f"criterion {crit.key} appears twice")
        seen_criteria.add(crit.key)
        if crit.status == "planned" and crit.tags:
            raise FrameworkError(f"criterion {crit.key} is planned but lists tags")
        if crit.status == "live" and not crit.facts:
            raise FrameworkError(f"criterion {crit.key} is live but names no facts")
        for tag in crit.tags:
            if tag in owner:
                raise FrameworkError(f"tag {tag} belongs to both {owner[tag]} and {crit.key}")
            owner[tag] = crit.key
    for cap in fw.caps:
        if not cap.tags_any and cap.upstream_min is None:
            raise FrameworkError(f"cap {cap.key}: names neither tags_any nor upstream_min")
        unknown = [t for t in cap.tags_any if t not in owner]
        if unknown:
            raise FrameworkError(f"cap {cap.key}: tags {unknown} belong to no criterion")
        for scheme, bands in SCHEMES.items():
            if cap.max_grade not in {b.grade for b in bands}:
                raise FrameworkError(f"cap {cap.key}: {cap.max_grade} is not a grade of "
                                     f"scheme {scheme}")
    return fw


def parse_framework(text: str) -> Framework:
    try:
        raw = tomllib.loads(text)
        fw = msgspec.convert(raw, Framework)
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        raise FrameworkError(f"invalid framework file: {exc}") from None
    return validate(fw)


@cache
def load_framework(version: str = DEFAULT_VERSION, kind: str = "vault") -> Framework:
    """The packaged framework ``version`` for vaults (``v1.toml``) or pegged tokens
    (``rwa_v1.toml``), validated; cached for the process."""
    if version not in SUPPORTED_VERSIONS or kind not in ("vault", "rwa"):
        raise FrameworkError(f"unknown framework version {version!r} ({kind})")
    name = f"{version}.toml" if kind == "vault" else f"rwa_{version}.toml"
    fw = parse_framework(resources.files(__package__).joinpath(name).read_text("utf-8"))
    if (fw.version, fw.kind) != (version, kind):
        raise FrameworkError(f"{name} says version {fw.version!r}, kind {fw.kind!r}")
    return fw
