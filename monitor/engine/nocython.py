"""Stands in for Cython's ``cython`` module where Cython is not installed (the default
install): the engine modules then run as the plain Python they are.

The optional compiled build (``monitor/compiled.py``) compiles ``windows`` and
``readings`` with Cython, which reads ``cython.compiled`` as a compile-time True and
drops the pure branch; here it is False, so the pure branch (the reference) runs.
"""

from typing import Final

compiled: Final = False
