"""Commands of LLM-scale training (``paigrid llm ...``): the model catalogue, the layout sweep,
the best layouts from a sweep file, and one layout's full breakdown."""

from __future__ import annotations

from pathlib import Path

import typer

from paigrid.cli.arguments import LLM_OPTION_HELP, guarded, output_format, parse_option_items
from paigrid.errors import PaigridError
from paigrid.llm.sweep import DEFAULT_MODELS, FULL_LIMIT_GB

app = typer.Typer(
    name="llm",
    no_args_is_help=True,
    help="LLM-scale training: tensor, pipeline, data, context and expert parallel layouts.",
)

OPTION_HELP = LLM_OPTION_HELP


#: the most GPUs an LLM sweep counts (layouts are enumerated over the divisors of the count)
MAX_GPUS = 1 << 20


def _ints(text: str | None, what: str, upper: int = MAX_GPUS) -> list[int] | None:
    """Comma-separated whole numbers from 1 to ``upper``, each once (one sentence otherwise)."""
    from paigrid.errors import quoted

    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise PaigridError(f"{what} takes whole numbers separated by commas, not {quoted(part)}.") from None
        if not 1 <= value <= upper:
            raise PaigridError(f"{what} values must be from 1 to {upper:,}, not {quoted(part)}.")
        if value in out:
            raise PaigridError(f"{what} names {value} twice.")
        out.append(value)
    if not out:
        raise PaigridError(f"{what} is empty.")
    return out


def _names(text: str | None, what: str = "the list") -> list[str] | None:
    """Comma-separated names, each once; an empty list is refused (it would silently mean the
    defaults)."""
    from paigrid.errors import quoted

    if text is None:
        return None
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise PaigridError(f"{what} is empty; leave it out for the defaults.")
    folded = [n.casefold() for n in names]
    for i, name in enumerate(folded):
        if name in folded[:i]:
            raise PaigridError(f"{what} names {quoted(names[i])} twice.")
    return names


def _emit(rows, columns, fmt, units=None):
    from paigrid.render import emit

    emit(rows, columns, fmt, units)


@app.command("models")
@guarded
def models(json_out: bool = typer.Option(False, "--json"), csv_out: bool = typer.Option(False, "--csv")):
    """The LLM model catalogue (datasets/llm_models.csv) with parameters and FLOPs per token."""
    from paigrid.llm import shapes as S
    from paigrid.llm.models import load_catalogue, model

    catalogue = load_catalogue()
    rows = []
    for name in catalogue.names:
        m = model(name, catalogue)
        rows.append(
            {
                "model": name,
                "layers": m.layers,
                "hidden": m.hidden,
                "heads": m.heads,
                "kv_heads": m.kv_heads,
                "experts": m.experts,
                "seq_len": m.seq_len,
                "params_B": S.parameters(m) / 1e9,
                "active_params_B": S.active_parameters(m) / 1e9,
                "model_GFLOP_per_token": S.model_flops_per_token(m) / 1e9,
                "full_recompute_GFLOP_per_token": S.hardware_flops_per_token(m, "full") / 1e9,
            }
        )
    _emit(rows, list(rows[0]), output_format(json_out, csv_out))


