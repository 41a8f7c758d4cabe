"""The Python API on xarray: ``open_dataset`` opens a cube lazily as an ``xarray.Dataset``, and
the ``Dataset.paigrid`` accessor answers the questions of ``paigrid query`` from it.

    import paigrid
    ds = paigrid.open_dataset("cube.h5")
    ds.paigrid.best(by="time", gpu="V100", n_gpu=16)     # one entry per job
    ds.paigrid.pareto("resnet50")                         # that job's time/cost front
    ds.paigrid.breakdown(job="resnet50", gpu="V100", n_gpu=16, precision="fp32")

    llm = paigrid.open_dataset("cube.h5", group="llm")    # the LLM family of the same cube
    llm.paigrid.best(gpu="H100", n_gpu=64)                # the best layout of each LLM job

The accessor is registered when this module is imported (``paigrid.open_dataset`` and
``paigrid.sweep`` import it; ``import paigrid.xarray_api`` does it for a Dataset opened otherwise).
Its answers come from the same code as the command line's (``paigrid.query``), over the
Dataset's variables instead of the file, so the two agree exactly.

This module only reads cubes: it never imports the writer (``paigrid.store``) or the driver
(``paigrid.evaluate``), and opening a cube loads no numba.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from paigrid.cube import cube_from_dataset, damage, open_cube, reading
from paigrid.errors import PaigridError
from paigrid.query import QUERY_UNITS, best_configurations, job_indices, label_indices
from paigrid.schema import (
    CRITERIA,
    DERIVED_VARIABLES,
    DIMS,
    LABEL_DIMS,
    REDUCED_DIMS,
    derived_values,
    factor_for_cube,
)

#: the attributes of ``valid`` as format 1 stores it; later formats present it with the same
VALID_ATTRS = {
    "units": "1",
    "long_name": "1 where the configuration can exist",
    "flag_values": np.array([0, 1], dtype=np.uint8),
    "flag_meanings": "invalid valid",
}

#: the variables of a ``best`` or ``pareto`` answer: name -> (units, long name); strings are
#: "" and n_gpu is 0 where a job has no feasible configuration (numbers are then NaN)
RESULT_VARIABLES = {
    "model": ("1", "workload catalogue name"),
    "arch": ("1", "training architecture"),
    "gpu": ("1", "GPU"),
    "n_gpu": ("1", "GPUs in the job (0: no feasible configuration)"),
    "intra": ("1", "intra-server link"),
    "network": ("1", "network between servers"),
    "precision": ("1", "numeric precision"),
    "step_time": (QUERY_UNITS["step_time"], "time of one optimizer step of one replica"),
    "throughput": (QUERY_UNITS["throughput"], "samples per second of the whole job"),
    "throughput_tokens": (QUERY_UNITS["throughput_tokens"], "tokens (or frames) per second of the whole job"),
    "cost": (QUERY_UNITS["cost"], "GPU rental cost per million samples"),
    "bottleneck": ("1", "largest time component"),
    "speedup": (QUERY_UNITS["speedup"], "throughput / the job's current throughput (NaN: no current configuration)"),
}
_STRINGS = ("model", "arch", "gpu", "intra", "network", "precision", "bottleneck")

#: the variables of a ``breakdown`` answer
BREAKDOWN_VARIABLES = ("t_data", "t_flop", "t_mem", "t_comm", "step_time", "bottleneck")


def open_dataset(path: str | Path, chunks=None, group: str | None = None) -> xr.Dataset:
    """Open the cube file ``path`` as a lazy ``xarray.Dataset`` (values are read from the file
    when indexed or computed; no dask needed).

    The compression filters are registered first (hdf5plugin).  Every cube format is presented
    with the same variables: where the file stores ``invalid_reason`` (format 2: a reason code,
    0 = valid) instead of ``valid``, ``valid`` [1, flag 0/1] is derived from it, lazily, as
    ``invalid_reason == 0``; where it stores the factors of throughput, cost and energy instead
    of the variables (format 4), they are derived from step_time, lazily too (``present``).

    Parameters
    ----------
    path : str or Path
        A finished cube, written by ``paigrid sweep`` or ``paigrid.sweep``.
    chunks : dict, optional
        Dask chunks, passed to ``xarray.open_dataset`` (None: no dask, values read on indexing).
    group : str, optional
        None opens the data-parallel family (the root); ``"llm"`` the LLM family (the group
        ``llm`` of a format-5 cube: cells over (job, layout, gpu, n_gpu, domain, network,
        precision), the layout degrees as coordinates over ``layout``, the per-job bests
        ``best_*``), whose ``ds.paigrid`` accessor answers for LLM jobs.

    Returns
    -------
    xarray.Dataset
        The cube, lazily; units are in each variable's ``units`` attribute (step_time [s],
        throughput [samples/s], cost [USD/1e6 samples], ...).  The ``ds.paigrid`` accessor
        answers the queries of ``paigrid query`` from it.

    Raises
    ------
    PaigridError
        When ``path`` is no finished paigrid cube (with the sentences of
        ``paigrid.cube.open_cube``), or xarray cannot open it.
    """
    import hdf5plugin  # noqa: F401  (registers the blosc filters the cube may use)

    if group is not None:
        return _open_llm_dataset(path, chunks, group)
    open_cube(path).close()  # the checks and their sentences: exists, finished, a paigrid cube
    try:
        ds = xr.open_dataset(path, engine="h5netcdf", chunks=chunks)
    except (OSError, ValueError, RuntimeError, KeyError, AttributeError) as exc:
        # AttributeError: h5netcdf 1.4 meets a damaged object header as a variable that is None
        raise damage(path, exc) from None
    return present(_guarded(ds, path))


def _guarded(ds: xr.Dataset, path) -> xr.Dataset:
    """``ds`` (lazy, from the file ``path``) with every array variable read through ``_Guarded``,
    so a damaged chunk met by ``ds.step_time.values`` is the CLI's sentence (a PaigridError
    naming the chunk), not h5py's OSError.  A dask-backed Dataset is left as it is."""
    for name, var in list(ds.variables.items()):
        if var.ndim == 0 or name in ds.indexes or var.chunks is not None:
            continue
        data = indexing.LazilyIndexedArray(_Guarded(var, path))
        ds[name] = xr.Variable(var.dims, data, attrs=dict(var.attrs), encoding=dict(var.encoding))
    return ds


