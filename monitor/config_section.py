"""How every configuration section refuses a value: the first failed check, field named.

Here, not in the ``monitor.config`` package, because sections also live beside the code
they configure (``monitor/vaults/config.py``) and the package's root struct imports them: a
section that imported the package would import itself half-built.
"""

from __future__ import annotations

from collections.abc import Iterable


def require(section: str, checks: Iterable[tuple[bool, str]]) -> None:
    """Raise ``ValueError("<section>.<message>")`` for the first check that is false, so a
    wrong value stops start-up with the field named."""
    for ok, message in checks:
        if not ok:
            raise ValueError(f"{section}.{message}")
