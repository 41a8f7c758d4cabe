"""The kernel tables' column indices (``kernels/layout.py``) are unique and dense, and a bad table
value is reported by its catalogue column, not by an index."""

import dataclasses

import pytest

from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.tables import gpu_tables
from paigrid.kernels import layout as L

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
    assert fields, f"no {prefix} columns in kernels/layout.py"
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
