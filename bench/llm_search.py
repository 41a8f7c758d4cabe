"""The wide LLM layout search against Calculon: GPT-3 175B on 1,024 A100 (8-GPU NVLink domains,
HDR InfiniBand), in process and as a command.

    python bench/llm_search.py            # these lines alone (a minute or two on 2 cores)

In process: ``llm.search.best_layout`` over ``layouts.WIDE`` warm (compiled or cached), best of
several repeats, tables included.  As a command: ``paigrid predict --layout best`` of the same
job, warm (a first run fills the kernel cache and builds the precompiled kernels,
``paigrid.precompiled``), best of several, with the JIT kernels instead
(``PAIGRID_PRECOMPILED=0``) and the bare interpreter with numpy (the floor of any command)
measured in the same run; then ``paigrid predict`` of the best layout found (no search).  Each
line prints the layouts of the space searched per second and how many the pruning skipped
(memory, bound) and evaluated, per second too, beside Calculon's figures as recorded on this
project's 2-core box (caa4b11 with 2 processes: 484 s for GPT-3 175B, 150-520 executions per
second; recorded, not measured in this run).  Goals: in process under 48 ms (10^4 times
Calculon's 484 s), as a command under 0.48 s (10^3), a warm LLM ``predict`` under 0.3 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

#: Calculon's recorded figures (not measured here): seconds of its GPT-3 175B / 1,024 A100 search
#: and its executions (one layout on one system) per second
CALCULON_SECONDS = 484.0
CALCULON_RATE = (150.0, 520.0)
CALCULON_LAYOUTS = 174_840
GOAL_IN_PROCESS = CALCULON_SECONDS / 1e4
GOAL_COMMAND = CALCULON_SECONDS / 1e3
#: a warm ``paigrid predict`` of an LLM job [s]
GOAL_PREDICT = 0.3
#: the job and design of the comparison
JOB = dict(model="gpt3-175b", n_gpu=1024, gpu="A100-SXM4-80GB", domain=8, network="ib-hdr-200g")
COMMAND = [
    sys.executable,
    "-c",
    "from paigrid.cli import main; main()",
    "predict",
    "--workload",
    JOB["model"],
    "--gpu",
    JOB["gpu"],
    "--n-gpu",
    str(JOB["n_gpu"]),
    "--domain",
    str(JOB["domain"]),
    "--network",
    JOB["network"],
    "--layout",
    "best",
]
#: the command with numba's JIT kernels instead of the precompiled ones
JIT_ENV = {"PAIGRID_PRECOMPILED": "0"}


def _line(name: str, value: str, note: str) -> None:
    print(f"  {name:<34} {value:>16}   {note}")


def search_in_process(repeat: int = 7) -> dict:
    """The warm in-process search: seconds (best and median of ``repeat``), its counts and best layout."""
    from paigrid.inputs.catalog import Catalogues
    from paigrid.inputs.efficiency import defaults
    from paigrid.llm.models import model
    from paigrid.llm.parallelism import WIDE, layout_label
    from paigrid.llm.search import best_layout
    from paigrid.llm.tables import Hardware, LlmOptions, intra_link_for

    cats, eff, options = Catalogues.load(), defaults(), LlmOptions.defaults()
    m = model(JOB["model"])
    design = Hardware(JOB["gpu"], "amp-bf16", JOB["domain"], intra_link_for(cats, JOB["gpu"]), JOB["network"], 1.0)
    found = best_layout(m, JOB["n_gpu"], [design], cats, eff, options, WIDE)  # compiles or loads the cache
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        found = best_layout(m, JOB["n_gpu"], [design], cats, eff, options, WIDE)
        times.append(time.perf_counter() - started)
    times.sort()
    return {
        "seconds": times[0],
        "median": times[len(times) // 2],
        "counts": found.counts,
        "layout": layout_label(found.layouts[0]),
        "step": float(found.results[0, 0]),
    }


def _timed(command: list[str], repeat: int, env: dict | None = None) -> dict:
    """Wall seconds of ``command`` (best and median of ``repeat``) and its last stdout."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(
            command, capture_output=True, text=True, check=True, timeout=600, env={**os.environ, **(env or {})}
        )
        times.append(time.perf_counter() - started)
    times.sort()
    return {"seconds": times[0], "median": times[len(times) // 2], "output": done.stdout}


def kernels_status() -> str:
    """``paigrid.precompiled.status()`` as the command sees it (its kernel cache folder)."""
    code = (
        "from paigrid.cli import _default_numba_cache; _default_numba_cache(); "
        "from paigrid import precompiled as p; print(p.status())"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def search_command(repeat: int = 5) -> dict:
    """The warm command ``paigrid predict --layout best`` (precompiled kernels), the same with the
    JIT kernels, the interpreter with numpy alone, and ``paigrid predict`` of the layout found:
    wall seconds, best and median of ``repeat``, each variant in turn within a round."""
    subprocess.run(COMMAND, capture_output=True, text=True, check=True, timeout=600)  # fills the caches
    subprocess.run(COMMAND, capture_output=True, text=True, check=True, timeout=600, env=JIT_ENV)
    label = subprocess.run(COMMAND, capture_output=True, text=True, check=True).stdout.split(": ")[1].split()[0]
    fixed = [*COMMAND[:-1], label]
    floor = [sys.executable, "-c", "import numpy"]
    rounds = {"precompiled": [], "jit": [], "floor": [], "predict": []}
    for _ in range(repeat):
        rounds["precompiled"].append(_timed(COMMAND, 1))
        rounds["jit"].append(_timed(COMMAND, 1, JIT_ENV))
        rounds["floor"].append(_timed(floor, 1))
        rounds["predict"].append(_timed(fixed, 1))
    out = {}
    for name, runs in rounds.items():
        times = sorted(r["seconds"] for r in runs)
        out[name] = {"seconds": times[0], "median": times[len(times) // 2], "output": runs[-1]["output"]}
    out["label"] = label
    out["kernels"] = kernels_status()
    return out


def bench_llm_search() -> dict:
    """Print the lines with their goals; return the figures (``llm_search_*``, ``llm_*command*``)."""
    inproc = search_in_process()
    c = inproc["counts"]
    layouts = c["layouts"]
    print(
        f"LLM search: {JOB['model']} on {JOB['n_gpu']:,} x {JOB['gpu']} (domain {JOB['domain']}, {JOB['network']}), "
        f"wide space: {layouts:,} layouts (Calculon's space: {CALCULON_LAYOUTS:,}); load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    _line(
        "pruned: memory / bound / evaluated",
        f"{c['pruned_memory']:,} / {c['pruned_bound']:,} / {c['evaluated']:,}",
        f"best {inproc['layout']} at {inproc['step']:.3f} s a step",
    )
    met = "met" if inproc["seconds"] < GOAL_IN_PROCESS else "NOT met"
    _line(
        "in process",
        f"{inproc['seconds'] * 1e3:.1f} ms",
        f"median {inproc['median'] * 1e3:.1f} ms; {layouts / inproc['seconds']:,.0f} layouts/s searched, "
        f"{c['evaluated'] / inproc['seconds']:,.0f} evaluated/s, "
        f"{(c['pruned_memory'] + c['pruned_bound']) / inproc['seconds']:,.0f} pruned/s; "
        f"{CALCULON_SECONDS / inproc['seconds']:,.0f}x Calculon's {CALCULON_SECONDS:.0f} s "
        f"(goal < {GOAL_IN_PROCESS * 1e3:.1f} ms: {met})",
    )
    runs = search_command()
    command = runs["precompiled"]
    met = "met" if command["seconds"] < GOAL_COMMAND else "NOT met"
    pruned = c["pruned_memory"] + c["pruned_bound"]
    _line(
        "as a command",
        f"{command['seconds']:.3f} s",
        f"median {command['median']:.3f} s; {layouts / command['seconds']:,.0f} layouts/s searched, "
        f"{c['evaluated'] / command['seconds']:,.0f} evaluated/s, {pruned / command['seconds']:,.0f} pruned/s; "
        f"{CALCULON_SECONDS / command['seconds']:,.0f}x Calculon (goal < {GOAL_COMMAND:.2f} s: {met})",
    )
    _line("  its precompiled kernels", runs["kernels"].split(":")[0], runs["kernels"])
    jit = runs["jit"]
    _line(
        "  with the JIT kernels instead",
        f"{jit['seconds']:.3f} s",
        f"median {jit['median']:.3f} s (PAIGRID_PRECOMPILED=0: numba imported, its cached kernels loaded); "
        f"the precompiled command takes {command['seconds'] / jit['seconds']:.2f} of it",
    )
    floor = runs["floor"]
    _line(
        "  floor: python -c 'import numpy'",
        f"{floor['seconds']:.3f} s",
        f"median {floor['median']:.3f} s; the command spends {command['seconds'] - floor['seconds']:.3f} s beyond it",
    )
    predict = runs["predict"]
    met = "met" if predict["seconds"] < GOAL_PREDICT else "NOT met"
    _line(
        f"predict --layout {runs['label'][:14]}..",
        f"{predict['seconds']:.3f} s",
        f"median {predict['median']:.3f} s; one layout, no search (goal < {GOAL_PREDICT:.1f} s warm: {met})",
    )
    _line(
        "Calculon (recorded, not measured)",
        f"{CALCULON_SECONDS:.0f} s",
        f"{CALCULON_RATE[0]:.0f}-{CALCULON_RATE[1]:.0f} executions/s, caa4b11 with 2 processes, "
        f"{CALCULON_LAYOUTS:,} layouts (load average now {os.getloadavg()[0]:.2f})",
    )
    return {
        "llm_search_s": inproc["seconds"],
        "llm_search_command_s": command["seconds"],
        "llm_search_command_jit_s": jit["seconds"],
        "llm_command_floor_s": floor["seconds"],
        "llm_predict_command_s": predict["seconds"],
        "llm_search_layouts": layouts,
        "llm_search_evaluated": c["evaluated"],
        "llm_search_pruned": c["pruned_memory"] + c["pruned_bound"],
    }


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from installed import compile_paigrid  # bench/installed.py, beside this file

    print(compile_paigrid())
    bench_llm_search()
