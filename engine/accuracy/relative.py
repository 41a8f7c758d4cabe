"""Relative errors: what upgrade and architecture answers rest on, from predicted and measured rows.

Every function takes ``pairs`` of a row's attributes and its predicted and measured throughput
(``entries``: dicts with ``row`` (a ``measurements.Measurement``), ``predicted`` and ``measured``
[samples/s, whole job]) and compares ratios between rows of the same job and setup:

* ``gpu_ratios``: the same job (workload, precision, GPU count, architecture, framework and
  source; the batch per GPU may differ, as the sources size it to each GPU's memory) on two
  GPUs: predicted ratio / measured ratio - 1;
* ``scaling_ratios``: the same job on the same GPU on n GPUs against each smaller count;
* ``precision_ratios``: AMP against FP32 (or TF32) of the same job, GPU and count (the batch
  may differ, as the sources size it per precision);
* ``ps_allreduce_order``: tf_cnn_benchmarks' parameter-server mode (``1wng``) against its
  all-reduce twin on the same host (same GPU, count, model, precision, batch, framework and XLA
  setting): is the faster of the two predicted faster?
* ``ranking``: per job (workload and source), the Spearman rank correlation of predicted against
  measured throughput over its configurations, and whether the predicted best is the measured best.
"""

from __future__ import annotations

import itertools
import math
import statistics

#: what "the same job and setup" keeps equal, besides the attribute a comparison varies
SETUP = ("workload", "batch", "grad_accum_steps", "framework", "source_id", "execution", "memory_format")
#: the setup attributes a row holds in its ``variant`` (pai-v2 choices), not as attributes
VARIANT_SETUP = ("execution", "memory_format")


def _key(row, extra: tuple[str, ...], free: tuple[str, ...]) -> tuple:
    values = [row.variant.get(a, "") if a in VARIANT_SETUP else getattr(row, a) for a in SETUP if a not in free]
    return tuple(values) + tuple(getattr(row, a) for a in extra)


def _ratio_errors(
    entries: list[dict], fixed: tuple[str, ...], varied, order=None, free: tuple[str, ...] = ()
) -> list[dict]:
    """Pairs of entries equal in ``SETUP`` (less ``free``) + ``fixed`` and differing in
    ``varied(row)``; each pair's predicted ratio over measured ratio - 1 (``order(a, b)``: True
    when a is the numerator)."""
    groups: dict[tuple, list[dict]] = {}
    for e in entries:
        groups.setdefault(_key(e["row"], fixed, free), []).append(e)
    out = []
    for members in groups.values():
        for a, b in itertools.combinations(members, 2):
            if varied(a["row"]) == varied(b["row"]):
                continue
            if order is not None and not order(a["row"], b["row"]):
                a, b = b, a
            predicted, measured = a["predicted"] / b["predicted"], a["measured"] / b["measured"]
            out.append(
                {
                    "ids": (a["row"].id, b["row"].id),
                    "predicted": predicted,
                    "measured": measured,
                    "error": predicted / measured - 1.0,
                    "order_right": (predicted > 1) == (measured > 1),
                }
            )
    return out


def gpu_ratios(entries: list[dict]) -> list[dict]:
    """The same job and setup on two GPUs (``_ratio_errors``: precision, count, arch fixed)."""
    return _ratio_errors(
        entries, ("precision", "n_gpu", "arch"), lambda r: r.gpu, lambda a, b: a.gpu > b.gpu, free=("batch",)
    )


def scaling_ratios(entries: list[dict]) -> list[dict]:
    """n GPUs against fewer of the same job, GPU and precision (numerator: the larger count)."""
    return _ratio_errors(entries, ("gpu", "precision", "intra"), lambda r: r.n_gpu, lambda a, b: a.n_gpu > b.n_gpu)


def precision_ratios(entries: list[dict]) -> list[dict]:
    """AMP against FP32/TF32 of the same job, GPU, count and architecture (numerator: AMP)."""
    amp = [e for e in entries if e["row"].precision.startswith("amp") or e["row"].precision in ("fp32", "tf32")]
    pairs = _ratio_errors(
        amp,
        ("gpu", "n_gpu", "arch"),
        lambda r: r.precision.startswith("amp"),
        lambda a, b: a.precision.startswith("amp"),
        free=("batch",),
    )
    return pairs


def ps_allreduce_order(entries: list[dict]) -> list[dict]:
    """Parameter-server (``1wng``) against all-reduce twins on the same host (numerator: PS)."""
    twins = [e for e in entries if e["row"].arch in ("1wng", "allreduce-local")]
    pairs = _ratio_errors(
        twins, ("gpu", "n_gpu", "precision", "intra"), lambda r: r.arch, lambda a, b: a.arch == "1wng"
    )
    return pairs


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman rank correlation of two equally long lists (average ranks for ties; NaN when
    either list is constant or shorter than 2)."""
    if len(a) < 2:
        return math.nan
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den if den > 0 else math.nan


def ranking(entries: list[dict], minimum: int = 3) -> list[dict]:
    """Per job (workload and source) with at least ``minimum`` configurations: the Spearman rank
    correlation of predicted against measured throughput and whether the top one agrees."""
    groups: dict[tuple, list[dict]] = {}
    for e in entries:
        groups.setdefault((e["row"].workload, e["row"].source_id), []).append(e)
    out = []
    for (workload, source), members in sorted(groups.items()):
        if len(members) < minimum:
            continue
        predicted = [m["predicted"] for m in members]
        measured = [m["measured"] for m in members]
        top = max(range(len(members)), key=lambda i: predicted[i]) == max(
            range(len(members)), key=lambda i: measured[i]
        )
        out.append(
            {
                "workload": workload,
                "source": source,
                "configurations": len(members),
                "spearman": spearman(predicted, measured),
                "top1": top,
            }
        )
    return out


def median_abs(pairs: list[dict]) -> float | None:
    """Median |error| of ratio pairs (None when there are none)."""
    errors = [abs(p["error"]) for p in pairs if math.isfinite(p["error"])]
    return statistics.median(errors) if errors else None
