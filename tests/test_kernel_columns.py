"""The kernel tables' column indices (``kernels/dp_columns.py``, ``kernels/llm_columns.py``) are
unique and dense, and a bad table value is reported by its catalogue column, not by an index."""

import dataclasses

import pytest

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.kernel_tables import gpu_tables
from paigrid.kernels import dp_columns as L

# table prefix -> the count constant that closes it
TABLES = {"J_": "N_JOB_FIELDS", "G_": "N_GPU_FIELDS", "P_": "N_PREC_FIELDS", "L_": "N_LINK_FIELDS", "O_": "N_OPTIONS"}
# fields that are the first of a run of N_CLASSES columns (one per operator class)
CLASS_RUNS = {"J_CLASS_FLOP", "J_CLASS_BYTES"}


@pytest.mark.parametrize("prefix", sorted(TABLES))
def test_columns_tile_their_table(prefix):
    fields = {
        name: value
        for name, value in vars(L).items()
        if name.startswith(prefix) and name.isupper() and isinstance(value, int)
    }
    assert fields, f"no {prefix} columns in kernels/dp_columns.py"
    covered = []
    for name, first in fields.items():
        width = L.N_CLASSES if name in CLASS_RUNS else 1
        covered += [(column, name) for column in range(first, first + width)]
    columns = sorted(column for column, _ in covered)
    assert columns == list(range(getattr(L, TABLES[prefix]))), (
        f"{prefix} columns are not each used once from 0 to {TABLES[prefix]} - 1: {sorted(covered)}"
    )


def test_a_gpu_value_the_model_cannot_use_names_its_column():
    cats = Catalogues.load()
    rows = [dict(row) for row in cats.gpus.rows]
    rows[0]["tdp_W"] = "0"  # a user catalogue row that passed its own checks but is useless to the model
    cats.gpus = dataclasses.replace(cats.gpus, rows=rows, _index={}, _numbers={}, _seen={})
    with pytest.raises(PaigridError, match=r"lacks a positive tdp_W value"):
        gpu_tables(cats, [rows[0]["name"]], ["fp32"], defaults())


# prefix of each declared table's constants (``kernels.columns.Table`` in kernels/dp_columns.py)
DECLARED_PREFIX = {"job": "J_", "gpu": "G_", "precision": "P_", "link": "L_", "options": "O_"}
UNITS = {
    "FLOP",
    "bytes",
    "bytes/s",
    "bytes/parameter",
    "count",
    "samples",
    "samples/s",
    "GPUs",
    "NICs",
    "fraction",
    "ratio",
    "flag",
    "code",
    "s",
    "W",
    "USD/GPU-hour",
}


@pytest.mark.parametrize("table", sorted(L.TABLES))
def test_declared_columns_are_the_constants(table):
    """Each declared column is the module constant of its name, with a unit and a meaning, and
    the declared widths add up to the table's count constant."""
    declared = L.TABLES[table]
    prefix = DECLARED_PREFIX[table]
    assert declared.columns and declared.width == getattr(L, TABLES[prefix])
    for column in declared.columns:
        assert getattr(L, prefix + column.name.upper()) == column.index, column
        assert column.unit in UNITS and column.doc, column
    constants = {n for n, v in vars(L).items() if n.startswith(prefix) and n.isupper() and isinstance(v, int)}
    assert constants == {prefix + c.name.upper() for c in declared.columns}


def test_a_table_refuses_a_column_declared_twice():
    from paigrid.kernels.columns import Table

    table = Table("t")
    assert (table.column("a", "s", "first"), table.column("b", "s", "second", width=3), table.width) == (0, 1, 4)
    with pytest.raises(ValueError, match="declared twice"):
        table.column("a", "s", "again")


# the LLM kernel's tables (kernels/llm_columns.py): prefix -> (count constant, runs wider than one)
LLM_TABLES = {
    "LA_": ("N_LAYOUT_FIELDS", {}),
    "HW_": ("N_HW_FIELDS", {}),
    "M_": ("N_MODEL_FIELDS", {"M_HW_FLOPS": 3}),
    "OP_": ("N_OPTION_FIELDS", {}),
    "CT_": ("N_CT_FIELDS", {}),
    "R_": ("N_RESULT_FIELDS", {}),
}


@pytest.mark.parametrize("prefix", sorted(LLM_TABLES))
def test_llm_columns_tile_their_table(prefix):
    from paigrid.kernels import llm_columns as K

    count, runs = LLM_TABLES[prefix]
    fields = {n: v for n, v in vars(K).items() if n.startswith(prefix) and n.isupper() and isinstance(v, int)}
    assert fields, f"no {prefix} columns in kernels/llm_columns.py"
    covered = sorted(column for name, first in fields.items() for column in range(first, first + runs.get(name, 1)))
    assert covered == list(range(getattr(K, count))), f"{prefix} columns are not each used once: {sorted(fields)}"


# prefix of each declared LLM table's constants (``kernels.columns.Table`` in kernels/llm_columns.py)
LLM_DECLARED_PREFIX = {
    "layout": "LA_",
    "hardware": "HW_",
    "model": "M_",
    "options": "OP_",
    "compute": "CT_",
    "result": "R_",
}
LLM_UNITS = UNITS | {
    "index",
    "sequences",
    "tokens",
    "tokens/s",
    "features",
    "domains",
    "NICs/GPU",
    "FLOP/s",
    "FLOP/token",
    "bytes/token",
    "bytes/value",
    "s/token",
    "TFLOP/s",
    "USD",
    "J",
}


def test_every_llm_table_is_declared():
    from paigrid.kernels import llm_columns as K

    assert set(K.TABLES) == set(LLM_DECLARED_PREFIX)
    assert {LLM_DECLARED_PREFIX[name] for name in K.TABLES} == set(LLM_TABLES)


@pytest.mark.parametrize("table", sorted(LLM_DECLARED_PREFIX))
def test_declared_llm_columns_are_the_constants(table):
    """Each declared LLM column is the module constant of its name, with a unit and a meaning,
    its width is the run the tiling test expects, and the declared widths add up to the
    table's count constant."""
    from paigrid.kernels import llm_columns as K

    declared = K.TABLES[table]
    prefix = LLM_DECLARED_PREFIX[table]
    count, runs = LLM_TABLES[prefix]
    assert declared.columns and declared.width == getattr(K, count)
    for column in declared.columns:
        constant = prefix + column.name.upper()
        assert getattr(K, constant) == column.index, column
        assert column.width == runs.get(constant, 1), column
        assert column.unit in LLM_UNITS and column.doc, column
    constants = {n for n, v in vars(K).items() if n.startswith(prefix) and n.isupper() and isinstance(v, int)}
    assert constants == {prefix + c.name.upper() for c in declared.columns}
