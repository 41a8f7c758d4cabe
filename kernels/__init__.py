"""Pure numba kernels of the paigrid model over flat per-dimension tables.

This package imports only numpy and numba.  ``layout`` fixes the columns of the tables the
kernels read, ``model`` holds the compiled kernels and ``reference`` the plain numpy
implementations of the same functions, used by the tests and as the benchmark baseline.
"""
