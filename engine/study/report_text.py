"""The markdown of the PAI-study report: the numbers of ``report.compute_report`` as tables and text."""

from __future__ import annotations

import math

import numpy as np

from paigrid.study.constants import (
    BOTTLENECKS,
    COMPONENT_LABELS,
    COMPONENTS,
    GPU_LADDERS,
    NVLINK_SERVER,
    PAPER,
    REASONS,
    pct,
    times,
)


def _fmt(x, unit: str) -> str:
    return pct(x) if unit == "share" else times(x)


def _population_text(p: dict | None) -> str:
    """Where the jobs came from, and how many took the trace importer's default family."""
    from paigrid.study.trace import SOURCE_DEFAULTED

    if not p or p["status"] == "none":
        return "Population: the cube records no population file."
    if p["status"] != "read":
        why = "is not found" if p["status"] == "missing" else "has changed since the sweep"
        return (
            f"Population: the file `{p['path']}` that the cube was swept from {why}, so its sources (and the "
            "jobs that took the trace importer's default family) are not counted."
        )
    parts = ", ".join(f"{k} {v:,}" for k, v in sorted(p["sources"].items(), key=lambda kv: -kv[1]))
    defaulted = p["sources"].get(SOURCE_DEFAULTED, 0)
    return (
        f"Population `{p['path']}`, jobs per source: {parts or 'no source column'}. {defaulted:,} job(s) took "
        "the trace importer's default family (no workload tag, or one that maps to no zoo family)."
    )


def _band(pair, unit: str) -> str:
    """A band (low, high) as "a - b" in the figure's unit ("n/a" when unknown)."""
    if not pair or not all(isinstance(x, float) and math.isfinite(x) for x in pair):
        return "n/a"
    return f"{_fmt(pair[0], unit)} - {_fmt(pair[1], unit)}"


def _bands_text(numbers: dict) -> str:
    """How the headline bands were made, and how many jobs took the fallback band."""
    b = numbers.get("bands", {})
    fb = b.get("fallback", {})
    text = (
        "Bands: the model's prediction bands (the 68th percentile of its cross-validated relative error, "
        f"per group of one GPU, one server, several servers; model {fb.get('model', '?')}, "
        f"{'calibrated' if fb.get('calibrated') else 'uncalibrated'}), each prediction's error drawn "
        "400 times and every figure recomputed; a band is the spread of the recomputed figure's 16th to 84th "
        "percentile around its median, placed around the figure. "
        "*Correlated*: one error per workload and GPU, shared by all its jobs and configurations on that "
        "GPU (a ratio of two predictions on the same GPU, as the Ethernet upgrade, then has no band); "
        "*independent*: every prediction its own error. A share's band takes the whole error of the step "
        "time as an error of the communication time, its widest."
    )
    if b.get("fallback_jobs"):
        text += (
            f" {b['fallback_jobs']:,} analysed job(s) are in a group with no held-out measurement (several "
            f"servers) and take the model's largest band, {pct(fb.get('band', math.nan))}, an assumption."
        )
    return text


def _excluded_text(proj: dict) -> str:
    if not proj["excluded"]:
        return "No job in scope was excluded."
    parts = [f"{n:,} because {REASONS.get(k, k)}" for k, n in sorted(proj["excluded"].items(), key=lambda kv: -kv[1])]
    total = sum(proj["excluded"].values())
    return f"{total:,} job(s) in scope were excluded: " + "; ".join(parts) + "."