class _Guarded(BackendArray):
    """A variable of the cube file, read for the indexed part only, a failed read turned into
    ``paigrid.cube.damage``'s sentence."""

    def __init__(self, var: xr.Variable, path):
        self.var, self.path = var, path
        self.shape, self.dtype = var.shape, var.dtype

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)

    def _read(self, key: tuple) -> np.ndarray:
        try:
            return np.asarray(self.var[key].values)
        except (OSError, RuntimeError, KeyError) as exc:
            raise damage(self.path, exc) from None


def _open_llm_dataset(path, chunks, group: str) -> xr.Dataset:
    """The LLM group of a cube as a lazy Dataset (``open_dataset(path, group="llm")``)."""
    from paigrid.cube import open_llm

    if group != "llm":
        raise PaigridError(f"a cube's groups are the root (group=None) and 'llm', not {group!r}.")
    open_llm(path).close()  # the checks and their sentences
    try:
        ds = xr.open_dataset(path, engine="h5netcdf", group="llm", chunks=chunks)
        with xr.open_dataset(path, engine="h5netcdf") as root:
            ds.attrs["mode"] = root.attrs.get("mode", "full")
    except (OSError, ValueError, RuntimeError, KeyError, AttributeError) as exc:
        raise damage(path, exc) from None
    # a damaged chunk of the group read through ds (or a variable derived from it): the CLI's sentence
    return present_llm(_guarded(ds, path))


#: the LLM group's variables derived per sample (one sample is one sequence) from its per-step
#: results and ``global_batch`` [sequences/step]: name -> (per-step variable, operation, units,
#: long name); throughput = global_batch / step_time, the others = per-step value / global_batch
LLM_DERIVED = {
    "throughput": ("step_time", "batch_over", "samples/s", "sequences per second of the whole job"),
    "cost": ("cost_per_step", "over_batch_1e6", "USD/1e6 samples", "GPU rental cost per million sequences"),
    "energy": ("energy_per_step", "over_batch", "J/sample", "GPU energy per sequence at board power"),
}


