"""Read an LLM sweep file (h5py, read-only): the best layouts, and time, cost and energy to
train a stated number of tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paigrid.errors import PaigridError

DIMS = ("model", "n_gpu", "gpu", "domain", "network")
LAYOUT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "zero", "recompute", "sp")
VALUE_FIELDS = ("step_time", "tokens_per_s", "mfu", "model_tflops_per_gpu", "memory_per_gpu", "cost_per_step",
                "energy_per_step", "bubble", "tp_comm", "dp_comm_exposed")
RECOMPUTE = ("none", "selective", "full")
PER = ("n_gpu", "network", "design")
BY = {"time": "step_time", "cost": "cost_per_step", "energy": "energy_per_step"}


def _open(path: str | Path):
    import h5py

    from paigrid.userfiles import input_problem, os_reason

    problem = input_problem(path)
    if problem:
        raise PaigridError(f"cannot read {path}: {problem}.")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        reason = "not an HDF5 file" if "signature" in str(exc) else os_reason(exc)
        raise PaigridError(f"cannot read {path}: {reason}.") from None
    if f.attrs.get("kind") != "paigrid-llm-best":
        f.close()
        raise PaigridError(f"{path} is not an LLM sweep file (paigrid llm sweep writes them).")
    return f


def _labels(f, dim: str) -> list:
    values = f[dim][()]
    return [v.decode() if isinstance(v, bytes) else (int(v) if dim in ("n_gpu", "domain") else v) for v in values]


def query_best(path: str | Path, model: str, n_gpu: list[int] | None = None, where: dict[str, list] | None = None,
               by: str = "time", per: str = "n_gpu", tokens: float | None = None) -> list[dict]:
    """The best design and layout of ``model`` for each GPU count (``per="n_gpu"``), for each
    (GPU count, network) (``per="network"``: the best GPU, domain and layout on each network)
    or for each (GPU count, gpu, domain, network) (``per="design"``), ranked ``by`` time, cost or energy
    per step; ``where`` restricts gpu/domain/network.  Each row: the labels, the layout
    (``layout`` text and degrees), the result values, ``cost_per_hour`` [USD/h] and, for
    ``tokens`` [tokens], ``train_days``, ``train_cost`` [USD] and ``train_energy_MWh``."""
    if by not in BY:
        raise PaigridError(f"--by must be one of {', '.join(BY)}, not {by!r}.")
    if per not in PER:
        raise PaigridError(f"--per must be one of {', '.join(PER)}, not {per!r}.")
    with _open(path) as f:
        labels = {d: _labels(f, d) for d in DIMS}
        names = [str(m).casefold() for m in labels["model"]]
        if model.casefold() not in names:
            raise PaigridError(f"{path} has no model {model!r}; it has {', '.join(labels['model'])}.")
        mi = names.index(model.casefold())
        data = {name: f[name][mi] for name in (*VALUE_FIELDS, *LAYOUT_FIELDS)}
        by_reason = f["layouts_by_reason"][mi]
        reason_names = _labels(f, "reason")
        batch_tokens = float(f["global_batch"][mi]) * float(f["seq_len"][mi])
    keep = {d: list(range(len(labels[d]))) for d in DIMS[1:]}
    if n_gpu:
        missing = [n for n in n_gpu if n not in labels["n_gpu"]]
        if missing:
            raise PaigridError(f"the sweep has no n_gpu {missing[0]}; it has {', '.join(map(str, labels['n_gpu']))}.")
        keep["n_gpu"] = [labels["n_gpu"].index(n) for n in n_gpu]
    for dim, wanted in (where or {}).items():
        folded = [str(v).casefold() for v in labels[dim]]
        for w in wanted:
            if str(w).casefold() not in folded:
                raise PaigridError(f"the sweep has no {dim} {w!r}; it has {', '.join(map(str, labels[dim]))}.")
        keep[dim] = [i for i in keep[dim] if folded[i] in {str(w).casefold() for w in wanted}]
    score = data[BY[by]]
    rows = []
    for ni in keep["n_gpu"]:
        cells = [(ni, g, d, w) for g in keep["gpu"] for d in keep["domain"] for w in keep["network"]]
        groups = [[c for c in cells if c[3] == w] for w in keep["network"]] if per == "network" else [cells]
        for group in groups:
            if not any(np.isfinite(score[c]) for c in group):
                counts = sum(by_reason[c] for c in group)
                counts[0] = 0
                row = {"n_gpu": labels["n_gpu"][ni],
                       "layout": f"no valid layout (most often: {reason_names[int(np.argmax(counts))]})"}
                if per == "network":
                    row["network"] = labels["network"][group[0][3]]
                rows.append(row)
                continue
            finite = sorted((c for c in group if np.isfinite(score[c])), key=lambda c: score[c])
            for c in finite if per == "design" else finite[:1]:
                rows.append(_row(labels, data, c, batch_tokens, tokens))
    return rows


def _row(labels, data, c, batch_tokens: float, tokens: float | None) -> dict:
    ni, g, d, w = c
    n = labels["n_gpu"][ni]
    row = {"n_gpu": n, "gpu": labels["gpu"][g], "domain": labels["domain"][d], "network": labels["network"][w]}
    degrees = {k: int(data[k][c]) for k in LAYOUT_FIELDS}
    row["layout"] = (f"tp{degrees['tp']} pp{degrees['pp']} dp{degrees['dp']} cp{degrees['cp']} ep{degrees['ep']} "
                     f"v{degrees['vpp']} mb{degrees['micro_batch']} zero{degrees['zero']} "
                     f"{RECOMPUTE[degrees['recompute']]}{' sp' if degrees['sp'] else ''}")
    row.update(degrees)
    row.update({k: float(data[k][c]) for k in VALUE_FIELDS})
    row["memory_per_gpu_GB"] = row.pop("memory_per_gpu") / 1e9
    row["cost_per_hour"] = row["cost_per_step"] / row["step_time"] * 3600.0
    if tokens:
        steps = tokens / batch_tokens
        row["train_days"] = steps * row["step_time"] / 86400.0
        row["train_cost"] = steps * row["cost_per_step"]
        row["train_energy_MWh"] = steps * row["energy_per_step"] / 3.6e9
    return row
