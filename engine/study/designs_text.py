"""The markdown of the cluster-design ranking (``designs.compute_designs``) and of the ties of the
best architecture, sections of ``report.md``."""

from __future__ import annotations

import math

from paigrid.study.constants import pct

SHOWN = 15
"""Designs shown in the report's table; every design is in ``designs.csv`` beside it."""


def _money(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:,.0f}"


def _name(design: dict) -> str:
    return " / ".join(design.values())


def _bottleneck(name: str) -> str:
    """A bottleneck name in words (``llm_tp_comm`` -> ``LLM tp comm``)."""
    return name.replace("llm_", "LLM ").replace("_", " ")


def _pm(total: dict) -> str:
    b = total["band"]
    return f"{_money(total['cost'])} +- {_money(b['correlated'])} ({_money(b['same_sign'])})"


def design_rows(d: dict) -> list[dict]:
    """One flat row per ranked design (the columns of ``designs.csv``; units in the names)."""
    rows = []
    for rank, x in enumerate(d["designs"], 1):
        row = {"rank": rank, **x["design"], "jobs_run": x["jobs"], "jobs_cannot_run": x["cannot_run"]}
        for kind in ("current", "cheapest"):
            t = x[kind]
            row.update(
                {
                    f"{kind}_gpu_hours": t["gpu_hours"],
                    f"{kind}_cost_USD": t["cost"],
                    f"{kind}_cost_band_USD": t["band"]["correlated"],
                    f"{kind}_cost_band_same_sign_USD": t["band"]["same_sign"],
                    f"{kind}_energy_kWh": t["energy_kWh"],
                    f"{kind}_job_hours": t["job_hours"],
                }
            )
        row.update(
            {
                "cheapest_mean_n_gpu": x["cheapest"]["mean_n_gpu"],
                "share_faster": x["faster"],
                "share_slower": x["slower"],
                "share_faster_beyond_band": x["faster_beyond_band"],
                "share_slower_beyond_band": x["slower_beyond_band"],
                **{f"bottleneck_{k}_jobs": v for k, v in x["bottlenecks"].items()},
            }
        )
        rows.append(row)
    return rows


