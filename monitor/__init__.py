"""depeg-monitor: watches pegged tokens for loss of peg.

The core package. ``monitor.engine`` is pure (ticks in, ratings and tier changes out);
everything that touches Kafka, a database or HTTP sits in its own module at the edge.
"""

__version__ = "0.1.0"

# Opt-in compiled modules (monitor/compiled.py): nothing happens unless asked for.
from .compiled import search_first as _search_first

_search_first(__name__, __path__)
