"""``paigrid llm sweep`` as an alias of ``paigrid sweep``: its flags translated into a sweep spec
of LLM-family jobs, swept by the one writer (``paigrid.orchestration.run_sweep``) into a format-5
cube whose group ``llm`` holds the results.

What each flag became (docs/commands.md says the same to users):

- ``--models`` -> the spec's ``workloads`` (LLM models of ``llm_models.csv``);
- ``--n-gpu``, ``--gpu``, ``--domain``, ``--network``, ``--nics-per-gpu``, ``--precision`` ->
  the ``[grid]`` keys of the same names (``--network fabrics``: every fabric of
  ``llm_fabrics.csv``);
- ``--max-tp`` -> ``[llm] max_tp``; ``--option KEY=VALUE`` -> ``[llm.options]``;
- no ``--full`` -> ``paigrid sweep --reduce-only`` (the per-design bests only, as before);
  ``--full`` -> the whole cube, refused first when its cells exceed ``--max-full-gb``;
- ``--seq-len`` is refused: a sequence length is a model's, so a models CSV in
  ``llm_models.csv``'s columns carries it (``paigrid sweep --workloads models.csv``).
"""

from __future__ import annotations

from pathlib import Path

from paigrid.errors import PaigridError

#: the models ``paigrid llm sweep`` sweeps when ``--models`` is not given
DEFAULT_MODELS = ("llama3-70b", "llama3-405b")
#: the largest full (not reduce-only) LLM sweep written without ``--max-full-gb`` raised [1e9 bytes]
FULL_LIMIT_GB = 1.0
#: where the alias says what ``--seq-len`` became (one sentence, before any work)
SEQ_LEN_GONE = (
    "paigrid llm sweep no longer takes --seq-len (the sweep is paigrid sweep's now, and a sequence "
    "length is a model's): write the model with that seq_len into a models CSV in llm_models.csv's "
    "columns and give it to paigrid sweep --workloads."
)
#: the unified sweep's hints, in the alias's own flags
HINTS = {"use --reduce-only to keep only the per-job bests": "drop --full to keep only the bests"}


def alias_spec(
    models: list[str],
    n_gpu: list[int] | None = None,
    gpus: list[str] | None = None,
    domains: list[int] | None = None,
    networks: list[str] | None = None,
    nics_per_gpu: float | None = None,
    precision: str | None = None,
    max_tp: int | None = None,
    options: dict[str, str] | None = None,
):
    """The ``SweepSpec`` of a ``paigrid llm sweep`` command line: ``models`` as the jobs, the
    design lists as ``[grid]`` keys (None: ``paigrid sweep``'s defaults for the LLM family),
    ``max_tp`` [GPUs] as ``[llm] max_tp`` and the LLM model's ``options`` (KEY -> VALUE text) as
    ``[llm.options]``."""
    from paigrid.inputs.spec import spec_from_dict

    if not models:
        raise PaigridError("an LLM sweep needs at least one model.")
    grid: dict = {}
    for key, value in (("n_gpu", n_gpu), ("gpu", gpus), ("domain", domains), ("network", networks)):
        if value is not None:
            grid[key] = list(value)
    if precision is not None:
        grid["precision"] = [precision]
    if nics_per_gpu is not None:
        grid["nics_per_gpu"] = float(nics_per_gpu)
    llm: dict = {}
    if max_tp is not None:
        llm["max_tp"] = int(max_tp)
    if options:
        llm["options"] = dict(options)
    return spec_from_dict({"workloads": list(models), "grid": grid, "llm": llm}, "paigrid llm sweep", Path.cwd())