def present_llm(ds: xr.Dataset) -> xr.Dataset:
    """Give an LLM group Dataset (changed in place and returned) the variables of the root's
    presentation, computed lazily from the indexed part only: ``valid`` [1] = ``invalid_reason
    == 0`` and ``LLM_DERIVED``'s throughput [samples/s], cost [USD/1e6 samples] and energy
    [J/sample] (float64, NaN where the per-step value is), each with a ``derived_from``
    attribute.  A reduce-only group (bests only) has no cells to derive from."""
    if "valid" not in ds.variables and "invalid_reason" in ds.variables:
        reason = ds["invalid_reason"]
        data = (
            (reason.data == 0).astype(np.uint8)
            if reason.chunks is not None
            else indexing.LazilyIndexedArray(_ValidFromReason(reason.variable))
        )
        ds["valid"] = xr.Variable(reason.dims, data, attrs=dict(VALID_ATTRS))
    for name, (source, operation, units, long_name) in LLM_DERIVED.items():
        if name in ds.variables or source not in ds.variables or "global_batch" not in ds.variables:
            continue
        cells, batch = ds[source], ds["global_batch"]
        derived_from = f"global_batch / {source}" if operation == "batch_over" else f"{source} / global_batch"
        attrs = {"units": units, "long_name": long_name, "derived_from": derived_from}
        if cells.chunks is not None:  # dask: the same arithmetic, broadcast by xarray
            data = _per_job(operation, cells.astype(np.float64), batch).transpose(*cells.dims).data
        else:
            data = indexing.LazilyIndexedArray(_PerJob(operation, cells.variable, batch.variable))
        ds[name] = xr.Variable(cells.dims, data, attrs=attrs)
    return ds


def _per_job(operation: str, cells, batch):
    """``LLM_DERIVED``'s arithmetic of per-step ``cells`` and the jobs' ``batch`` [sequences]."""
    if operation == "batch_over":
        return batch / cells
    if operation == "over_batch_1e6":
        return cells / batch * 1e6
    return cells / batch


class _PerJob(BackendArray):
    """An ``LLM_DERIVED`` variable over the cells' dimensions (job first), read and computed for
    the indexed part only: the indexed cells and the batch of the indexed jobs."""

    def __init__(self, operation: str, cells: xr.Variable, batch: xr.Variable):
        self.operation, self.cells, self.batch = operation, cells, batch
        self.shape = cells.shape
        self.dtype = np.dtype(np.float64)

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)

    def _read(self, key: tuple) -> np.ndarray:
        cells = np.asarray(self.cells[key].values, dtype=np.float64)
        batch = np.asarray(self.batch[key[0]].values, dtype=np.float64)
        if batch.ndim:  # the job axis kept: broadcast over the cells' other axes
            batch = batch.reshape(batch.shape + (1,) * (cells.ndim - 1))
        return _per_job(self.operation, cells, batch)


class PaigridBackend(BackendEntrypoint):
    """``xarray.open_dataset(path, engine="paigrid")``: a cube as ``paigrid.open_dataset``
    presents it (lazily; the root's data-parallel family, or ``group="llm"``), with the derived
    variables (throughput [samples/s], cost [USD/1e6 samples], energy [J/sample]) and ``valid``
    of every cube format, and the checks and sentences of ``paigrid.cube.open_cube``.  Registered
    in pyproject.toml's ``[project.entry-points."xarray.backends"]``; it claims no file unless
    named (a cube is an HDF5 file that h5netcdf opens too)."""

    description = "paigrid cubes with derived throughput, cost, energy and validity (group='llm' for LLM jobs)"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group")

    def open_dataset(self, filename_or_obj, *, drop_variables=None, group=None) -> xr.Dataset:
        """The cube at ``filename_or_obj`` (a path) as ``paigrid.open_dataset(path, group=group)``
        gives it, less ``drop_variables``."""
        if not isinstance(filename_or_obj, (str, Path)):
            raise PaigridError("the paigrid engine opens a cube by its path, not an open file or a buffer.")
        ds = open_dataset(filename_or_obj, group=group)
        return ds.drop_vars(list(drop_variables), errors="ignore") if drop_variables else ds

    def guess_can_open(self, filename_or_obj) -> bool:
        """False: a cube is opened with this engine only when it is named."""
        return False


