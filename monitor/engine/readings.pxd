# Cython declarations for readings.py, read only by the optional compiled build
# (monitor/compiled.py, benchmarks/build_compiled.py); the .py stays the reference and
# runs as is without Cython. The ring's columns as typed views of C doubles, their slice
# sums and extremes as C loops in the builtins' order (``span_sum``, ``span_pick``).
# No ``//`` with a C double on both sides (see windows.pxd).
import cython
from monitor.engine.windows cimport Windows

cdef class Flags:
    cdef public list columns
    cdef public tuple pairs
    cdef public object lo
    cdef public object upto

    @cython.locals(size=cython.Py_ssize_t, slot=cython.Py_ssize_t, x=cython.double)
    cpdef cover(self, lo, hi, double[:] ext, double[:] cov, bint above)

@cython.locals(s=cython.double, k=cython.Py_ssize_t)
cpdef double span_sum(double[:] column, Py_ssize_t a, Py_ssize_t b)

@cython.locals(m=cython.double, x=cython.double, k=cython.Py_ssize_t)
cpdef double span_pick(double acc, double[:] column, Py_ssize_t a, Py_ssize_t b, bint low)

@cython.locals(size=cython.Py_ssize_t, a=cython.Py_ssize_t, b=cython.Py_ssize_t,
               column="double[:]", low=cython.bint)
cpdef list read_fields(Windows w, now, spec)

@cython.locals(size=cython.Py_ssize_t)
cpdef list count_beyond(Windows w, now, seconds, tuple lines, bint above)