def full_size(spec) -> dict:
    """What the full cube of an alias ``spec`` holds before it is swept: ``jobs``, ``layouts``
    (the layout axis), ``designs`` (gpu x domain x network x precision), ``n_gpu`` (GPU counts),
    ``cells`` (their product) and ``bytes`` (the group's uncompressed size, its bests included,
    ``store.llm_estimated_bytes``)."""
    import copy

    from paigrid.orchestration import prepare_families
    from paigrid.store import llm_estimated_bytes

    _, llm, _ = prepare_families(copy.deepcopy(spec))
    if llm is None:  # an alias spec names LLM models only
        raise PaigridError("an LLM sweep needs at least one LLM model.")
    designs = len(llm.gpu) * len(llm.domain) * len(llm.network) * len(llm.precision)
    return {
        "jobs": len(llm.jobs),
        "layouts": len(llm.layouts),
        "designs": designs,
        "n_gpu": len(llm.n_gpu),
        "cells": llm.cells,
        "bytes": llm_estimated_bytes(llm, False),
    }


def check_full_size(spec, max_full_GB: float, progress=None) -> dict:
    """State the size of a full alias sweep through ``progress`` and refuse one above
    ``max_full_GB`` [1e9 bytes] in one sentence; returns ``full_size``."""
    size = full_size(spec)
    if progress is not None:
        progress(
            f"full LLM sweep: {size['jobs']} models x {size['layouts']:,} layouts x {size['n_gpu']} GPU counts "
            f"x {size['designs']} designs = {size['cells']:,} cells, {size['bytes'] / 1e9:.3g} GB of results"
        )
    if size["bytes"] > max_full_GB * 1e9:
        raise PaigridError(
            f"a full LLM sweep of these flags writes {size['bytes'] / 1e9:.3g} GB, more than the "
            f"limit of {max_full_GB:g} GB; raise --max-full-gb to write it or drop --full."
        )
    return size


def in_alias_words(error: PaigridError) -> PaigridError:
    """The unified sweep's sentence with its flags named as the alias's (``HINTS``)."""
    text = str(error)
    for unified, alias in HINTS.items():
        text = text.replace(unified, alias)
    if text == str(error):
        return error
    out = PaigridError(text)
    out.__dict__.update(vars(error))  # exit_hard, interrupted
    return out


#: the kind attribute of the LLM files ``paigrid llm sweep`` wrote before it became an alias
LEGACY_KIND = "paigrid-llm-best"


def describe_llm_file(path) -> str | None:
    """``paigrid info``'s text for an LLM file of ``paigrid llm sweep`` of before the one cube
    (kind ``paigrid-llm-best``): its dimensions with their values, precision, NICs per GPU, the
    LLM options it was swept with, whether it holds every pair (``full``), its variables with
    their units, and which command reads it; None for any other file (``describe.describe`` says
    what it is)."""
    import h5py

    from paigrid.files import input_problem

    if input_problem(path):
        return None
    try:
        f = h5py.File(path, "r")
    except OSError:
        return None
    with f:
        kind = f.attrs.get("kind")
        if (kind.decode() if isinstance(kind, bytes) else kind) != LEGACY_KIND:
            return None

        def values(name):
            return [v.decode() if isinstance(v, bytes) else str(v) for v in f[name][()]] if name in f else []

        def attr(name):
            value = f.attrs.get(name, "")
            return value.decode() if isinstance(value, bytes) else str(value)

        dims = attr("dimensions").split(",")
        lines = [
            f"{path}: an LLM sweep file of paigrid llm sweep of before the one cube (kind {LEGACY_KIND}, "
            "no format version); paigrid llm query reads it, paigrid sweep (and paigrid llm sweep, its alias) "
            "write cubes now.",
            "  dimensions:",
        ]
        for dim in dims:
            shown = values(dim)
            listed = ", ".join(shown[:6]) + (", ..." if len(shown) > 6 else "")
            lines.append(f"    {dim:<12} {len(shown):>4}  {listed}")
        lines += [
            f"  precision: {attr('precision')}",
            f"  nics_per_gpu: {attr('nics_per_gpu')}",
            f"  full (every layout x design pair under full/): {attr('full') in ('True', '1')}",
            f"  options: {attr('options')}",
            "  variables:",
        ]
        for name, item in f.items():
            if isinstance(item, h5py.Dataset) and name not in dims:
                units = item.attrs.get("units", "")
                units = units.decode() if isinstance(units, bytes) else str(units)
                lines.append(f"    {name:<24} [{units}]  {item.shape}")
    return "\n".join(lines)