def present(ds: xr.Dataset) -> xr.Dataset:
    """Give ``ds`` (a cube Dataset, changed in place and returned) the variables of every
    format, computed lazily from the indexed part only: ``valid`` [1] = ``invalid_reason == 0``
    as uint8 where the file stores the reason code instead (format 2 on), and ``throughput``
    [samples/s], ``cost`` [USD/1e6 samples] and ``energy`` [J/sample] from ``step_time`` and
    their stored factors where the file stores those instead (format 4 on;
    ``schema.derived_values``: float64 arithmetic rounded to float32, NaN where step_time is),
    with the attributes formats 1 to 3 stored them with and a ``derived_from`` attribute."""
    if "valid" not in ds.variables and "invalid_reason" in ds.variables:
        reason = ds["invalid_reason"]
        if reason.chunks is not None:  # dask
            data = (reason.data == 0).astype(np.uint8)
        else:
            data = indexing.LazilyIndexedArray(_ValidFromReason(reason.variable))
        ds["valid"] = xr.Variable(reason.dims, data, attrs=dict(VALID_ATTRS))
    for name, (factor, operation, dtype, units, long_name) in DERIVED_VARIABLES.items():
        if name in ds.variables or factor not in ds.variables or "step_time" not in ds.variables:
            continue
        step = ds["step_time"]
        attrs = {
            "units": units,
            "long_name": long_name,
            "derived_from": f"{factor} / step_time" if operation == "divide" else f"{factor} * step_time",
        }
        if step.chunks is not None:  # dask: the same arithmetic, broadcast by xarray
            values = (
                ds[factor] / step.astype(np.float64) if operation == "divide" else ds[factor] * step.astype(np.float64)
            )
            data = values.transpose(*step.dims).astype(dtype).data
        else:
            data = indexing.LazilyIndexedArray(_Derived(name, step.variable, ds[factor].variable))
        ds[name] = xr.Variable(step.dims, data, attrs=attrs)
    return ds


class _ValidFromReason(BackendArray):
    """``invalid_reason == 0`` as uint8, read and computed for the indexed part only."""

    def __init__(self, reason: xr.Variable):
        self.reason = reason
        self.shape = reason.shape
        self.dtype = np.dtype(np.uint8)

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)

    def _read(self, key: tuple) -> np.ndarray:
        return (np.asarray(self.reason[key].values) == 0).astype(np.uint8)


class _Derived(BackendArray):
    """A derived variable (``schema.DERIVED_VARIABLES``) over step_time's dimensions, read and
    computed for the indexed part only: the indexed step times and the factor at the same
    coordinates of its own dimensions."""

    def __init__(self, name: str, step: xr.Variable, factor: xr.Variable):
        self.name, self.step, self.factor = name, step, factor
        self.shape = step.shape
        self.dtype = np.dtype(DERIVED_VARIABLES[name][2])

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)

    def _read(self, key: tuple) -> np.ndarray:
        dims = self.step.dims
        step = np.asarray(self.step[key].values)
        by_dim = dict(zip(dims, key))
        factor = np.asarray(self.factor[tuple(by_dim[d] for d in self.factor.dims)].values)
        kept = tuple(d for d, k in zip(dims, key) if not isinstance(k, (int, np.integer)))
        name = DERIVED_VARIABLES[self.name][0]
        return derived_values(self.name, step, factor_for_cube(name, factor, kept))


def validity(ds: xr.Dataset) -> xr.DataArray:
    """True where a configuration can exist: ``valid == 1``, or ``invalid_reason == 0`` in a
    format-2 Dataset opened without ``open_dataset``."""
    if "valid" in ds.variables:
        return ds["valid"] == 1
    if "invalid_reason" in ds.variables:
        return ds["invalid_reason"] == 0
    raise PaigridError("the dataset has neither valid nor invalid_reason: it holds only the per-job reductions.")


