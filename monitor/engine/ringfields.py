"""The fields of a window ring's bucket, in ring order (shared by ``windows`` and
``readings``): the additive ones, then the two extremes, with an empty bucket's values."""

from __future__ import annotations

import math
from typing import Final

# Field order in the ring: the additive ones, then the two extremes. Final literals, so
# the compiled build (monitor/compiled.py) inlines them where the ring is read, instead
# of looking each one up in this module's globals every time.
_DEV: Final = 0
_COV: Final = 1
_LOW: Final = 2
_HIGH: Final = 3
_R2: Final = 4
_TICKS: Final = 5
_MIN: Final = 6
_MAX: Final = 7
_EMPTY: Final = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, math.inf, -math.inf)
#: Public names of the fields, for ``Windows.fields`` (the order of ``Sums``).
DEV: Final = _DEV
COV: Final = _COV
LOW: Final = _LOW
HIGH: Final = _HIGH
R2: Final = _R2
TICKS: Final = _TICKS
MIN: Final = _MIN
MAX: Final = _MAX