def render_designs(d: dict | None, best_arch: dict, figures: dict) -> list[str]:
    """The report's section on cluster designs and ties (markdown lines)."""
    lines = ["## 5. Which architecture, which cluster design", ""]
    if best_arch["jobs"]:
        lines += [
            f"**Best architecture.** On its current hardware, GPU count and precision, "
            f"{pct(best_arch['share_not_current'])} of {best_arch['jobs']:,} jobs would be fastest on another "
            "architecture than today's (fastest: "
            + ", ".join(f"{a} {n:,}" for a, n in best_arch["best"].items())
            + f"); for {pct(best_arch['share_tied'])} ({best_arch['tied']:,} jobs) the best architecture is a "
            "tie: the second fastest is slower by less than the job's prediction band.",
            "",
        ]
    if d is None:
        return lines + ["No job is analysed, so no design is ranked.", ""]
    dims = ", ".join(d["dims"])
    today = d["today"]
    fam = d.get("families", {"dp": today["jobs"], "llm": 0})
    both = (
        f"It ranks {fam['dp']:,} data-parallel and {fam['llm']:,} LLM jobs on the same designs: a data-parallel "
        "job's step does not depend on the NVLink domain (its intra link joins every GPU of a server), an LLM "
        "job's GPU has one intra link (the cube's `llm/intra`), so an LLM job runs a design only with that link. "
        "An LLM job runs its best layout (the cube's `llm/best_step_time`: the fastest valid layout, memory "
        "included) at its precision; its global batch is fixed, so on n GPUs at step time T its work takes "
        "n x T / T0 GPU-hours, and its cheapest count is the one of the fewest among every GPU count of the "
        "cube's `llm` group. LLM jobs carry the largest band of the model (no LLM band is held out). "
        if fam.get("llm")
        else ""
    )
    lines += [
        f"**Cluster designs.** A design is one value of each hardware dimension of the cube ({dims}); "
        f"{len(d['designs']):,} designs can run at least one job. {both}Each job's work is what it processes in "
        "one hour today, so today's population takes "
        f"{today['gpu_hours']:,.0f} GPU-hours, USD {_pm(today)}, {today['energy_kWh']:,.0f} kWh and "
        f"{today['job_hours']:,.0f} job-hours. On a design a job keeps its architecture and precision; "
        "*current count*: its GPU count of today (from the cube); *cheapest count*: for a data-parallel job the "
        "count with the fewest GPU-hours among one GPU and the powers of two below today's (predicted by the "
        "model that made the cube). Cost is GPU-hours x the GPU's price, energy GPU-hours x its board power. "
        "Ranked by the jobs a "
        "design cannot run (invalid, or does not fit in GPU memory), then by cost at the current count. "
        "Cost bands: +- errors correlated within a workload and GPU, independent across them (in brackets: "
        "every error of the same sign). Faster/slower: share of the jobs it runs whose step is faster/slower "
        "than today's (beyond the band: by more than the job's band).",
        "",
        "| rank | design | cannot run | cost, current count [USD] | GPU-hours | energy [kWh] | job-hours "
        "| cost, cheapest count [USD] | mean GPUs, cheapest | faster | slower | faster / slower beyond band "
        "| bottlenecks (current count) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for rank, x in enumerate(d["designs"][:SHOWN], 1):
        c, h = x["current"], x["cheapest"]
        mix = ", ".join(f"{_bottleneck(k)} {v:,}" for k, v in x["bottlenecks"].items() if v)
        lines.append(
            f"| {rank} | {_name(x['design'])} | {x['cannot_run']:,} | {_pm(c)} | {c['gpu_hours']:,.0f} | "
            f"{c['energy_kWh']:,.0f} | {c['job_hours']:,.0f} | {_pm(h)} | {h['mean_n_gpu']:.2f} | "
            f"{pct(x['faster'])} | {pct(x['slower'])} | {pct(x['faster_beyond_band'])} / "
            f"{pct(x['slower_beyond_band'])} | {mix} |"
        )
    if len(d["designs"]) > SHOWN:
        lines += [
            "",
            f"The other {len(d['designs']) - SHOWN:,} designs are in "
            f"[{figures['designs_csv']}]({figures['designs_csv']}).",
        ]
    front = [f"{_name(d['designs'][k]['design'])} at the {kind} count" for k, kind in d["pareto"]]
    lines += [
        "",
        "The Pareto front of cost against time (job-hours), over the designs that run the most jobs: "
        + "; ".join(front)
        + " (cheapest first). Every other point costs more for the same time or takes "
        "longer for the same cost.",
        "",
        f"![Cost against time of every design]({figures['designs']})",
        "",
    ]
    best = d["best"]
    if best:
        top = list(best.items())[:5]
        lines += [
            "Each job's own cheapest design at its current count: "
            + ", ".join(f"{_name(d['designs'][k]['design'])} for {n:,} jobs" for k, n in top)
            + f". For {pct(d['ties']['share'])} of {d['ties']['jobs']:,} jobs ({d['ties']['tied']:,}) the best "
            "design is a tie: the second cheapest costs less than the job's band more (designs that differ only "
            "in a dimension the job does not depend on count as one).",
            "",
        ]
    llm_best = d.get("best_llm") or {}
    if llm_best:
        t = d["ties_llm"]
        lines += [
            "The LLM jobs' own cheapest designs at their current counts: "
            + ", ".join(f"{_name(d['designs'][k]['design'])} for {n:,}" for k, n in list(llm_best.items())[:5])
            + f"; {t['tied']:,} of {t['jobs']:,} are ties.",
            "",
        ]
    return lines
