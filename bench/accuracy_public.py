"""The section of docs/accuracy.md on the public data-parallel rows (``datasets/measured_public_v2.csv``).

Called by ``bench/accuracy.py`` (``page_sections``).  Two parts:

* cheap (seconds, recomputed by every page check): how the file was read (rows modelled,
  DOUBTFUL, not modelled by reason, assumptions), the uncalibrated absolute errors per group,
  source, GPU and workload, and the uncalibrated relative errors;
* calibrated (minutes: ``paigrid calibrate``'s default fit, its shrinkage strength
  cross-validated inside each fold's training rows, for every fold of three fold kinds): the
  held-out absolute and relative errors against the goals, and the bands.  ``python
  bench/accuracy.py`` reruns it; the page check (``render_page(full=False)``) keeps the block
  between ``BEGIN`` and ``END`` of the committed page as it is.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "accuracy.md"
BEGIN, END = "<!-- public-v2 calibrated: begin -->", "<!-- public-v2 calibrated: end -->"
GROUPS = (("single_gpu", "1 GPU"), ("multi_gpu_one_server", "1 server"), ("multi_server", ">1 server"))
GROUPS_LABEL = dict(GROUPS)
RELATIVE = (
    ("gpu", "same job and setup on another GPU (ratio)"),
    ("scaling", "n GPUs against fewer (ratio)"),
    ("precision", "AMP against FP32/TF32 (ratio)"),
    ("ps_allreduce", "parameter server (1wng) against all-reduce twin (ratio)"),
)


def _pct(value) -> str:
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{100 * value:.1f}%"


def _path() -> str:
    return str(resources.files("paigrid.datasets").joinpath("measured_public_v2.csv"))


def _read():
    from paigrid.accuracy.publicrows import read_public
    from paigrid.inputs.catalog import Catalogues

    reading = read_public(_path(), Catalogues.load())
    return reading.cats, reading


#: the fewest held-out rows a group's band is taken from (a 68% quantile of fewer is noise)
MIN_BAND_ROWS = 10
V2_BAND_COMMAND = (
    "python bench/accuracy.py (bench/accuracy_public.py v2_band_rows): 68% quantile of |predicted / measured - 1| "
    "of the uncalibrated pai-v2 predictions of the modelled rows of datasets/measured_public_v2.csv "
    "(paigrid validate datasets/measured_public_v2.csv; held out: no parameter is fitted to these rows)"
)


def v2_band_rows() -> list[list]:
    """Rows of ``datasets/prediction_bands.csv`` from the public v2 file: model pai-v2,
    uncalibrated, per group, the band (empty under ``MIN_BAND_ROWS`` rows), the row count, the
    command that measured it and the file.  The calibrated v2 bands need the held-out fits of
    the full run, so they are not written here (the calibrated bands stay those of
    measurements_public.csv)."""
    from paigrid.accuracy import judge
    from paigrid.accuracy.crossval import bands

    cats, reading = _read()
    results = judge.uncalibrated(reading.rows, cats)
    out = []
    for group, value in bands(results).items():
        count = sum(r["group"] == group for r in results)
        kept = count >= MIN_BAND_ROWS and math.isfinite(value)
        note = "" if kept else f"; {count} rows in this group, fewer than {MIN_BAND_ROWS}, so no band"
        out.append(
            [
                "pai-v2",
                "uncalibrated",
                group,
                f"{value:.4f}" if kept else "",
                count,
                V2_BAND_COMMAND + note,
                "measured_public_v2.csv",
            ]
        )
    return out


def _group_table(summaries: list[tuple[str, dict]]) -> list[str]:
    lines = [
        "| predictions | " + " | ".join(f"{label} median, mean (n)" for _, label in GROUPS) + " |",
        "|---" * (1 + len(GROUPS)) + "|",
    ]
    for label, summary in summaries:
        lines.append(
            f"| {label} | "
            + " | ".join(
                f"{_pct(summary[g]['median_abs_error'])}, {_pct(summary[g]['mean_abs_error'])} ({summary[g]['count']})"
                for g, _ in GROUPS
            )
            + " |"
        )
    return lines


def _signed(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:+.1f}%"


def _attribute_table(title: str, table: dict[str, dict], count: str = "rows") -> list[str]:
    lines = [
        f"| {title} | {count} | median abs. error | mean abs. error | median signed error |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {k if isinstance(k, str) else ' against '.join(k)} | {v['count']} | {_pct(v['median_abs_error'])} | "
        f"{_pct(v['mean_abs_error'])} | {_signed(v['median_error'])} |"
        for k, v in table.items()
    ]
    return lines


def _gpu_ratio_lines(cats, results, rows) -> list[str]:
    """The another-GPU ratio per GPU and per pair of GPU segments (``judge.gpu_ratio_by``,
    ``judge.gpu_ratio_by_pair``)."""
    from paigrid.accuracy import judge

    def segment(row) -> str:
        return cats.gpus.row(row.gpu).get("segment") or "(no segment)"

    return [
        "The ratio of the same job and setup on another GPU, per GPU (each pair once from each side, the GPU "
        "as the numerator: a positive signed error says the model predicts that GPU faster, against the same "
        "jobs on the other GPUs, than measured; the absolute errors above also carry each workload's error, "
        "these do not) and per pair of the GPUs' catalogue segments (`segment` of gpus.csv; the ratio is the "
        "first segment's GPU over the second's):",
        "",
        *_attribute_table("GPU", judge.gpu_ratio_by(results, rows, lambda r: r.gpu), "pair sides"),
        "",
        *_attribute_table("segments", judge.gpu_ratio_by_pair(results, rows, segment), "pairs"),
    ]


def _relative_lines(summaries: list[tuple[str, dict]]) -> list[str]:
    lines = [
        "| comparison | "
        + " | ".join(f"{label}: pairs, median abs. error, order right" for label, _ in summaries)
        + " |",
        "|---" * (1 + len(summaries)) + "|",
    ]
    for key, label in RELATIVE:
        lines.append(
            f"| {label} | "
            + " | ".join(
                f"{s[key]['pairs']}, {_pct(s[key]['median_abs_error'])}, {_pct(s[key]['order_right'])}"
                for _, s in summaries
            )
            + " |"
        )
    lines.append(
        "| ranking of one job's configurations | "
        + " | ".join(
            f"{s['ranking']['jobs']} jobs, mean Spearman "
            + ("-" if s["ranking"]["mean_spearman"] is None else f"{s['ranking']['mean_spearman']:.2f}")
            + f", top-1 agreement {_pct(s['ranking']['top1'])}"
            for _, s in summaries
        )
        + " |"
    )
    return lines


def cheap_part(cats, reading) -> list[str]:
    """Reading, uncalibrated absolute and relative errors (seconds)."""
    from paigrid.accuracy import judge
    from paigrid.accuracy.crossval import group_summary

    rows = reading.rows
    results = judge.uncalibrated(rows, cats)
    lines = [
        "## The public data-parallel rows (measured_public_v2.csv)",
        "",
        f"`datasets/measured_public_v2.csv` holds {reading.total_rows} published training throughputs "
        "(sources in datasets/README.md). `paigrid validate datasets/measured_public_v2.csv` reads it as "
        "published ([how each awkward value is read](calibration.md#the-public-file-as-published)): "
        f"{len(rows)} rows are modelled, {len(reading.doubtful)} DOUBTFUL rows that could be modelled are "
        f"left out, {len(reading.refused)} are not modelled, each with its reason:",
        "",
        "| not modelled because | rows |",
        "|---|---|",
    ]
    lines += [f"| {why} | {n} |" for why, n in reading.counts().items()]
    lines += [
        "",
        "Assumptions and defaults the modelled rows used (rows each):",
        "",
        "| assumption | rows |",
        "|---|---|",
    ]
    lines += [f"| {what} | {n} |" for what, n in reading.assumption_counts().items()]
    lines += [
        "",
        "The zoo's models without a workloads.csv row are predicted through datasets/zoo_workloads.csv "
        "(docs/zoo.md); the MPT rows are LLM-family jobs. Every number below is of the modelled rows only, "
        "so it describes "
        f"{len({r.workload for r in rows})} workloads on {len({r.gpu for r in rows})} GPUs.",
        "",
        "### Uncalibrated (the shipped defaults, none fitted to these rows)",
        "",
    ]
    lines += _group_table([("uncalibrated", group_summary(results))])
    lines += [
        "",
        "Prediction bands of these rows (68% quantile of |error|; nothing is fitted to them, so each row is held "
        "out), written to `datasets/prediction_bands.csv` for `paigrid predict`, the cube and the report: "
        + "; ".join(
            f"{GROUPS_LABEL[row[2]]} "
            + (f"±{100 * float(row[3]):.1f}% ({row[4]} rows)" if row[3] else f"none ({row[4]} rows)")
            for row in v2_band_rows()
        )
        + ".",
    ]
    lines += [
        "",
        "Per source, GPU, precision and workload (signed error: predicted / measured - 1, positive where the "
        "model predicts the runs faster than measured):",
    ]
    for attribute, title in (
        ("source_id", "source"),
        ("gpu", "GPU"),
        ("precision", "precision"),
        ("workload", "workload"),
    ):
        lines += ["", *_attribute_table(title, judge.by_attribute(results, rows, attribute))]
    lines += ["", *_relative_lines([("uncalibrated", judge.relative_summary(results, rows))])]
    lines += ["", *_gpu_ratio_lines(cats, results, rows)]
    return lines


def calibrated_part(cats, reading) -> list[str]:
    """The held-out calibrated judgement (minutes), with the goals met or missed."""
    import time

    from paigrid.accuracy import judge
    from paigrid.accuracy.crossval import V2_FOLDS, bands, group_summary

    rows = reading.rows
    plain = judge.uncalibrated(rows, cats)
    started = time.perf_counter()
    folds = judge.calibrated(rows, cats)
    seconds = time.perf_counter() - started
    import os

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    counts = ", ".join(f"{len(v['folds'])} {V2_FOLDS[k].removeprefix('leave-')}" for k, v in folds.items())
    lines = [
        "### Calibrated, held out",
        "",
        "Each row predicted by `paigrid calibrate`'s default fit (groups class, hbm, launch, link; shrunk toward "
        "the defaults with the strength chosen by 3-fold cross-validation inside the training rows; a parameter "
        "fitted onto its bound kept at its default) on the rows of the other folds. The 61 workloads and the 30 "
        f"GPUs are dealt (sorted, round-robin) into {judge.MAX_FOLDS} folds of whole workloads or whole GPUs, "
        "so a fold's fit sees no row of a workload or GPU it predicts; the sources are one fold each "
        f"({counts} folds). The fits took {seconds / 60:.1f} minutes (load average {load:.1f} when they ended; "
        "the model is linearised at the defaults once over every row and each fold's fit slices its training "
        "rows from it):",
        "",
    ]
    lines += _group_table(
        [("uncalibrated", group_summary(plain))]
        + [(f"calibrated, {V2_FOLDS[k]}", v["summary"]) for k, v in folds.items()]
    )
    strengths = [f.get("shrinkage", "refused") for v in folds.values() for f in v["folds"]]
    lines += ["", f"Strengths chosen in the {len(strengths)} folds: " + ", ".join(f"{s}" for s in strengths) + ".", ""]
    relatives = [("uncalibrated", judge.relative_summary(plain, rows))] + [
        (f"calibrated, {V2_FOLDS[k]}", judge.relative_summary(v["rows"], rows)) for k, v in folds.items()
    ]
    lines += _relative_lines(relatives)
    goal_lines = []
    for label, summary in relatives:
        checks = []
        for key, what in (("gpu", "another GPU"), ("scaling", "n GPUs against fewer"), ("precision", "AMP vs FP32")):
            median = summary[key]["median_abs_error"]
            checks.append(
                f"{what} {_pct(median)}"
                + ("" if median is None else " (" + ("met" if median <= judge.GOALS["ratio"] else "**missed**") + ")")
            )
        order = summary["ps_allreduce"]["order_right"]
        checks.append(
            "parameter-server vs all-reduce order: "
            + (
                "no twin modelled (**not judged**)"
                if order is None
                else f"{_pct(order)} right (" + ("met" if order >= judge.GOALS["ps_order"] else "**missed**") + ")"
            )
        )
        goal_lines.append(
            f"- ratios, {label} (goal: median at most {_pct(judge.GOALS['ratio'])}; order right in "
            f"{_pct(judge.GOALS['ps_order'])} of twins): " + "; ".join(checks) + "."
        )
    unc = group_summary(plain)
    for kind, value in folds.items():
        s = value["summary"]
        checks = []
        for g, label in GROUPS:
            if s[g]["count"]:
                checks.append(
                    f"{label} median {_pct(s[g]['median_abs_error'])} (goal {_pct(judge.GOALS[g])}: "
                    + ("met" if s[g]["median_abs_error"] <= judge.GOALS[g] else "**missed**")
                    + ")"
                )
        means = [s[g]["mean_abs_error"] for g, _ in GROUPS if s[g]["count"]]
        checks.append(
            f"largest mean {_pct(max(means))} (goal {_pct(judge.GOALS['mean'])}: "
            + ("met" if max(means) <= judge.GOALS["mean"] else "**missed**")
            + ")"
        )
        never_worse = all(
            s[g]["median_abs_error"] <= unc[g]["median_abs_error"] + 1e-12 for g, _ in GROUPS if s[g]["count"]
        )
        checks.append("calibration never worse than none: " + ("met" if never_worse else "**missed**"))
        goal_lines.append(f"- {V2_FOLDS[kind]}: " + "; ".join(checks) + ".")
    lines += ["", "**Goals** (held out):", "", *goal_lines, ""]
    pooled = [r for v in folds.values() for r in v["rows"]]
    band = bands(pooled)
    lines += [
        "Prediction bands of these rows (68% quantile of held-out |error|, the three fold kinds pooled): "
        + "; ".join(f"{label} " + ("-" if math.isnan(band[g]) else f"±{100 * band[g]:.1f}%") for g, label in GROUPS)
        + "."
    ]
    return lines


def _committed_block() -> list[str]:
    """The calibrated block of the committed page (between ``BEGIN`` and ``END``)."""
    text = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    if BEGIN in text and END in text:
        return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n").split("\n")
    return ["(not computed yet: run `python bench/accuracy.py`)"]


def block_row_count(block: list[str]) -> int | None:
    """The rows the calibrated block judged: the counts of its "uncalibrated" group row (None when
    the block has no such row)."""
    import re

    for line in block:
        if line.startswith("| uncalibrated |"):
            return sum(int(n) for n in re.findall(r"\((\d+)\)", line))
    return None


def stale_note(block: list[str], modelled: int) -> list[str]:
    """A sentence when the committed calibrated block judged another number of rows than the file's
    reading models now (the reading changed since the full run); empty when they agree."""
    judged = block_row_count(block)
    if judged is None or judged == modelled:
        return []
    return [
        "",
        f"**The calibrated block below is out of date**: it judged {judged} rows, and the file's reading "
        f"now models {modelled}; its numbers are of that earlier reading until `python bench/accuracy.py` "
        "reruns it.",
    ]


def public_v2_section(full: bool) -> str:
    """The page's section on the public data-parallel rows (``full``: rerun the calibrated part)."""
    cats, reading = _read()
    lines = cheap_part(cats, reading)
    block = calibrated_part(cats, reading) if full and reading.rows else _committed_block()
    lines += stale_note(block, len(reading.rows))
    lines += [
        "",
        "The calibrated judgement below takes minutes (a fit with its own shrinkage cross-validation for "
        "every fold of three fold kinds: workloads, GPUs and sources held out, the source being the "
        "row id's prefix LV0, LV1, LV2, LTF, DLE, TIMM or MPT). `python bench/accuracy.py` regenerates it "
        "(`--cheap --public`: this block alone); "
        "the page check (`tests/test_docs.py`) recomputes everything above and keeps this block as "
        "committed.",
        "",
        BEGIN,
        *block,
        END,
    ]
    return "\n".join(lines)
