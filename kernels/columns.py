"""Kernel table columns declared once: a ``Table`` hands out column indices in declaration order.

Each column of a table the kernels read is one call, ``J_FLOP = JOB.column("flop", "FLOP",
"...")``: its name, unit, width (a run of columns, one per operator class) and meaning are
recorded, and its index is the next free one, so a table's indices are unique and dense by
construction and its width (``N_JOB_FIELDS = JOB.width``) is the count of what was declared.
The indices stay plain module-level integers, which numba reads as compile-time constants.
Pure Python: no imports (the kernels import only numpy and numba).
"""


class Column:
    """One declared column: ``table``, ``name``, ``unit`` (SI, or ``code``/``flag``/``count``),
    ``index`` of its first field, ``width`` fields, ``doc``."""

    __slots__ = ("table", "name", "unit", "index", "width", "doc")

    def __init__(self, table: str, name: str, unit: str, index: int, width: int, doc: str):
        self.table = table
        self.name = name
        self.unit = unit
        self.index = index
        self.width = width
        self.doc = doc

    def __repr__(self) -> str:
        return f"Column({self.table}.{self.name} [{self.unit}] at {self.index}, width {self.width})"


class Table:
    """The columns of one kernel table, in index order."""

    def __init__(self, name: str):
        self.name = name
        self.columns: list[Column] = []

    @property
    def width(self) -> int:
        """Fields of one row: the sum of the declared columns' widths."""
        return sum(c.width for c in self.columns)

    def column(self, name: str, unit: str, doc: str, width: int = 1) -> int:
        """Declare the next column (``width`` fields, one per operator class for a run) and
        return the index of its first field."""
        if width < 1:
            raise ValueError(f"{self.name}.{name}: a column is at least one field wide")
        if any(c.name == name for c in self.columns):
            raise ValueError(f"{self.name}.{name} is declared twice")
        index = self.width
        self.columns.append(Column(self.name, name, unit, index, width, doc))
        return index

    def by_name(self, name: str) -> Column:
        """The declared column ``name``."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")