def _summary_table(rows: list[tuple[str, dict]]) -> list[str]:
    lines = [
        "| projection | jobs | faster | mean speedup | median | 10th pct | 90th pct | min | max |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, p in rows:
        lines.append(
            f"| {name} | {p['jobs']:,} | {pct(p['share_faster'])} | {times(p['mean'])} | "
            f"{times(p['median'])} | {times(p['p10'])} | {times(p['p90'])} | {times(p['min'])} | "
            f"{times(p['max'])} |"
        )
    return lines


def _differences(numbers: dict) -> str:
    """The paragraph on why paigrid's figures differ from the paper's, worded from the numbers."""
    b = numbers["breakdown"]
    ps, eth = numbers["projections"]["ps_nvlink"], numbers["projections"]["ethernet"]
    comm_all = b["all"]["t_comm"]
    comm_ps = b.get("ps-worker", {}).get("t_comm", math.nan)
    single = sum(b[a]["jobs"] for a in ("1w1g",) if a in b)

    def cmp(ours, theirs):
        if not math.isfinite(ours):
            return "not comparable with"
        return "close to" if abs(ours - theirs) <= 0.1 * theirs else "above" if ours > theirs else "below"

    text = [
        f"The mean communication share over all jobs ({pct(comm_all)}) is {cmp(comm_all, PAPER['comm_share'])} the "
        f"paper's 62%. {single:,} of the {b['all']['jobs']:,} jobs are 1w1g jobs, which exchange no gradients at all "
        f"in the model (a share of 0), so the all-jobs mean depends directly on how many single-GPU jobs the "
        f"population holds; over PS/Worker jobs alone the share is {pct(comm_ps)}."
    ]
    if ps["jobs"]:
        text.append(
            f"Of the PS/Worker jobs that fit in one server, {pct(ps['share_faster'])} get faster on "
            f"AllReduce-NVLink ({cmp(ps['share_faster'], PAPER['ps_nvlink_faster'])} the paper's 60%); counted over "
            f"all {ps['ps_worker_jobs']:,} PS/Worker jobs, with the {ps['beyond_one_server']:,} jobs larger than one "
            f"server as not faster, it is {pct(ps['share_faster_of_all_ps'])}. Which of the two the paper means is "
            "not known, and its server count per job is not known either: here it follows from the synthetic "
            "GPU-count table."
        )
        if ps["share_faster"] >= 0.99:
            top = next(iter(ps["median_by_model"].items()), None)
            largest = f" (largest median per model: {top[0]}, {times(top[1])})" if top else ""
            text.append(
                "In the model's formulas a job that fits in one server can hardly lose by the move: the ring "
                "all-reduce sends about twice the gradient bytes per GPU over NVLink, while the PS/Worker step "
                "pushes the gradients of all the server's GPUs through its one Ethernet NIC (and the SXM GPU is, "
                "if anything, faster), so the share faster is a matter of the model's structure, not of its "
                f"constants. The size of the gain varies widely (median {times(ps['median'])}, mean "
                f"{times(ps['mean'])}): the mean is pulled up by jobs with many parameters and little compute"
                f"{largest}."
            )
    if eth.get("available", True) and eth["jobs"]:
        text.append(
            f"The 25 -> 100 Gb/s Ethernet upgrade gives {times(eth['mean'])} on average over {eth['jobs']:,} jobs "
            f"({cmp(eth['mean'], PAPER['eth_speedup'])} the paper's 1.7x). Their communication time shrinks by "
            f"{times(eth['comm_ratio_median'])} (median), not 4x: the model's TCP efficiency of 100 GbE is lower than "
            "that of 25 GbE (links catalogue) and the parameter servers' PCIe copy does not get faster. At 25 GbE "
            f"these jobs spend {pct(eth['comm_share_mean'])} of their step communicating on average; the larger "
            "that share, the closer a job's speedup comes to its communication-time ratio."
        )
    text.append(
        "Common causes of every difference: the population is synthetic, calibrated only to the trace's "
        "architecture and GPU shares and never to these results (its model mix, batches and GPU counts are our "
        "choices); the model adds the time components with no overlap, as the paper does, but its efficiencies, "
        "memory-bound byte counts and communication formulas are paigrid's own (see 'The model' in paigrid's "
        "README) because the paper's are not published; and the hardware is the catalogue's 2017-2019 datasheet "
        "hardware, not PAI's measured machines."
    )
    return " ".join(text)


def render_markdown(numbers: dict, figures: dict[str, str]) -> str:
    """The report as markdown; ``figures`` maps figure keys to PNG file names in the same folder."""
    c, b = numbers["cube"], numbers["breakdown"]
    ex = numbers["excluded"]
    n_an = int(numbers["analysed"].sum())
    lines = [
        "# PAI-study report",
        "",
        f"Cube `{c['path']}` ({c['jobs']:,} jobs; paigrid {c['paigrid_version']}, created {c['created']}). "
        f"GPUs in the cube: {', '.join(c['labels']['gpu'])}; intra links: {', '.join(c['labels']['intra'])}; "
        f"networks: {', '.join(c['labels']['network'])}; precisions: {', '.join(c['labels']['precision'])}.",
        "",
        f"**{n_an:,} jobs analysed** (a valid current configuration in the cube). Left out: "
        f"{ex['no_current_configuration']:,} without a current configuration, {ex['current_not_in_cube']:,} whose "
        f"current configuration is not in the cube, {ex['current_invalid']:,} whose current configuration is "
        f"invalid. {numbers['current_not_fitting']:,} analysed job(s) run today in a configuration that the "
        "model's memory estimate says does not fit in GPU memory; they are kept (they do run)."
        + _llm_text(c, numbers.get("llm")),
        "",
        _population_text(numbers.get("population")),
        "",
        "Times are per optimizer step of one data-parallel replica, from "
        + ("the model's version 1" if c.get("model", "pai-v1") == "pai-v1" else f"compute model {c['model']}")
        + " (no overlap): "
        "step time = input I/O + FLOP-bound compute + memory-bound ops + communication. A speedup is the "
        "current step time over the projected one [x] (same GPU count and batch, so also the throughput "
        "ratio); a job is *faster* when its speedup is above 1.",
        "",
    ]

    lines += [
        "## Headline results: paigrid and the paper",
        "",
        "| result | paigrid | band, errors correlated | band, errors independent | paper | jobs | note |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in numbers["headline"]:
        lines.append(
            f"| {r['what']} | {_fmt(r['paigrid'], r['unit'])} | "
            f"{_band(r.get('band_correlated'), r['unit'])} | "
            f"{_band(r.get('band_independent'), r['unit'])} | {_fmt(r['paper'], r['unit'])} | "
            f"{r['jobs']:,} | {r['note']} |"
        )
    lines += ["", _bands_text(numbers), "", _differences(numbers), ""]

    lines += [
        "## 1. Time breakdown at the current configuration",
        "",
        "Mean share of step time per component, averaged over the jobs of each current architecture "
        "(each job's shares sum to 100%).",
        "",
        "| architecture | jobs | " + " | ".join(COMPONENT_LABELS[k] for k in COMPONENTS) + " |",
        "|---|---:|" + "---:|" * len(COMPONENTS),
    ]
    for key, row in b.items():
        lines.append(f"| {key} | {row['jobs']:,} | " + " | ".join(pct(row[k]) for k in COMPONENTS) + " |")
    lines += [
        "",
        f"![Mean time breakdown per architecture]({figures['breakdown']})",
        "",
        "The distribution of the communication share over jobs (a CDF: the share of jobs whose "
        "communication share is at most x):",
        "",
        f"![CDF of the communication share]({figures['comm_cdf']})",
        "",
    ]
    cs = numbers["comm_share"]["all"]
    if len(cs):
        lines += [
            f"Over all jobs the median communication share is {pct(float(np.median(cs)))}; "
            f"{pct(float(np.mean(cs > 0.5)))} of jobs spend more than half of their step communicating and "
            f"{pct(float(np.mean(cs > 0.8)))} more than 80%.",
            "",
        ]

    lines += [
        "## 2. Bottlenecks",
        "",
        "Jobs per largest time component at the current configuration.",
        "",
        "| architecture | jobs | " + " | ".join(COMPONENT_LABELS[k] for k in COMPONENTS) + " |",
        "|---|---:|" + "---:|" * len(COMPONENTS),
    ]
    for key, counts in numbers["bottlenecks"].items():
        lines.append(f"| {key} | {b[key]['jobs']:,} | " + " | ".join(f"{counts[n]:,}" for n in BOTTLENECKS) + " |")
    lines += ["", f"![Bottleneck counts per architecture]({figures['bottlenecks']})", ""]

    lines += [
        "## 3. Projections",
        "",
        "Each projection changes one thing in a job's configuration; a job whose projected configuration "
        "is invalid, or does not fit in GPU memory, is excluded and counted.",
        "",
    ]
    lines += _md_ps_nvlink(numbers["projections"]["ps_nvlink"], figures)
    lines += _md_ethernet(numbers["projections"]["ethernet"], figures)
    lines += _md_gpu(numbers["projections"]["gpu"], figures)
    lines += _md_amp(numbers["projections"]["amp"], figures)
    if numbers.get("paper"):
        from paigrid.study.paper import render_paper

        lines += [_numbered(render_paper(numbers["paper"]), "4."), ""]
    if "best_arch" in numbers:
        from paigrid.study.designs_text import render_designs

        lines += render_designs(numbers.get("designs"), numbers["best_arch"], figures)
    return "\n".join(lines).rstrip() + "\n"


def _llm_text(cube: dict, llm: dict | None) -> str:
    """What the report does with the LLM-family jobs of the cube (its ``llm`` group): the
    sentence after the analysed-jobs count ('' when the cube holds none)."""
    if not cube.get("llm_jobs") or llm is None:
        return ""
    from paigrid.study.llm_designs import REASONS

    left = "; ".join(f"{n:,} because {REASONS[k]}" for k, n in llm["excluded"].items() if n)
    text = (
        f" The cube also holds {cube['llm_jobs']:,} LLM-family job(s) (its `llm` group), of which "
        f"{llm['analysed']:,} are analysed" + (f" (left out: {left})" if left else "") + ". The PAI study's "
        "sections 1-4 are about the data-parallel architectures (time breakdown, bottlenecks, the projections, "
        "the paper's figures), so they analyse the data-parallel jobs only; an LLM job's architecture is a "
        "parallel layout, which the sweep searched. The LLM jobs are analysed in section 5: each runs its best "
        "layout on its design of today and on every cluster design, and enters the designs' work, costs, "
        "shares faster and slower, bottleneck mix, Pareto front and ties beside the data-parallel jobs."
    )
    if llm["analysed"]:
        mix = ", ".join(f"{k[4:].replace('_', ' ')} {v:,}" for k, v in llm["bottlenecks_today"].items() if v)
        layouts = ", ".join(f"{k} {v:,}" for k, v in list(llm["layouts_today"].items())[:5])
        text += (
            f" On their designs of today their best layouts are bound by: {mix} (the largest part of the step); "
            f"their tensor x pipeline degrees: {layouts}."
        )
    return text


def _numbered(section: str, number: str) -> str:
    """A section's first heading numbered (``## Title`` -> ``## 4. Title``)."""
    head, _, rest = section.partition("\n")
    return head.replace("## ", f"## {number} ", 1) + "\n" + rest


def _md_ps_nvlink(p: dict, figures: dict) -> list[str]:
    mapping = ", ".join(f"{g} -> {t} on {i}" for g, (t, i) in NVLINK_SERVER.items() if g != t)
    no_nvlink = (
        f" GPUs with no NVLink server: {', '.join(p['gpus_without_nvlink'])}." if p["gpus_without_nvlink"] else ""
    )
    return [
        "### 3.1 PS/Worker -> AllReduce inside one NVLink server",
        "",
        "Definition: a PS/Worker job that fits in one server (its GPU count at most the server's GPUs, i.e. "
        "allreduce-local is valid for it) runs as allreduce-local, with its GPU count, network and precision "
        "unchanged, on the NVLink server of its GPU generation: a PCIe card is replaced by its SXM sibling "
        f"({mapping}); an SXM part keeps its GPU, on its own NVLink (P100-SXM2 on nvlink1-hcm, V100-SXM2 on "
        "nvlink2-hcm, A100-SXM4 on nvswitch-nvlink3, H100-SXM5 on nvswitch-nvlink4). The GPU swap changes the "
        "compute time too (the SXM parts have a higher peak).",
        "",
        f"{p['ps_worker_jobs']:,} PS/Worker jobs; {p['beyond_one_server']:,} need more than one server and are "
        f"out of scope; {p['in_scope']:,} fit in one server. {_excluded_text(p)}{no_nvlink}",
        "",
        *_summary_table([("PS/Worker -> AllReduce-NVLink", p)]),
        "",
        f"Faster: {pct(p['share_faster'])} of the jobs that fit in one server, "
        f"{pct(p['share_faster_of_all_ps'])} of all PS/Worker jobs.",
        "",
        f"![Speedup of PS/Worker jobs moved to AllReduce-NVLink]({figures['ps_nvlink']})",
        "",
    ]


def _md_ethernet(p: dict, figures: dict) -> list[str]:
    head = ["### 3.2 Ethernet 25 -> 100 Gb/s", ""]
    if not p.get("available", True):
        return head + [f"Not computed: the cube has no {p['missing']}.", ""]
    return head + [
        "Definition: every job whose architecture uses the network between servers (ps-worker, "
        "allreduce-cluster) and that runs on eth-25g today gets eth-100g, everything else unchanged. Jobs on one "
        "server (1w1g, 1wng, allreduce-local) do not use the network and are out of scope.",
        "",
        f"{p['network_jobs']:,} jobs use the network, {p['other_network']:,} of them on another network than "
        f"eth-25g; {p['in_scope']:,} in scope. {_excluded_text(p)}",
        "",
        *_summary_table([("eth-25g -> eth-100g", p)]),
        "",
        f"![Speedup from 25 to 100 Gb/s Ethernet]({figures['ethernet']})",
        "",
    ]


def _md_gpu(p: dict, figures: dict) -> list[str]:
    ladders = "; ".join(
        f"{k} servers: " + " -> ".join(f"{g} ({i})" for g, i in rungs) for k, rungs in GPU_LADDERS.items()
    )
    lines = [
        "### 3.3 GPU generation upgrades",
        "",
        "Definition: every analysed job is evaluated on each GPU generation, P100 -> V100 -> A100 -> H100, "
        "with its architecture, GPU count, network and precision unchanged; jobs on PCIe servers (current "
        "intra link pcie*) move along PCIe cards with the intra link unchanged, jobs on NVLink servers along "
        f"SXM parts with each generation's NVLink ({ladders}). A step's speedup is the step time on the older "
        "generation over that on the newer; both configurations must be valid and fit in GPU memory.",
        "",
        f"{p['pcie_jobs']:,} jobs follow the PCIe ladder, {p['nvlink_jobs']:,} the NVLink ladder.",
        "",
    ]
    lines += _summary_table([(k.replace("->", " -> "), s) for k, s in p["steps"].items()])
    lines.append("")
    for k, s in p["steps"].items():
        lines.append(f"- {k.replace('->', ' -> ')}: {_excluded_text(s)}")
    lines += ["", f"![Speedup of GPU generation upgrades]({figures['gpu']})", ""]
    return lines


def _md_amp(p: dict, figures: dict) -> list[str]:
    head = ["### 3.4 fp32 -> mixed precision", ""]
    if not p.get("available", True):
        return head + [f"Not computed: the cube has no {p['missing']}.", ""]
    return head + [
        "Definition: every job that trains in fp32 today runs in amp-fp16 (FP16 activations, weights and "
        "gradients with an FP32 master copy, as apex O2 or Horovod's FP16 all-reduce; FLOP-bound ops at the GPU's "
        "FP16/tensor-core peak, memory-bound bytes halved, 2 gradient bytes kept and 2 sent per parameter instead "
        "of 4), everything else unchanged. GPUs without FP16 math (K80) are excluded. Under torch.cuda.amp or "
        "TensorFlow's AMP rewrite (precision amp-fp16-autocast) the gradients stay FP32: 4 bytes kept and sent.",
        "",
        f"{p['in_scope']:,} jobs in scope ({p['other_precision']:,} analysed jobs use another precision today). "
        f"{_excluded_text(p)}",
        "",
        *_summary_table([("fp32 -> amp-fp16", p)]),
        "",
        f"![Speedup from fp32 to mixed precision]({figures['amp']})",
        "",
    ]