@xr.register_dataset_accessor("paigrid")
class PaigridAccessor:
    """``ds.paigrid``: the answers of ``paigrid query`` on a cube Dataset, as Datasets."""

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    @property
    def family(self) -> str:
        """The job family of the Dataset: ``llm`` for the group llm, else ``dp``."""
        return "llm" if self._ds.attrs.get("family") == "llm" else "dp"

    def best(self, by: str = "time", **fixed) -> xr.Dataset:
        """The best configuration of each job (dimension ``job``), as ``paigrid query --best-arch``.

        Parameters
        ----------
        by : str
            "time" (smallest time per sample, i.e. the largest throughput of the whole job) or
            "cost" (smallest cost per sample).
        **fixed
            Label filters, each one value or a list: ``gpu="V100"`` (aliases resolve),
            ``n_gpu=[8, 16]``, ``network="eth-25g"``, ``job=["resnet50"]``.

        Returns
        -------
        xarray.Dataset
            Over ``job``: model, arch, gpu, n_gpu, intra, network, precision, step_time [s],
            throughput [samples/s], throughput_tokens [tokens/s], cost [USD/1e6 samples],
            bottleneck, speedup [x]; a job with no feasible configuration under the filters has
            "" labels, n_gpu 0 and NaN numbers.

        Raises
        ------
        PaigridError
            For an unknown criterion or label, or a Dataset that is no whole finished cube.
        """
        if self.family == "llm":
            return _llm_answer(self._ds, by, fixed, "best()")
        if by not in CRITERIA:
            raise PaigridError(f"best() ranks by {' or '.join(map(repr, CRITERIA))}, not {by!r}.")
        cube = cube_from_dataset(self._ds)
        _check_whole(self._ds, "best()")
        where, jobs = _filters(cube, fixed, "best()")
        with reading(cube.path):
            rows = best_configurations(cube, by, where, jobs)
        out = _result(rows, "job", [r["job"] for r in rows])
        out.attrs.update(criterion=by, filters=_describe(cube, where, jobs))
        return out

    def pareto(self, job: str, **fixed) -> xr.Dataset:
        """The Pareto front of time per sample and cost per sample of ``job``, as ``paigrid query
        --pareto``: no point is both slower and dearer than another.

        Parameters
        ----------
        job : str
            One job (workload) name of the cube.
        **fixed
            Label filters, as in ``best`` (but not ``job``).

        Returns
        -------
        xarray.Dataset
            Over ``point``, fastest first (so cheapest last), with the variables of ``best`` and
            a scalar ``job`` coordinate; empty when no configuration is feasible.

        Raises
        ------
        PaigridError
            For a job that is not one name, an unknown label, or a Dataset that is no whole
            finished cube.
        """
        if not isinstance(job, str):
            raise PaigridError(f"pareto() takes one job name, not {job!r}.")
        if self.family == "llm":
            return _llm_answer(self._ds, "time", {**fixed, "job": job}, "pareto()", pareto=True)
        cube = cube_from_dataset(self._ds)
        _check_whole(self._ds, "pareto()")
        where, _ = _filters(cube, fixed, "pareto()", allow_job=False)
        with reading(cube.path):
            rows = [r for r in best_configurations(cube, "time", where, [job], pareto=True) if r["arch"] is not None]
        out = _result(rows, "point", None)
        out = out.assign_coords(job=xr.Variable((), job, attrs={"units": "1"}))
        out.attrs.update(filters=_describe(cube, where, None))
        return out

    def breakdown(self, **labels) -> xr.Dataset:
        """The time components of the selected configurations.

        Parameters
        ----------
        **labels
            Select as ``Dataset.sel`` does (one value drops the dimension, a list keeps it, in
            the cube's order), with the same names as ``best``'s filters (aliases resolve):
            ``breakdown(job="resnet50", gpu="V100", n_gpu=16, precision="fp32")``.

        Returns
        -------
        xarray.Dataset
            t_data, t_flop, t_mem, t_comm, step_time [s] and bottleneck (flag), loaded, over the
            dimensions left unselected.  t_data, t_flop and t_mem depend on (job, gpu, precision)
            only and are broadcast over the rest; every component is NaN where the configuration
            cannot exist, like step_time.

        Raises
        ------
        PaigridError
            For an unknown label or dimension, or a reduce-only cube (no per-configuration values).
        """
        if self.family == "llm":
            return _llm_breakdown(self._ds, labels)
        cube = cube_from_dataset(self._ds)
        if "step_time" not in self._ds.variables:
            raise PaigridError(
                f"{cube.path} holds only the per-job reductions (reduce-only sweep): "
                "it has no per-configuration breakdown."
            )
        indexers = {}
        for dim, values in labels.items():
            one = isinstance(values, (str, bytes)) or not hasattr(values, "__iter__")
            if dim == "job":
                idx = [int(i) for i in job_indices(cube, [values] if one else list(values))]
            elif dim in LABEL_DIMS:
                idx = label_indices(cube, dim, values)
            else:
                raise PaigridError(f"breakdown() selects by {', '.join(DIMS)}, not {dim!r}.")
            indexers[dim] = idx[0] if one else idx
        sub = self._ds.isel(indexers)
        with reading(cube.path):
            ok = validity(sub).load()
        dims = sub["step_time"].dims
        out = {}
        for name in BREAKDOWN_VARIABLES:
            var = sub[name]
            if name != "bottleneck":
                var = xr.broadcast(var, sub["step_time"])[0].transpose(*dims).where(ok)
            with reading(cube.path):
                out[name] = var.load()
            out[name].attrs = dict(sub[name].attrs)
        return xr.Dataset(out)


