"""The fields of a window ring's bucket, in ring order (shared by ``windows`` and
``readings``): the additive ones, then the two extremes, with an empty bucket's values."""

from __future__ import annotations

import math
from typing import Final

# Field order in the ring: the additive ones, then the two extremes.
_DEV, _COV, _LOW, _HIGH, _R2, _TICKS, _MIN, _MAX = range(8)
_EMPTY = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, math.inf, -math.inf)
#: Public names of the fields, for ``Windows.fields`` (the order of ``Sums``).
DEV: Final = _DEV
COV: Final = _COV
LOW: Final = _LOW
HIGH: Final = _HIGH
R2: Final = _R2
TICKS: Final = _TICKS
MIN: Final = _MIN
MAX: Final = _MAX