@app.command("sweep")
@guarded
def sweep(
    out: Path = typer.Option(
        ..., "--out", "-o", help="Cube file to write (the LLM results in its group llm; paigrid sweep's format)."
    ),
    models: str = typer.Option(
        ",".join(DEFAULT_MODELS), help="Models of datasets/llm_models.csv, comma-separated (paigrid sweep --workloads)."
    ),
    n_gpu: str | None = typer.Option(None, "--n-gpu", help="GPU counts, comma-separated; default 8,16,...,16384."),
    gpu: str | None = typer.Option(
        None, help="GPUs, comma-separated; default A100-SXM4-80GB,H100-SXM5-80GB,H200,B200."
    ),
    domain: str | None = typer.Option(
        None, help="NVLink domain sizes [GPUs], comma-separated; default: each GPU's (gpus.csv nvlink_domain_GPUs)."
    ),
    network: str | None = typer.Option(
        None,
        help="Networks, comma-separated: fabrics of datasets/llm_fabrics.csv "
        "(rail-optimised or top-of-rack, tiers, oversubscription, "
        "SHARP/NVLS; 'fabrics' = all of them) or network links of "
        "links.csv (one ideal non-blocking tier); default rdma-100g,"
        "ib-hdr-200g,ib-ndr-400g,ib-xdr-800g.",
    ),
    nics_per_gpu: float = typer.Option(1.0, "--nics-per-gpu", min=0.0, help="NICs per GPU (8 per HGX server: 1)."),
    precision: str = typer.Option("amp-bf16", help="Precision of every design."),
    seq_len: int | None = typer.Option(
        None, "--seq-len", min=1, help="Refused: give paigrid sweep a models CSV with the seq_len instead."
    ),
    max_tp: int = typer.Option(8, "--max-tp", min=1, help="Largest tensor degree tried (powers of two)."),
    option: list[str] | None = typer.Option(None, "--option", help=OPTION_HELP),
    full: bool = typer.Option(
        False,
        "--full",
        help="Store every layout x design cell too (paigrid sweep without --reduce-only); the size is stated first.",
    ),
    max_full_gb: float = typer.Option(
        FULL_LIMIT_GB,
        "--max-full-gb",
        min=0.0,
        help="Refuse a --full sweep whose results exceed this many GB (1e9 bytes).",
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted sweep of the same flags."),
    no_space_check: bool = typer.Option(
        False, "--no-space-check", help="Start even if the cube's estimated size exceeds the free disk space."
    ),
    workers: int | None = typer.Option(None, min=1, help="Start a local Dask cluster of this many worker processes."),
    scheduler: str | None = typer.Option(
        None, help="Dask scheduler to run blocks on: tcp://HOST:PORT, or a scheduler file (dask-mpi, dask scheduler)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
):
    """An alias of paigrid sweep for LLM models: every layout of each model at each GPU count
    on every design, into one cube (group llm); the per-design bests only (--reduce-only) unless
    --full, which also stores every cell after stating its size."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.llm.fabrics import resolve_network
    from paigrid.llm.sweep import alias_spec, check_full_size, in_alias_words
    from paigrid.orchestration import run_sweep

    if seq_len is not None:
        from paigrid.llm.sweep import SEQ_LEN_GONE

        raise PaigridError(SEQ_LEN_GONE)
    if scheduler and workers:
        raise PaigridError("choose one of --scheduler and --workers.")
    cats = Catalogues.load()
    gpus = _names(gpu, "--gpu")
    if gpus is not None and len({cats.gpus.resolve(g) for g in gpus}) < len(gpus):
        raise PaigridError("--gpu names one GPU twice (by two of its names).")
    names = _names(network, "--network")
    if names is not None:
        if any(n.casefold() == "fabrics" for n in names):
            from paigrid.llm.fabrics import load_fabrics

            names = [f for n in names for f in (load_fabrics().names if n.casefold() == "fabrics" else [n])]
        names = [resolve_network(n, cats) for n in names]
        if len(set(names)) < len(names):
            raise PaigridError("--network names one network twice.")
    spec = alias_spec(
        _names(models, "--models") or [],
        _ints(n_gpu, "--n-gpu"),
        gpus,
        _ints(domain, "--domain"),
        names,
        nics_per_gpu,
        precision,
        max_tp,
        parse_option_items(option),
    )

    def progress(text: str) -> None:
        if not quiet or text.startswith("full LLM sweep"):
            typer.echo(text, err=True)

    if full and not resume:
        check_full_size(spec, max_full_gb, progress)
    try:
        result = run_sweep(
            spec,
            out,
            reduce_only=not full,
            resume=resume,
            progress=not quiet,
            space_check=not no_space_check,
            workers=workers,
            scheduler=scheduler,
        )
    except PaigridError as exc:
        raise in_alias_words(exc) from None
    typer.echo(
        f"wrote {result.path}: {result.configs:,} layout x design cells in {result.blocks} blocks, "
        f"{result.seconds:.1f} s ({result.configs / max(result.seconds, 1e-9):.3g} configurations/s)",
        err=True,
    )


QUERY_COLUMNS = [
    "n_gpu",
    "gpu",
    "domain",
    "network",
    "layout",
    "mfu",
    "step_time",
    "tokens_per_s",
    "memory_per_gpu_GiB",
    "cost_per_hour",
]
TRAIN_COLUMNS = ["train_days", "train_cost", "train_energy_MWh"]
UNITS = {
    "step_time": "s",
    "tokens_per_s": "tokens/s",
    "memory_per_gpu_GiB": "GiB",
    "cost_per_hour": "USD/h",
    "train_days": "days",
    "train_cost": "USD",
    "train_energy_MWh": "MWh",
    "domain": "GPUs",
}


@app.command("query")
@guarded
def query(
    cube: Path = typer.Argument(..., metavar="LLM.h5", help="File written by paigrid llm sweep."),
    model: str = typer.Option(..., "--model", help="Model name in the file."),
    n_gpu: str | None = typer.Option(None, "--n-gpu", help="GPU counts, comma-separated (default: all)."),
    gpu: str | None = typer.Option(None, help="Only these GPUs, comma-separated."),
    network: str | None = typer.Option(None, help="Only these networks, comma-separated."),
    domain: str | None = typer.Option(None, help="Only these NVLink domain sizes, comma-separated."),
    by: str = typer.Option("time", help="Rank by time, cost or energy per step."),
    every_design: bool = typer.Option(
        False, "--every-design", help="One row per design instead of the best (--per design)."
    ),
    per: str = typer.Option(
        "n_gpu",
        "--per",
        help="One row per n_gpu (the best design), per network (the best "
        "GPU, domain and layout on each network: the summary per "
        "cluster size and network) or per design.",
    ),
    tokens: float | None = typer.Option(
        None, "--tokens", min=1.0, help="Token budget: add time, cost and energy to train it."
    ),
    json_out: bool = typer.Option(False, "--json"),
    csv_out: bool = typer.Option(False, "--csv"),
):
    """The best layout and interconnect per GPU count (or per GPU count and network with --per
    network): MFU, step time, tokens/s, memory per GPU, cost, and for --tokens the time, cost
    and energy to train that many tokens."""
    from paigrid.llm.query import query_best

    where = {}
    if gpu is not None:
        where["gpu"] = _names(gpu, "--gpu")
    if network is not None:
        where["network"] = _names(network, "--network")
    if domain is not None:
        where["domain"] = _ints(domain, "--domain")
    rows = query_best(cube, model, _ints(n_gpu, "--n-gpu"), where, by, "design" if every_design else per, tokens)
    _emit(rows, QUERY_COLUMNS + (TRAIN_COLUMNS if tokens else []), output_format(json_out, csv_out), UNITS)


@app.command("predict")
@guarded
def predict(
    model: str = typer.Option(..., "--model", help="Model of datasets/llm_models.csv."),
    gpu: str = typer.Option(..., help="GPU of datasets/gpus.csv."),
    n_gpu: int = typer.Option(..., "--n-gpu", min=1, help="GPUs in the job."),
    tp: int = typer.Option(1, "--tp", min=1, help="Tensor-parallel degree."),
    pp: int = typer.Option(1, "--pp", min=1, help="Pipeline-parallel degree."),
    cp: int = typer.Option(1, "--cp", min=1, help="Context-parallel degree."),
    ep: int = typer.Option(1, "--ep", min=1, help="Expert-parallel degree."),
    vpp: int = typer.Option(1, "--vpp", min=1, help="Virtual stages per pipeline rank (interleaved schedule > 1)."),
    micro_batch: int = typer.Option(1, "--micro-batch", min=1, help="Micro-batch [sequences]."),
    zero: int = typer.Option(1, "--zero", min=0, max=3, help="ZeRO stage (3 = FSDP)."),
    recompute: str = typer.Option("selective", help="none, selective or full."),
    sp: bool = typer.Option(True, "--sp/--no-sp", help="Sequence parallelism in the tensor group."),
    domain: int = typer.Option(8, "--domain", min=1, help="NVLink domain [GPUs]."),
    network: str = typer.Option(
        "ib-ndr-400g",
        help="Network between domains: a fabric of datasets/llm_fabrics.csv or a network link of links.csv.",
    ),
    nics_per_gpu: float = typer.Option(1.0, "--nics-per-gpu", min=0.0, help="NICs per GPU."),
    precision: str = typer.Option("amp-bf16", help="Precision."),
    global_batch: int | None = typer.Option(
        None, "--global-batch", min=1, help="Sequences per step (default: the model's)."
    ),
    seq_len: int | None = typer.Option(None, "--seq-len", min=1, help="Sequence length [tokens]."),
    tokens: float | None = typer.Option(None, "--tokens", min=1.0, help="Token budget to train."),
    option: list[str] | None = typer.Option(None, "--option", help=OPTION_HELP),
    json_out: bool = typer.Option(False, "--json"),
):
    """One layout's full breakdown: compute, bubble, each communication (exposed), memory per
    GPU, MFU, tokens/s, cost and energy; an invalid layout says why."""
    emit_llm_prediction(
        model,
        n_gpu,
        precision,
        dict(tp=tp, pp=pp, cp=cp, ep=ep, vpp=vpp, micro_batch=micro_batch, zero=zero, recompute=recompute, sp=sp),
        gpu,
        domain,
        network,
        nics_per_gpu,
        parse_option_items(option),
        global_batch,
        seq_len,
        tokens,
        json_out,
    )


def emit_llm_prediction(
    model: str,
    n_gpu: int,
    precision: str,
    layout: dict,
    gpu: str,
    domain: int | None,
    network: str,
    nics_per_gpu: float,
    items: dict,
    global_batch,
    seq_len,
    tokens,
    json_out: bool,
) -> None:
    """Print one LLM layout's breakdown (``predict.predict_llm``): JSON, or a table after a line
    naming the model, design and layout; an invalid layout is one sentence."""
    import json

    from paigrid.llm.evaluate import RESULTS
    from paigrid.predict import predict_llm

    result = predict_llm(
        model, gpu, n_gpu, layout, domain, network, precision, nics_per_gpu, items, global_batch, seq_len, tokens
    )
    design = result.pop("design")
    if not result["valid"]:  # with --json too: an invalid layout is bad input, as a data-parallel one is
        raise PaigridError(f"invalid layout {result['layout_text']} ({result['layout']}): {result['reason']}")
    if json_out:
        from paigrid.render import json_safe

        typer.echo(json.dumps(json_safe(result), indent=1))
        return
    typer.echo(
        f"{model} on {n_gpu} x {design.gpu} ({precision}, NVLink domain {design.domain}, {design.network}): "
        f"{result['layout']}"
    )
    if "searched" in result:
        c = result["searched"]
        typer.echo(
            f"the fastest of {c['layouts']:,} layouts searched in {c['seconds']:.3f} s: {c['pruned_memory']:,} pruned "
            f"by memory, {c['pruned_bound']:,} by the bound, {c['evaluated']:,} evaluated"
        )
    rows = [{"quantity": name, "value": result[name], "unit": unit} for name, (_, unit) in RESULTS.items()]
    rows += [
        {"quantity": k, "value": result[k], "unit": u}
        for k, u in (("train_days", "days"), ("train_cost", "USD"), ("train_energy_MWh", "MWh"))
        if k in result
    ]
    _emit(rows, ["quantity", "value", "unit"], "table")