def _check_whole(ds: xr.Dataset, what: str) -> None:
    """Refuse a Dataset cut along arch, intra or network: the stored reductions index every
    value of those dimensions, so their answers would be wrong.  (A cut is seen where a variable
    read from the file is smaller than it is stored; cuts along job, gpu, n_gpu and precision
    are fine, since the reductions are cut with them.)"""
    for var in ds.data_vars.values():
        stored = var.encoding.get("original_shape")
        if stored is None or len(stored) != var.ndim:
            continue
        for dim, size, full in zip(var.dims, var.shape, stored):
            if dim in REDUCED_DIMS and size != full:
                raise PaigridError(
                    f"{what} answers from reductions over every {dim} of the cube, and this dataset "
                    f"keeps {size} of its {full}; call it on the whole dataset with {dim}=... as a "
                    "filter instead."
                )


def _filters(cube, fixed: dict, what: str, allow_job: bool = True) -> tuple[dict[str, list[int]], list[str] | None]:
    """Label filters (name -> value or list of values) as query filters: coordinate indices
    per label dimension, and the job names (None: every job)."""
    where, jobs = {}, None
    for dim, values in fixed.items():
        if dim == "job" and allow_job:
            jobs = [values] if isinstance(values, str) else [str(v) for v in values]
            job_indices(cube, jobs)  # an unknown job is an error here, with close matches
        elif dim in LABEL_DIMS:
            where[dim] = label_indices(cube, dim, values)
        else:
            known = DIMS if allow_job else LABEL_DIMS
            raise PaigridError(f"{what} filters by {', '.join(known)}, not {dim!r}.")
    return where, jobs


def _describe(cube, where: dict[str, list[int]], jobs: list[str] | None) -> str:
    """The filters as text, for the attributes of an answer ("" for none)."""
    parts = [f"job={','.join(jobs)}"] if jobs else []
    parts += [f"{dim}={','.join(str(cube.labels[dim][i]) for i in idx)}" for dim, idx in where.items()]
    return "; ".join(parts)


def _result(rows: list[dict], dim: str, coordinate: list | None) -> xr.Dataset:
    """Result rows of ``paigrid.query.best_configurations`` as a Dataset along ``dim``."""
    data = {}
    for name, (units, long_name) in RESULT_VARIABLES.items():
        values = [r[name] for r in rows]
        if name in _STRINGS:
            array = np.array(["" if v is None else str(v) for v in values], dtype=object)
        elif name == "n_gpu":
            array = np.array([0 if v is None else int(v) for v in values], dtype=np.int64)
        else:
            array = np.array(values, dtype=np.float64)
        data[name] = xr.Variable((dim,), array, attrs={"units": units, "long_name": long_name})
    coords = (
        {}
        if coordinate is None
        else {dim: xr.Variable((dim,), np.array(coordinate, dtype=object), attrs={"units": "1"})}
    )
    return xr.Dataset(data, coords=coords)


#: the variables of an LLM ``best`` or ``pareto`` answer (``llm.query.FAMILY_COLUMNS`` less job)
LLM_RESULT_STRINGS = ("family", "arch", "gpu", "intra", "network", "precision", "bottleneck")


