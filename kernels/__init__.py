"""Pure numba kernels of the paigrid model over flat per-dimension tables.

This package imports only numpy and numba.  ``dp_columns`` and ``llm_columns`` declare the
columns of the tables the kernels read (``columns.Table``: indices unique and dense), ``model``
(data-parallel) and ``llm`` (LLM layouts) hold the compiled kernels, and ``reference`` and
``llm_reference`` the plain numpy implementations of the same functions, used by the tests and
as the benchmark baseline.
"""
