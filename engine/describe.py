"""Text descriptions of a cube file (``paigrid info``) and of the catalogues (``paigrid catalogues``)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from paigrid.cube import open_cube
from paigrid.errors import PaigridError
from paigrid.inputs.catalog import BUILTIN, load
from paigrid.schema import DERIVED_VARIABLES, DIMS, LABEL_DIMS, str_attr


def describe(path: str | Path) -> str:
    """Dimensions with sizes, variables with units, provenance and completeness of a cube, of
    every job family it holds (the data-parallel root, the ``llm`` group)."""
    from paigrid.cube import families_of

    target = Path(path)
    if not target.exists() and Path(f"{path}.partial").exists():
        target = Path(f"{path}.partial")
    families = families_of(target)
    if families == ["dp"]:
        return _describe_dp(path)
    parts = [f"families: {', '.join(FAMILY_NAMES[f] for f in families)}"]
    if "dp" in families:
        parts.append(_describe_dp(path))
    if "llm" in families:
        parts.append(_describe_llm(target, with_provenance="dp" not in families))
    return "\n".join(parts)


#: the job families in words
FAMILY_NAMES = {"dp": "dp (data-parallel workloads, at the root)", "llm": "llm (transformers, group llm)"}


def _describe_llm(path: Path, with_provenance: bool) -> str:
    """The LLM group: its dimensions, variables with units, layout grammar and completeness."""
    import h5netcdf
    import h5py
    import hdf5plugin  # noqa: F401

    from paigrid.cube import LLM_LABEL_DIMS

    lines = ["llm family (group llm):"]
    with h5py.File(path, "r") as f:
        g = f["llm"]
        done, total = int(np.sum(g["block_done"][:])), len(g["block_done"])
        lines.append(f"  status: {'complete' if done == total else f'INCOMPLETE: {done} of {total} blocks written'}")
        lines.append(f"  layout grammar: {str_attr(g.attrs, 'layout_grammar')}")
        lines.append("  dimensions:")
        size = 1
        for dim in LLM_LABEL_DIMS:
            values = [v.decode() if isinstance(v, bytes) else v for v in g[dim][:]]
            size *= len(values)
            shown = ", ".join(map(str, values[:4])) + (", ..." if len(values) > 4 else "")
            lines.append(f"    {dim:<10} {len(values):>6}  {shown}")
        lines.append(f"  cells: {size:,}")
        lines.append(f"  space: {str_attr(g.attrs, 'space')}")
        if with_provenance:
            lines.append("provenance:")
            for key in (
                "paigrid_version",
                "format_version",
                "created",
                "compression",
                "mode",
                "input_sha256",
                "llm_catalogue_sha256",
                "spec",
            ):
                if key in f.attrs:
                    lines.append(f"  {key}: {str_attr(f.attrs, key)}")
        elif "llm_catalogue_sha256" in f.attrs:
            lines.append(f"  llm_catalogue_sha256: {str_attr(f.attrs, 'llm_catalogue_sha256')}")
    lines.append("  variables:")
    with h5netcdf.File(path, "r") as nc:
        for name, var in nc.groups["llm"].variables.items():
            if name not in LLM_LABEL_DIMS:
                lines.append(f"    {name:<26} [{var.attrs.get('units', '?')}]  ({', '.join(var.dimensions)})")
    return "\n".join(lines)


def _describe_dp(path: str | Path) -> str:
    """The data-parallel root of a cube (``describe`` before the families)."""
    cube = open_cube(path, allow_incomplete=True)
    f = cube.file
    try:
        done, total = int(np.sum(f["block_done"][:])), len(f["block_done"])
        status = (
            "complete"
            if cube.complete
            else (f"INCOMPLETE: {done} of {total} blocks written; finish with paigrid sweep --resume")
        )
        lines = [f"cube: {cube.path}", f"status: {status}", f"mode: {cube.mode}", "dimensions:"]
        size = 1
        for dim in ("job", *LABEL_DIMS):
            values = cube.labels[dim]
            size *= len(values)
            shown = ", ".join(map(str, values[:8])) + (", ..." if len(values) > 8 else "")
            lines.append(f"  {dim:<10} {len(values):>6}  {shown}")
        lines.append(f"configurations: {size:,}")
        lines.append("variables:")
        import h5netcdf

        with h5netcdf.File(cube.path, "r") as nc:
            for name, var in nc.variables.items():
                if name not in ("job", *LABEL_DIMS):
                    lines.append(f"  {name:<22} [{var.attrs.get('units', '?')}]  ({', '.join(var.dimensions)})")
            derived = [
                (name, spec)
                for name, spec in DERIVED_VARIABLES.items()
                if name not in nc.variables and spec[0] in nc.variables and "step_time" in nc.variables
            ]
        if derived:  # format 4: presented by open_dataset, not stored
            lines.append("derived (not stored; paigrid.open_dataset presents them):")
            for name, (factor, operation, _, units, _) in derived:
                formula = f"{factor} / step_time" if operation == "divide" else f"{factor} x step_time"
                lines.append(f"  {name:<22} [{units}]  ({', '.join(DIMS)}) = {formula}")
        lines.append("provenance:")
        for key in (
            "paigrid_version",
            "format_version",
            "model",
            "created",
            "compression",
            "efficiency_source",
            "catalogue_sha256",
            "input_sha256",
            "spec",
        ):
            if key in f.attrs:
                value = cube.format if key == "format_version" else str_attr(f.attrs, key)
                if key in ("catalogue_sha256", "input_sha256", "spec"):
                    value = json.dumps(json.loads(str_attr(f.attrs, key)))
                lines.append(f"  {key}: {value}")
            if key == "created":  # which device computed the cube; cubes before paigrid recorded it: not said
                lines.append(f"  device: {str_attr(f.attrs, 'device') if 'device' in f.attrs else 'not recorded'}")
        return "\n".join(lines)
    finally:
        cube.close()


# columns shown by ``paigrid catalogues NAME`` in the text table (all columns with --csv)
SHOWN = {
    "gpus": (
        "name",
        "generation",
        "fp32_TFLOP_per_s",
        "fp16_TFLOP_per_s",
        "fp8_TFLOP_per_s",
        "fp4_TFLOP_per_s",
        "hbm_GB_per_s",
        "memory_GB",
        "memory_GiB",
        "nvlink_gen",
        "pcie_gen",
        "gpus_per_server",
        "nvlink_domain_GPUs",
        "price_USD_per_gpu_hour",
        "aliases",
    ),
    "links": ("name", "scope", "kind", "nominal_GB_per_s", "efficiency", "latency_us", "fits_gpus"),
    "workloads": (
        "name",
        "suite",
        "params_M",
        "fwd_GFLOP_per_sample",
        "membound_MB_per_sample",
        "default_batch",
        "optimizer",
        "sample_unit",
    ),
    "optimizers": ("name", "state_bytes_per_param", "source"),
    "precisions": (
        "name",
        "peak_column",
        "activation_bytes",
        "weight_bytes_per_param",
        "comm_bytes_per_param",
        "generations",
    ),
}


def describe_catalogues(name: str | None, as_csv: bool = False) -> str:
    """A summary of every built-in catalogue, or one catalogue as a table (or CSV)."""
    from paigrid.inputs.catalog import builtin_text
    from paigrid.render import emit

    if name is None:
        lines = []
        for kind in BUILTIN:
            cat = load(kind)
            lines.append(
                f"{kind:<11} {len(cat.rows):>3} rows  sha256 {cat.sha256[:12]}  {', '.join(cat.names[:6])}"
                + (", ..." if len(cat.names) > 6 else "")
            )
        lines.append("show one with: paigrid catalogues NAME [--csv]")
        return "\n".join(lines) + "\n"
    if name not in BUILTIN:
        raise PaigridError(f"unknown catalogue {name!r}; known: {', '.join(BUILTIN)}.")
    if as_csv:
        return builtin_text(name)
    cat = load(name)
    buffer = io.StringIO()
    emit(cat.rows, [c for c in SHOWN[name] if c in cat.columns], "table", stream=buffer)
    return buffer.getvalue()