def _llm_answer(ds: xr.Dataset, by: str, fixed: dict, what: str, pareto: bool = False) -> xr.Dataset:
    """``best`` (dimension ``job``) or ``pareto`` (dimension ``point``) of an LLM Dataset, by the
    array core of ``paigrid query`` (``llm.query.llm_best``) over the Dataset's variables."""
    from paigrid.llm.query import (
        ALL_LLM_WHERE,
        FAMILY_COLUMNS,
        FAMILY_UNITS,
        GroupSource,
        llm_best,
        llm_labels,
        llm_where,
    )

    source = GroupSource(ds)
    labels = llm_labels(source)
    where, jobs = {}, None
    for dim, values in fixed.items():
        many = [values] if isinstance(values, (str, bytes, int, np.integer)) else list(values)
        if dim == "job":
            missing = [j for j in many if j not in labels["job"]]
            if missing:
                raise PaigridError(f"job {missing[0]!r} is not in the dataset; it has {', '.join(labels['job'])}.")
            jobs = [str(j) for j in many]
        elif dim in ALL_LLM_WHERE:
            key = "layout" if dim not in ("gpu", "n_gpu", "domain", "network", "precision", "layout") else dim
            hits = set(llm_where(source, labels, dim, many))
            where[key] = sorted(hits & set(where[key]) if key in where else hits)
        else:
            raise PaigridError(f"{what} filters an LLM dataset by job, {', '.join(ALL_LLM_WHERE)}, not {dim!r}.")
    rows = llm_best(source, by, where, jobs, pareto=pareto, mode=str(ds.attrs.get("mode", "full")))
    if pareto:
        rows = [r for r in rows if r["arch"] is not None]
    dim = "point" if pareto else "job"
    data = {}
    for name in FAMILY_COLUMNS[1:]:
        values = [r.get(name) for r in rows]
        if name in LLM_RESULT_STRINGS:
            array = np.array(["" if v is None else str(v) for v in values], dtype=object)
        elif name in ("n_gpu", "domain"):
            array = np.array([0 if v is None else int(v) for v in values], dtype=np.int64)
        else:
            array = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        data[name] = xr.Variable((dim,), array, attrs={"units": FAMILY_UNITS.get(name, "1")})
    coords = (
        {dim: xr.Variable((dim,), np.array([r["job"] for r in rows], dtype=object), attrs={"units": "1"})}
        if not pareto
        else {"job": xr.Variable((), jobs[0], attrs={"units": "1"})}
    )
    out = xr.Dataset(data, coords=coords)
    out.attrs.update(criterion=by, family="llm")
    return out


def _llm_breakdown(ds: xr.Dataset, labels: dict) -> xr.Dataset:
    """Every stored result field of the selected LLM cells (``Dataset.sel`` by label; ``layout``
    a label without dp, or a label with its dp, which also selects its n_gpu)."""
    from paigrid.llm.evaluate import RESULTS
    from paigrid.llm.parallelism import layout_label, parse_label

    if "step_time" not in ds.variables:
        raise PaigridError(
            "the dataset holds only the per-job bests of its LLM jobs (reduce-only sweep): it has no "
            "per-layout breakdown."
        )
    selection = dict(labels)
    if "layout" in selection and isinstance(selection["layout"], str) and "-dp" in selection["layout"]:
        lay = parse_label(selection["layout"])
        selection["layout"] = layout_label(lay, with_dp=False)
        selection.setdefault("n_gpu", lay.n_gpu)
    if "gpu" in selection:
        from paigrid.inputs.catalog import load

        gpus = [str(g) for g in ds["gpu"].values]
        wanted = selection["gpu"]
        if isinstance(wanted, str) and wanted not in gpus:
            selection["gpu"] = load("gpus").resolve(wanted)
    unknown = sorted(set(selection) - set(ds.dims))
    if unknown:
        raise PaigridError(
            f"breakdown() selects an LLM dataset by {', '.join(d for d in ds['step_time'].dims)}, not {unknown[0]!r}."
        )
    try:
        sub = ds.sel(selection)
    except KeyError as exc:
        raise PaigridError(f"breakdown(): {exc.args[0] if exc.args else exc} is not in the dataset.") from None
    names = [name for name in RESULTS if name in sub.variables] + ["invalid_reason"]
    return xr.Dataset({name: sub[name].load() for name in names})
