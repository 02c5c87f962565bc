# Cython declarations for windows.py, read only by the optional compiled build
# (monitor/compiled.py, benchmarks/build_compiled.py); the .py stays the reference and
# runs as is without Cython. The ring's per-tick writes go to C doubles through typed
# views of its columns, kept on the object (``_name_columns``). Bucket indexes stay
# Python arithmetic: ``t // bucket`` on two C doubles compiles to floor(t / bucket),
# which can differ from Python's float floor division, so no ``//`` here has a C double
# on both sides (the build also turns type inference off).
import cython

cdef class Windows:
    cdef public double bucket
    cdef public Py_ssize_t size
    cdef public double low
    cdef public double high
    cdef public double base_tau
    cdef public list _f
    cdef public dict _flags
    cdef public object head
    cdef public object last_price_ts
    cdef public object last_dev
    cdef public object base_s
    cdef public object base_ts
    cdef double[:] _dev
    cdef double[:] _cov
    cdef double[:] _low_s
    cdef double[:] _high_s
    cdef double[:] _r2
    cdef double[:] _ticks
    cdef double[:] _min
    cdef double[:] _max

    cdef double[:] _column(self, Py_ssize_t i)

    @cython.locals(size=cython.Py_ssize_t, s=cython.Py_ssize_t, dev_dt="double[:]",
                   covered="double[:]", low_s="double[:]", high_s="double[:]",
                   r2="double[:]", ticks="double[:]", mn="double[:]", mx="double[:]")
    cpdef Py_ssize_t _slot(self, b) except -1

    @cython.locals(dev_dt="double[:]", covered="double[:]", low_s="double[:]",
                   high_s="double[:]", mn="double[:]", mx="double[:]",
                   below_low=cython.bint, below_high=cython.bint, size=cython.Py_ssize_t,
                   slot=cython.Py_ssize_t, dt=cython.double)
    cpdef _hold(self, double dev, start, end)

    @cython.locals(slot=cython.Py_ssize_t, change=cython.double, r2=cython.double,
                   mn="double[:]", mx="double[:]")
    cpdef add_price(self, ts, double dev)
