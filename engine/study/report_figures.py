"""The PNG figures of the PAI-study report (matplotlib with the Agg canvas, imported only here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from paigrid.study.constants import BOTTLENECKS, COMPONENT_LABELS, COMPONENTS, pct, times

COLORS = {"t_data": "#7f7f7f", "t_flop": "#1f77b4", "t_mem": "#ff7f0e", "t_comm": "#d62728"}
FIGURES = {
    "breakdown": "breakdown.png",
    "comm_cdf": "comm_share_cdf.png",
    "bottlenecks": "bottlenecks.png",
    "ps_nvlink": "projection_ps_nvlink.png",
    "ethernet": "projection_ethernet.png",
    "gpu": "projection_gpu.png",
    "amp": "projection_amp.png",
    "designs": "designs_pareto.png",
}
DATA_FILES = {"designs_csv": "designs.csv"}


def _figure(width: float = 7.5, height: float = 4.5):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _plot_breakdown(numbers: dict, path: Path) -> None:
    fig, ax = _figure()
    b = numbers["breakdown"]
    keys = list(b)
    x = np.arange(len(keys))
    bottom = np.zeros(len(keys))
    for c in COMPONENTS:
        values = np.array([100 * b[k][c] for k in keys])
        ax.bar(x, values, bottom=bottom, color=COLORS[c], label=COMPONENT_LABELS[c], width=0.65)
        bottom += values
    ax.set_xticks(x, [f"{k}\n({b[k]['jobs']:,} jobs)" for k in keys])
    ax.set_ylabel("mean share of step time [%]")
    ax.set_xlabel("current training architecture")
    ax.set_ylim(0, 100)
    ax.set_title("Mean time breakdown per architecture (current configuration)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.savefig(path, dpi=120)


def _cdf(ax, values: np.ndarray, label: str, **kw) -> None:
    if len(values) == 0:
        return
    v = np.sort(values)
    y = np.arange(1, len(v) + 1) / len(v) * 100
    ax.step(np.concatenate([[v[0]], v]), np.concatenate([[0], y]), where="post", label=label, **kw)


def _plot_comm_cdf(numbers: dict, path: Path) -> None:
    fig, ax = _figure()
    for key, shares in numbers["comm_share"].items():
        style = {"color": "black", "linewidth": 2.2} if key == "all" else {"linewidth": 1.4}
        _cdf(ax, 100 * shares, f"{key} ({len(shares):,} jobs)", **style)
    ax.set_xlim(-1, 101)
    ax.set_ylim(0, 100)
    ax.set_xlabel("communication share of step time [%]")
    ax.set_ylabel("jobs with at most this share [%]")
    ax.set_title("CDF of the communication share (current configuration)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="current architecture")
    fig.savefig(path, dpi=120)


def _plot_bottlenecks(numbers: dict, path: Path) -> None:
    fig, ax = _figure()
    counts = {k: v for k, v in numbers["bottlenecks"].items() if k != "all"}
    keys = list(counts)
    x = np.arange(len(keys))
    width = 0.8 / len(BOTTLENECKS)
    for k, (name, comp) in enumerate(zip(BOTTLENECKS, COMPONENTS)):
        ax.bar(
            x + (k - 1.5) * width,
            [counts[a][name] for a in keys],
            width,
            color=COLORS[comp],
            label=COMPONENT_LABELS[comp],
        )
    from matplotlib.ticker import MaxNLocator

    ax.set_xticks(x, [f"{a}\n({sum(counts[a].values()):,} jobs)" for a in keys])
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("current training architecture")
    ax.set_ylabel("jobs [count]")
    ax.set_title("Bottleneck (largest time component) per architecture")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="bottleneck")
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(path, dpi=120)


def _speedup_axes(ax, arrays: list[np.ndarray], title: str) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    values = np.concatenate([a for a in arrays if len(a)]) if any(len(a) for a in arrays) else np.array([1.0])
    lo, hi = float(np.min(values)), float(np.max(values))
    if hi / max(lo, 1e-12) > 4:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.text(1.0, 98, " 1x: no change", color="grey", fontsize=8, ha="left", va="top")
    ax.set_ylim(0, 100)
    ax.set_xlabel("speedup over the baseline configuration [x]")
    ax.set_ylabel("jobs with at most this speedup [%]")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="major")
    if ax.get_legend_handles_labels()[0]:  # a projection with no job in scope draws no curve
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)


def _plot_projection(items: list[tuple[str, dict]], title: str, path: Path) -> None:
    fig, ax = _figure()
    for label, p in items:
        _cdf(
            ax,
            p["speedup"],
            f"{label}: {p['jobs']:,} jobs, mean {times(p['mean'])}, faster {pct(p['share_faster'])}",
            linewidth=1.8,
        )
    _speedup_axes(ax, [p["speedup"] for _, p in items], title)
    fig.savefig(path, dpi=120)


def _empty_figure(text: str, path: Path) -> None:
    fig, ax = _figure(6, 2)
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center")
    fig.savefig(path, dpi=100)


def write_figures(numbers: dict, folder: Path) -> dict[str, str]:
    """Draw every PNG figure into ``folder``; returns {figure key: file name}."""
    folder = Path(folder)
    _plot_breakdown(numbers, folder / FIGURES["breakdown"])
    _plot_comm_cdf(numbers, folder / FIGURES["comm_cdf"])
    _plot_bottlenecks(numbers, folder / FIGURES["bottlenecks"])
    proj = numbers["projections"]
    _plot_projection(
        [("PS/Worker -> AllReduce-NVLink", proj["ps_nvlink"])],
        "PS/Worker jobs moved to AllReduce inside one NVLink server",
        folder / FIGURES["ps_nvlink"],
    )
    for key, label, title in (
        ("ethernet", "eth-25g -> eth-100g", "Ethernet upgrade from 25 to 100 Gb/s"),
        ("amp", "fp32 -> amp-fp16", "fp32 to mixed precision (amp-fp16)"),
    ):
        if proj[key].get("available", True):
            _plot_projection([(label, proj[key])], title, folder / FIGURES[key])
        else:
            _empty_figure(f"not computed: the cube has no {proj[key]['missing']}", folder / FIGURES[key])
    steps = [(k.replace("->", " -> "), s) for k, s in proj["gpu"]["steps"].items()]
    _plot_projection(steps, "GPU generation upgrades (everything else unchanged)", folder / FIGURES["gpu"])
    written = dict(FIGURES)
    if numbers.get("designs"):
        _plot_designs(numbers["designs"], folder / FIGURES["designs"])
        _write_designs_csv(numbers["designs"], folder / DATA_FILES["designs_csv"])
        written.update(DATA_FILES)
    else:
        _empty_figure("no job analysed: no cluster design ranked", folder / FIGURES["designs"])
    return written


def _plot_designs(d: dict, path: Path) -> None:
    """Cost [USD] against time [job-hours] of every design at the current and cheapest counts,
    today's population as a star, the Pareto front as a line."""
    fig, ax = _figure(8.5, 6.5)
    fewest = min(x["cannot_run"] for x in d["designs"])
    for kind, marker, label in (("current", "o", "current GPU count"), ("cheapest", "^", "cheapest GPU count")):
        full = [x for x in d["designs"] if x["cannot_run"] == fewest]
        part = [x for x in d["designs"] if x["cannot_run"] != fewest]
        ax.scatter(
            [x[kind]["job_hours"] for x in full],
            [x[kind]["cost"] for x in full],
            marker=marker,
            s=22,
            label=f"{label} ({len(full)} designs that run the most jobs)",
            alpha=0.8,
        )
        if part:
            ax.scatter(
                [x[kind]["job_hours"] for x in part],
                [x[kind]["cost"] for x in part],
                marker=marker,
                s=14,
                color="lightgrey",
                label=f"{label}, designs that cannot run some jobs",
            )
    front = [(d["designs"][k][kind]["job_hours"], d["designs"][k][kind]["cost"]) for k, kind in d["pareto"]]
    if front:
        ax.plot(*zip(*front), color="black", linewidth=1.2, label="Pareto front")
        for m, ((k, kind), (x, y)) in enumerate(zip(d["pareto"], front)):
            ax.annotate(
                " / ".join(d["designs"][k]["design"].values()) + f" ({kind})",
                (x, y),
                fontsize=6,
                xytext=(4, 3 if m % 2 == 0 else -9),
                textcoords="offset points",
            )
    ax.scatter(
        [d["today"]["job_hours"]], [d["today"]["cost"]], marker="*", s=160, color="#d62728", label="today", zorder=5
    )
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis, scale in ((ax.xaxis, ax.set_xscale), (ax.yaxis, ax.set_yscale)):
        scale("log")
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("time: sum over jobs of the hours to do one hour of today's work [job-hours]")
    ax.set_ylabel("cost of that work [USD]")
    ax.set_title("Cluster designs for the population: cost against time")
    ax.grid(alpha=0.3, which="major")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False, fontsize=7, ncol=2)
    fig.savefig(path, dpi=120)


def _write_designs_csv(d: dict, path: Path) -> None:
    import csv

    from paigrid.study.designs_text import design_rows

    rows = design_rows(d)
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["rank"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
