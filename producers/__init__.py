"""Tick producers: replay files, simulate tokens, adapt Uniswap v3 pool state.

They publish to ``depeg.ticks`` the same wire JSON the monitor reads
(:func:`monitor.ticks.encode_tick`), keyed ``"{chain}:{token}"``. This package imports
from ``monitor``; ``monitor`` never imports it (the CLI finds ``produce`` by entry point).
"""
