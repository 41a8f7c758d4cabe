"""Write docs/llm.md, the LLM-scale training page, with its generated tables.

    python tools/llm_page.py            # (re)write docs/llm.md
    python tools/llm_page.py --check    # exit 1 if docs/llm.md is not what this script writes

The text is ``TEMPLATE`` below; the tables are computed here: the model catalogue's parameter
counts against the published ones, the validation of ``datasets/llm_public.csv`` (the same
computation as ``paigrid validate datasets/llm_public.csv``; nothing in the model is fitted to
these rows) and the best layouts of Llama-3 70B and 405B per cluster size on two cluster types
(``paigrid llm sweep`` + ``query``).  ``tests/test_docs.py`` checks that the page is current.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "llm.md"
TEMPLATE_PATH = ROOT / "tools" / "llm_page.md"
SUMMARY_N_GPU = (64, 256, 1024, 4096, 16384)
CLUSTERS = (("H100-SXM5-80GB", 8), ("B200", 72))
#: the networks of each cluster type in the summary (fabrics of datasets/llm_fabrics.csv, and
#: ib-ndr-400g: the same NICs as an ideal non-blocking network without SHARP)
CLUSTER_NETWORKS = {
    ("H100-SXM5-80GB", 8): ("dgx-h100-superpod", "ib-ndr-400g", "rail-roce-400g", "meta-roce-24k", "tor-roce-3to1"),
    ("B200", 72): ("gb200-nvl72-superpod",),
}
TOKENS = 15e12


def _table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def catalogue_table() -> str:
    """Parameters from the shape against the published count, per catalogue model."""
    from paigrid.llm import shapes as S
    from paigrid.llm.models import load_catalogue, model

    cat = load_catalogue()
    rows = []
    for name in cat.names:
        m, row = model(name, cat), cat.row(name)
        rows.append(
            {
                "model": name,
                "params from shape [B]": f"{S.parameters(m) / 1e9:.3f}",
                "published [B]": row["published_params_B"],
                "active [B]": f"{S.active_parameters(m) / 1e9:.2f}" if m.moe else "",
                "model GFLOP/token": f"{S.model_flops_per_token(m) / 1e9:.2f}",
            }
        )
    return _table(rows, list(rows[0]))


def validation_table() -> tuple[str, float]:
    """The llm rows' predicted against measured tokens/s, and the median |error|."""
    from paigrid.accuracy.measurements import load_measurements
    from paigrid.accuracy.validate import validate_observed
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.inputs.spec import Options

    cats = Catalogues.load()
    rows = load_measurements(ROOT / "datasets" / "llm_public.csv", cats)
    result = validate_observed(rows, defaults(), Options(), cats)
    out = [
        {
            "id": r["id"],
            "model": r["model"].split(" (Megatron")[0],
            "gpu": r["gpu"],
            "GPUs": r["n_gpu"],
            "layout": r["arch"],
            "measured tokens/s": f"{r['measured']:,.0f}",
            "predicted tokens/s": f"{r['predicted']:,.0f}",
            "error": f"{100 * r['error']:+.1f}%",
        }
        for r in result["rows"]
    ]
    median = statistics.median(abs(r["error"]) for r in result["rows"])
    return _table(out, list(out[0])), median


def summary_tables() -> str:
    """Best layout per cluster size and network of Llama-3 70B and 405B, with the time and cost
    to train TOKENS tokens: H100 servers (NVLink domain 8) on every fabric of
    datasets/llm_fabrics.csv but the NVL72 one and on an ideal NDR InfiniBand network; B200 in
    NVL72 racks on the GB200 NVL72 SuperPOD fabric."""
    from paigrid.llm.fabrics import load_fabrics
    from paigrid.llm.query import query_best
    from paigrid.llm.sweep import alias_spec
    from paigrid.orchestration import run_sweep

    fabrics = load_fabrics().names
    names = ["llama3-70b", "llama3-405b"]
    spec = alias_spec(  # paigrid llm sweep: the per-design bests of the unified sweep
        names,
        n_gpu=list(SUMMARY_N_GPU),
        gpus=[g for g, _ in CLUSTERS],
        domains=sorted({d for _, d in CLUSTERS}),
        networks=[*fabrics, "ib-ndr-400g"],
        nics_per_gpu=1.0,
        precision="amp-bf16",
    )
    parts = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "llm.h5"
        run_sweep(spec, path, reduce_only=True, progress=False)
        for name in names:
            table = []
            for (gpu, domain), networks in CLUSTER_NETWORKS.items():
                rows = query_best(
                    path,
                    name,
                    None,
                    {"gpu": [gpu], "domain": [domain], "network": list(networks)},
                    "time",
                    "network",
                    TOKENS,
                )
                for r in sorted(rows, key=lambda r: (r["n_gpu"], networks.index(r["network"]))):
                    ok = "mfu" in r
                    table.append(
                        {
                            "GPUs": f"{r['n_gpu']:,} {gpu.split('-')[0]}",
                            "network": r["network"],
                            "layout": r["layout"],
                            "MFU": f"{r['mfu']:.2f}" if ok else "-",
                            "step [s]": f"{r['step_time']:.2f}" if ok else "-",
                            "DP exposed [s]": f"{r['dp_comm_exposed']:.2f}" if ok else "-",
                            "GiB/GPU": f"{r['memory_per_gpu_GiB']:.0f}" if ok else "-",
                            "days for 15T tokens": f"{r['train_days']:.0f}" if ok else "-",
                            "cost [M USD]": f"{r['train_cost'] / 1e6:.0f}" if ok else "-",
                        }
                    )
            parts.append(f"**{name}**\n\n{_table(table, list(table[0]))}")
    return "\n\n".join(parts)


