"""``round(x, digits)`` for the compiled build without the decimal conversion.

``round`` with digits formats ``x`` correctly rounded to ``digits`` decimals (``dtoa``,
half-even on the exact binary value) and parses the digits back (``strtod``): ~3.4 k
instructions, about six times per rating snapshot. Compiled (mypyc), :func:`scaled`
gives the same float with a few native float operations: ``k``, the integer nearest
``x * 10**digits``, divided by ``10**digits``. Why it is the very same float:

- ``p = x * scale`` is within ``|p| * 2**-53`` (< 1.2e-7 for ``|p| < 1e9``) of the exact
  product, so when ``p`` is more than 1e-6 from a half-integer the exact product rounds
  to the same integer ``k`` as ``p`` (nearer a half, exactly on one, NaN or too large:
  NaN is returned and the caller uses ``round``);
- ``round`` then parses the decimal ``k * 10**-digits`` to the nearest double; ``k`` and
  ``scale`` are exact doubles (``|k| < 2**53``, ``10**digits`` for ``digits <= 22``) and
  IEEE division is correctly rounded, so ``k / scale`` is that nearest double;
- ``k == 0``: ``round`` keeps the sign of ``x`` (``-0.0`` for a small negative ``x``).

Interpreted, these operations cost more than ``round`` (~3.8 k instructions): callers
use ``round`` unless :data:`NATIVE`. tests/engine/test_rounding.py compares
:func:`scaled` with ``round`` (ties, near-ties, signs, every digit count used).
"""

from __future__ import annotations

import math
from typing import Final

#: This module runs compiled (an extension module, not a ``.py`` file): then callers
#: round with :func:`round_to`, else with the builtin.
NATIVE: Final = not __file__.endswith(".py")


def scaled(x: float, scale: float) -> float:
    """``round(x, digits)`` with ``scale == 10.0 ** digits`` (``digits`` 0..22), or NaN
    when it cannot tell it from the product alone (see the module's docstring)."""
    p = x * scale
    if -1e9 < p < 1e9:
        k = math.floor(p + 0.5)  # exact: p + 0.5 is, at these magnitudes
        d = p - k
        if -0.499999 < d < 0.499999:
            if k == 0:
                return math.copysign(0.0, x)
            return k / scale
    return math.nan


def round_to(x: float, digits: int, scale: float) -> float:
    """``round(x, digits)``; ``scale`` is ``10.0 ** digits``."""
    r = scaled(x, scale)
    if r == r:
        return r
    return round(x, digits)