def fabric_table() -> str:
    """The fabric catalogue's rows (without their sources, which follow the table)."""
    from paigrid.llm.fabrics import load_fabrics

    cat = load_fabrics()
    rows = [
        {
            "fabric": r["name"],
            "topology": r["topology"],
            "NIC [GB/s]": r["nic_GB_per_s"],
            "tiers": r["tiers"],
            "tier-1 group [GPUs]": r["tier1_GPUs"],
            "tier-2 group [GPUs]": r["tier2_GPUs"],
            "oversubscription": f"{r['oversubscription_tier1_ratio']}:1, {r['oversubscription_tier2_ratio']}:1",
            "hop [us]": r["hop_latency_us"],
            "SHARP": r["sharp"],
            "NVLS": r["nvls"],
        }
        for r in cat.rows
    ]
    sources = "\n".join(f"- `{r['name']}`: {r['source']}" for r in cat.rows)
    return f"{_table(rows, list(rows[0]))}\n\n{sources}"


def network_table() -> str:
    """One Llama-3 70B layout on 4,096 H100 on every network, with and without ZeRO and
    in-network reduction: the data-parallel time each fabric gives."""
    import dataclasses

    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.llm.evaluate import predict
    from paigrid.llm.fabrics import load_fabrics
    from paigrid.llm.models import model
    from paigrid.llm.parallelism import Layout
    from paigrid.llm.tables import Hardware, LlmOptions, intra_link_for

    cats, eff = Catalogues.load(), defaults()
    options = LlmOptions.defaults()
    rings = dataclasses.replace(options, in_network_reduction=False)
    m = model("llama3-70b")
    gpu = "H100-SXM5-80GB"
    rows = []
    for net in ["ib-ndr-400g", *[n for n in load_fabrics().names if n != "gb200-nvl72-superpod"]]:
        hw = Hardware(gpu, "amp-bf16", 8, intra_link_for(cats, gpu), net, 1.0)
        r = {
            z: predict(m, Layout(tp=8, pp=4, dp=128, zero=z, recompute="selective"), hw, cats, eff, options)
            for z in (0, 1)
        }
        plain = predict(m, Layout(tp=8, pp=4, dp=128, zero=0, recompute="selective"), hw, cats, eff, rings)
        rows.append(
            {
                "network": net,
                "step, ZeRO-1 [s]": f"{r[1]['step_time']:.3f}",
                "DP comm, ZeRO-1 [s]": f"{r[1]['dp_comm']:.3f}",
                "step, ZeRO-0 [s]": f"{r[0]['step_time']:.3f}",
                "DP comm, ZeRO-0 [s]": f"{r[0]['dp_comm']:.3f}",
                "DP comm, ZeRO-0, rings only [s]": f"{plain['dp_comm']:.3f}",
                "PP comm [s]": f"{r[1]['pp_comm']:.3f}",
            }
        )
    return _table(rows, list(rows[0]))


def search_counts() -> dict[str, str]:
    """The layouts of the wide search for GPT-3 175B on 1,024 A100 (8-GPU NVLink domains, HDR
    InfiniBand, amp-bf16) and how many were pruned by memory, by the bound and evaluated, as
    ``paigrid predict --layout best`` of that job counts them (numbers written with commas)."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.llm.models import model
    from paigrid.llm.parallelism import WIDE
    from paigrid.llm.search import best_layout
    from paigrid.llm.tables import Hardware, LlmOptions, intra_link_for

    cats = Catalogues.load()
    design = Hardware("A100-SXM4-80GB", "amp-bf16", 8, intra_link_for(cats, "A100-SXM4-80GB"), "ib-hdr-200g", 1.0)
    found = best_layout(model("gpt3-175b"), 1024, [design], cats, defaults(), LlmOptions.defaults(), WIDE)
    names = ("layouts", "pruned_memory", "pruned_bound", "evaluated")
    return {name: f"{int(found.counts[name]):,}" for name in names}


def render() -> str:
    """The page's text."""
    table, median = validation_table()
    return TEMPLATE_PATH.read_text(encoding="utf-8").format(
        **search_counts(),
        catalogue=catalogue_table(),
        validation=table,
        median=f"{100 * median:.1f}%",
        summary=summary_tables(),
        fabrics=fabric_table(),
        networks=network_table(),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            print("docs/llm.md is not current: run python tools/llm_page.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
