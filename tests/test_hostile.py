"""Hostile inputs, table-driven: every command and every kind of file it reads (spec TOML, each
catalogue CSV, workloads and population CSV, measurements CSV, calibration TOML, trace tables,
--where filters, options, paths) fed something wrong.  Each case must end with a non-zero exit
and one sentence on stderr ("paigrid: error: ...", no traceback, no exception class name, naming
what is wrong), print nothing on stdout, and leave every file that existed before exactly as it
was (nothing created, removed or replaced either).

Cases run in process (typer's CliRunner) against a shared world of valid files; each case adds
its own hostile files in a fresh folder.  Failures that need a real process (a closed pipe,
signals, concurrent writers, a full disk) are in ``test_faults.py``.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hostile_helpers import (
    TRACE,
    assert_one_sentence,
    builtin,
    csv_rows,
    csv_text,
    drop_column,
    edit_cell,
    invoke,
    make_world,
    snapshot,
    trace_text,
)

W, T = "{w}", "{t}"
GPUS, LINKS, WORKLOADS = builtin("gpus.csv"), builtin("links.csv"), builtin("workloads.csv")
OPTIMIZERS, PRECISIONS = builtin("optimizers.csv"), builtin("precisions.csv")
MEASUREMENTS = builtin("measurements_public.csv")
PREDICT = [
    "predict",
    "--workload",
    "resnet50",
    "--arch",
    "allreduce-cluster",
    "--gpu",
    "V100",
    "--n-gpu",
    "16",
    "--intra",
    "nvlink2-hcm",
    "--network",
    "eth-25g",
    "--precision",
    "fp32",
]


@dataclass
class Case:
    id: str
    args: list[str]
    files: dict = field(default_factory=dict)  # name in the case folder -> text, bytes or a special
    expect: tuple[str, ...] = ()  # fragments the sentence must hold
    root_only: bool = False  # needs root (device nodes)
    user_only: bool = False  # a permission case: root may read and write anything


CASES: list[Case] = []


def case(id, args, files=None, expect=(), root_only=False, user_only=False):
    CASES.append(
        Case(id, list(args), files or {}, (expect,) if isinstance(expect, str) else tuple(expect), root_only, user_only)
    )


def sweep_spec(id, text, expect):
    """A spec TOML given to ``sweep``."""
    case(f"spec-{id}", ["sweep", f"{T}/s.toml", "--out", f"{T}/o.h5", "-q"], {"s.toml": text}, expect)


def population_csv(id, text, expect):
    case(
        f"population-{id}",
        ["sweep", f"{W}/spec.toml", "--workloads", f"{T}/p.csv", "--out", f"{T}/o.h5", "-q"],
        {"p.csv": text},
        expect,
    )


def catalogue(kind, id, text, expect):
    """A user catalogue of ``kind`` given to predict (and a few to sweep)."""
    case(f"{kind}-{id}", [*PREDICT, "--catalogue", f"{kind}={T}/c.csv"], {"c.csv": text}, expect)


def calibration(id, text, expect, command="predict"):
    args = {
        "predict": [*PREDICT, "--calibration", f"{T}/c.toml"],
        "sweep": ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "-q", "--calibration", f"{T}/c.toml"],
        "validate": ["validate", f"{W}/measurements.csv", "--calibration", f"{T}/c.toml"],
    }[command]
    case(f"calibration-{command}-{id}", args, {"c.toml": text}, expect)


def measurements(id, text, expect, command="validate"):
    args = ["validate", f"{T}/m.csv"] if command == "validate" else ["calibrate", f"{T}/m.csv", "--out", f"{T}/c.toml"]
    case(f"measurements-{command}-{id}", args, {"m.csv": text}, expect)


def trace(id, table, rows, expect):
    files = {f"tr/{name}": trace_text(name) for name in TRACE}
    if rows is None:
        del files[f"tr/{table}"]
    else:
        files[f"tr/{table}"] = rows if isinstance(rows, (str, bytes)) else csv_text(rows)
    case(f"trace-{id}", ["trace", "import", f"{T}/tr", "--out", f"{T}/p.csv"], files, expect)


def where(id, items, expect, cube="cube.h5", extra=()):
    args = ["query", f"{W}/{cube}", "--best-arch", *extra]
    for item in items:
        args += ["--where", item]
    case(f"where-{id}", args, {}, expect)


# --- spec TOML ------------------------------------------------------------------------------------
sweep_spec("invalid-toml", "[grid\narch = 1", "not valid TOML")
sweep_spec("binary", b"\x00\x01\x02binary", "not a text file")
sweep_spec("not-utf8", b'workloads = ["\xff\xfe"]\n', "not UTF-8")
sweep_spec("deep-nesting", "x = " + "[" * 5000 + "]" * 5000, "s.toml")
sweep_spec("unknown-key", "colour = 1\n", "unknown key")
sweep_spec("grid-not-table", "grid = 3\n", "[grid] must be a table")
sweep_spec("unknown-dimension", "[grid]\nspeed = [1]\n", "unknown grid dimension")
sweep_spec("arch-unknown", '[grid]\narch = ["mesh"]\n', "unknown architecture")
sweep_spec("arch-twice", '[grid]\narch = ["1w1g", "1w1g"]\n', "twice")
sweep_spec("arch-number", "[grid]\narch = [1]\n", "non-empty list of names")
sweep_spec("arch-empty", "[grid]\narch = []\n", "non-empty list")
sweep_spec("gpu-unknown", '[grid]\ngpu = ["V1000"]\n', "V1000")
sweep_spec("gpu-alias-twice", '[grid]\ngpu = ["V100", "V100-SXM2-16GB"]\n', "twice")
sweep_spec("intra-unknown", '[grid]\nintra = ["pcie9"]\n', "pcie9")
sweep_spec("intra-is-network", '[grid]\nintra = ["eth-25g"]\n', "not an intra-server link")
sweep_spec("network-is-intra", '[grid]\nnetwork = ["pcie3"]\n', "not a network")
sweep_spec("precision-unknown", '[grid]\nprecision = ["fp23"]\n', "fp23")
sweep_spec("n-gpu-zero", "[grid]\nn_gpu = [0]\n", "n_gpu")
sweep_spec("n-gpu-negative", "[grid]\nn_gpu = [-8]\n", "n_gpu")
sweep_spec("n-gpu-float", "[grid]\nn_gpu = [1.5]\n", "n_gpu")
sweep_spec("n-gpu-bool", "[grid]\nn_gpu = [true]\n", "n_gpu")
sweep_spec("n-gpu-beyond-int32", "[grid]\nn_gpu = [1, 4294967296]\n", "2147483647")
sweep_spec("n-gpu-int64-max", "[grid]\nn_gpu = [9223372036854775807]\n", "2147483647")
sweep_spec("n-gpu-twice", "[grid]\nn_gpu = [8, 8]\n", "twice")
sweep_spec("n-gpu-empty", "[grid]\nn_gpu = []\n", "n_gpu")
sweep_spec("n-gpu-word", '[grid]\nn_gpu = "all"\n', "current")
sweep_spec("n-gpu-current-without-current", '[grid]\nn_gpu = "current"\n', "current configuration")
sweep_spec("workloads-number", "workloads = 3\n", "workloads")
sweep_spec("workloads-empty", "workloads = []\n", "workloads")
sweep_spec("workloads-unknown", 'workloads = ["resnet5O"]\n', "resnet5O")
sweep_spec("workloads-twice", 'workloads = ["resnet50", "ResNet-50"]\n', "twice")
sweep_spec("workloads-missing-csv", 'workloads = "nowhere.csv"\n', "does not exist")
sweep_spec("options-not-table", "options = 1\n", "[options] must be a table")
sweep_spec("option-unknown", "[options]\nwarp = 9\n", "unknown option")
sweep_spec("overlap-above-one", "[options]\noverlap = 2.0\n", "overlap")
sweep_spec("overlap-negative", "[options]\noverlap = -0.1\n", "overlap")
sweep_spec("overlap-nan", "[options]\noverlap = nan\n", "overlap")
sweep_spec("grad-accum-zero", "[options]\ngrad_accum_steps = 0\n", "grad_accum_steps")
sweep_spec("grad-accum-fraction", "[options]\ngrad_accum_steps = 1.5\n", "grad_accum_steps")
sweep_spec("grad-accum-inf", "[options]\ngrad_accum_steps = inf\n", "grad_accum_steps")
sweep_spec("gpus-per-node-text", '[options]\ngpus_per_node = "8"\n', "gpus_per_node")
sweep_spec("topology-text", '[options]\ntopology_aware = "yes"\n', "topology_aware")
sweep_spec("collective-unknown", '[options]\ncollective = "star"\n', "collective")
sweep_spec("input-rate-zero", "[options]\ninput_rate_samples_per_s = 0\n", "input_rate_samples_per_s")
sweep_spec("ps-count-negative", "[options]\nps_count = -1\n", "ps_count")
sweep_spec("catalogues-number", "catalogues = 3\n", "[catalogues] must be a table")
sweep_spec("catalogue-number", "[catalogues]\ngpus = 3\n", "catalogues.gpus")
sweep_spec("catalogue-unknown-kind", '[catalogues]\ncpus = "c.csv"\n', "cpus")
sweep_spec("catalogue-missing-file", '[catalogues]\ngpus = "nowhere.csv"\n', "does not exist")
sweep_spec("jobs-per-block-zero", "jobs_per_block = 0\n", "jobs_per_block")
sweep_spec("jobs-per-block-text", 'jobs_per_block = "4"\n', "jobs_per_block")
sweep_spec("jobs-per-block-bool", "jobs_per_block = true\n", "jobs_per_block")
case("spec-is-a-folder", ["sweep", f"{T}/d", "--out", f"{T}/o.h5"], {"d": ("dir",)}, "folder")
case("spec-missing", ["sweep", f"{T}/none.toml", "--out", f"{T}/o.h5"], {}, "does not exist")
case("spec-is-the-cube", ["sweep", f"{W}/cube.h5", "--out", f"{T}/o.h5"], {}, "cube.h5")

# --- catalogues (each kind) -----------------------------------------------------------------------
for kind, text, column in (
    ("gpus", GPUS, "hbm_GB_per_s"),
    ("links", LINKS, "latency_us"),
    ("workloads", WORKLOADS, "params_M"),
    ("optimizers", OPTIMIZERS, "state_bytes_per_param"),
    ("precisions", PRECISIONS, "activation_bytes"),
):
    catalogue(kind, "missing-column", drop_column(text, column), column)
    catalogue(kind, "not-a-number", edit_cell(text, column, "fast"), "not a number")
    catalogue(kind, "nan", edit_cell(text, column, "nan"), column)
    catalogue(kind, "inf", edit_cell(text, column, "inf"), column)
    catalogue(kind, "negative", edit_cell(text, column, "-1"), column)
    catalogue(kind, "empty-cell", edit_cell(text, column, ""), "empty")
    catalogue(kind, "header-only", text.splitlines()[0] + "\n", "no rows")
    catalogue(kind, "empty-file", "", "empty")
    catalogue(kind, "binary", b"name\x00\x01", "not a text file")
    catalogue(kind, "ragged-row", text.rstrip("\n") + "\nextra,row\n", "fields")
    catalogue(kind, "duplicate-name", text.rstrip("\n") + "\n" + text.splitlines()[1] + "\n", "two rows")
    catalogue(kind, "name-column-missing", drop_column(text, "name"), "name")
catalogue("gpus", "duplicate-alias", edit_cell(GPUS, "aliases", "V100", row=2), "two rows")
catalogue("gpus", "pcie-gen-fraction", edit_cell(GPUS, "pcie_gen", "3.5"), "pcie_gen")
catalogue("gpus", "pcie-gen-zero", edit_cell(GPUS, "pcie_gen", "0"), "pcie_gen")
catalogue("gpus", "memory-zero", edit_cell(GPUS, "memory_GB", "0"), "memory_GB")
catalogue("gpus", "price-negative", edit_cell(GPUS, "price_USD_per_gpu_hour", "-1"), "price_USD_per_gpu_hour")
catalogue("gpus", "peak-negative", edit_cell(GPUS, "fp32_TFLOP_per_s", "-15"), "fp32_TFLOP_per_s")
catalogue("gpus", "duplicate-column", csv_text([r + [r[2]] for r in csv_rows(GPUS)]), "twice")
catalogue("links", "efficiency-five", edit_cell(LINKS, "efficiency", "5", row=12), "efficiency")
catalogue("links", "efficiency-zero", edit_cell(LINKS, "efficiency", "0", row=12), "efficiency")
catalogue("links", "latency-hugely-negative", edit_cell(LINKS, "latency_us", "-1e9", row=12), "latency_us")
catalogue("links", "scope-typo", edit_cell(LINKS, "scope", "intr", row=5), "scope")
catalogue("links", "kind-unknown", edit_cell(LINKS, "kind", "warp", row=5), "kind")
catalogue("links", "kind-none-inside", edit_cell(LINKS, "kind", "none", row=5), "kind")
catalogue("links", "no-bandwidth", edit_cell(LINKS, "nominal_GB_per_s", "0", row=12), "nominal_GB_per_s")
catalogue("links", "fits-unknown-gpu", edit_cell(LINKS, "fits_gpus", "V100-SXM9", row=5), "V100-SXM9")
catalogue("links", "fits-pcie-word", edit_cell(LINKS, "fits_gpus", "pcie>=three"), "fits_gpus")
catalogue("links", "fits-empty-intra", edit_cell(LINKS, "fits_gpus", "", row=5), "fits_gpus")
catalogue("workloads", "fwd-flops-zero", edit_cell(WORKLOADS, "fwd_GFLOP_per_sample", "0"), "fwd_GFLOP_per_sample")
catalogue("workloads", "membound-negative", edit_cell(WORKLOADS, "membound_MB_per_sample", "-1"), "membound")
catalogue("workloads", "batch-zero", edit_cell(WORKLOADS, "default_batch", "0"), "default_batch")
catalogue("workloads", "optimizer-unknown", edit_cell(WORKLOADS, "optimizer", "adamx"), "adamx")
catalogue("workloads", "tokens-zero", edit_cell(WORKLOADS, "tokens_per_sample", "0"), "tokens_per_sample")
catalogue("workloads", "tokens-negative", edit_cell(WORKLOADS, "tokens_per_sample", "-128"), "tokens_per_sample")
catalogue("precisions", "activation-bytes-negative", edit_cell(PRECISIONS, "activation_bytes", "-2"), "activation")
catalogue("precisions", "peak-column-missing", edit_cell(PRECISIONS, "peak_column", "fp64_TFLOP_per_s"), "fp64")
catalogue("precisions", "comm-bytes-zero", edit_cell(PRECISIONS, "comm_bytes_per_param", "0"), "comm_bytes")
catalogue("optimizers", "state-huge", edit_cell(OPTIMIZERS, "state_bytes_per_param", "1e9"), "state_bytes")
case(
    "catalogue-in-spec-bad",
    ["sweep", f"{T}/s.toml", "--out", f"{T}/o.h5", "-q"],
    {
        "s.toml": 'workloads = ["resnet50"]\n[catalogues]\nlinks = "l.csv"\n',
        "l.csv": edit_cell(LINKS, "efficiency", "5", row=12),
    },
    "efficiency",
)
case("catalogue-option-no-equals", [*PREDICT, "--catalogue", "gpus"], {}, "KIND=PATH")
case("catalogue-option-unknown-kind", [*PREDICT, "--catalogue", f"cpus={W}/gpus.csv"], {}, "KIND=PATH")
case("catalogue-is-a-folder", [*PREDICT, "--catalogue", f"gpus={T}/d"], {"d": ("dir",)}, "folder")

# --- workloads and population CSV -----------------------------------------------------------------
POP_TEXT = (
    "job,model,batch,gpus_per_node,current_arch,current_gpu,current_n_gpu,current_intra,current_network,"
    "current_precision,source\n"
    "j1,resnet50,,8,ps-worker,V100,16,pcie3,eth-25g,fp32,test\n"
    "j2,bert,32,8,1w1g,P100,1,pcie3,eth-25g,fp32,test\n"
)
population_csv("job-twice", POP_TEXT.replace("j2,", "j1,"), "unique")
population_csv("job-empty", POP_TEXT.replace("j2,", ","), "job names")
population_csv("model-unknown", POP_TEXT.replace("j2,bert", "j2,bart"), "bart")
population_csv("batch-zero", edit_cell(POP_TEXT, "batch", "0", row=2), "batch")
population_csv("batch-inf", edit_cell(POP_TEXT, "batch", "inf", row=2), "batch")
population_csv("batch-word", edit_cell(POP_TEXT, "batch", "many", row=2), "batch")
population_csv("n-gpu-zero", edit_cell(POP_TEXT, "current_n_gpu", "0"), "current_n_gpu")
population_csv("n-gpu-beyond-int32", edit_cell(POP_TEXT, "current_n_gpu", "99999999999"), "2147483647")
population_csv("n-gpu-fraction", edit_cell(POP_TEXT, "current_n_gpu", "1.5"), "current_n_gpu")
population_csv("n-gpu-inf", edit_cell(POP_TEXT, "current_n_gpu", "inf"), "current_n_gpu")
population_csv("current-partial", edit_cell(POP_TEXT, "current_gpu", ""), "current_gpu")
population_csv("current-arch-unknown", edit_cell(POP_TEXT, "current_arch", "mesh"), "mesh")
population_csv("current-gpu-unknown", edit_cell(POP_TEXT, "current_gpu", "Z80"), "Z80")
population_csv("current-intra-network", edit_cell(POP_TEXT, "current_intra", "eth-25g"), "intra-server")
population_csv("current-precision-unknown", edit_cell(POP_TEXT, "current_precision", "fp4"), "fp4")
population_csv("gpus-per-node-zero", edit_cell(POP_TEXT, "gpus_per_node", "0"), "gpus_per_node")
population_csv("gpus-per-node-inf", edit_cell(POP_TEXT, "gpus_per_node", "inf"), "gpus_per_node")
population_csv(
    "overlap-three", POP_TEXT.replace(",source\n", ",source,overlap\n").replace(",test\n", ",test,3\n"), "overlap"
)
population_csv("model-without-job", drop_column(POP_TEXT, "job"), "job column")
population_csv("empty", "", "empty")
population_csv("header-only", POP_TEXT.splitlines()[0] + "\n", "no rows")
population_csv("ragged", POP_TEXT + "j3,resnet50\n", "fields")
population_csv("not-utf8", POP_TEXT.encode() + b"j3,\xff\xfe,,8\n", "not UTF-8")
population_csv("nul-bytes", POP_TEXT.encode() + b"\x00\x00", "not a text file")
population_csv("catalogue-schema-bad", edit_cell(WORKLOADS, "params_M", "-3"), "params_M")
case(
    "population-current-missing-for-study",
    ["sweep", f"{W}/study.toml", "--workloads", f"{T}/p.csv", "--out", f"{T}/o.h5", "-q"],
    {"p.csv": POP_TEXT + "j3,resnet50,,8,,,,,,,test\n"},
    "current configuration",
)
case(
    "workloads-names-unknown",
    ["sweep", f"{W}/spec.toml", "--workloads", "resnet50,nosuchnet", "--out", f"{T}/o.h5", "-q"],
    {},
    "nosuchnet",
)
case(
    "workloads-folder",
    ["sweep", f"{W}/spec.toml", "--workloads", f"{T}/d.csv", "--out", f"{T}/o.h5", "-q"],
    {"d.csv": ("dir",)},
    "folder",
)

# --- measurements CSV (validate, calibrate) -------------------------------------------------------
measurements("missing-column", drop_column(MEASUREMENTS, "throughput"), "throughput")
measurements("throughput-word", edit_cell(MEASUREMENTS, "throughput", "fast"), "throughput")
measurements("throughput-negative", edit_cell(MEASUREMENTS, "throughput", "-938"), "throughput")
measurements("throughput-inf", edit_cell(MEASUREMENTS, "throughput", "inf"), "throughput")
measurements("gpu-unknown", edit_cell(MEASUREMENTS, "gpu", "A1000"), "A1000")
measurements("model-unknown", edit_cell(MEASUREMENTS, "model", "AlexNet-9"), "AlexNet-9")
measurements("arch-unknown", edit_cell(MEASUREMENTS, "arch", "mesh"), "mesh")
measurements("nodes-zero", edit_cell(MEASUREMENTS, "nodes", "0"), "nodes")
measurements(
    "local-across-servers",
    edit_cell(edit_cell(MEASUREMENTS, "nodes", "2", row=2), "network", "ib-hdr-200g", row=2),
    "line 3",
)
measurements("unit-unknown", edit_cell(MEASUREMENTS, "throughput_unit", "furlongs/s"), "furlongs")
measurements("id-twice", edit_cell(MEASUREMENTS, "id", "pt-rn50-01", row=2), "twice")
measurements("empty", "", "empty")
measurements("header-only", MEASUREMENTS.splitlines()[0] + "\n", "no rows")
measurements("binary", b"\x89PNG\x00\x00", "not a text file")
measurements("gpu-unknown", edit_cell(MEASUREMENTS, "gpu", "A1000"), "A1000", command="calibrate")
case("measurements-rows-where-bad", ["validate", f"{W}/measurements.csv", "--rows-where", "gpu"], {}, "rows-where")
case(
    "measurements-rows-where-column", ["validate", f"{W}/measurements.csv", "--rows-where", "colour=red"], {}, "colour"
)
case(
    "measurements-rows-where-none",
    ["validate", f"{W}/measurements.csv", "--rows-where", "gpu=Z80*"],
    {},
    "no measurement row",
)
LLM_SWEEP = [
    "llm",
    "sweep",
    "--models",
    "llama3-8b",
    "--n-gpu",
    "8",
    "--gpu",
    "H100",
    "--domain",
    "8",
    "--network",
    "ib-ndr-400g",
    "-q",
]
case("llm-sweep-out-folder", [*LLM_SWEEP, "-o", T], {}, "folder")
case("llm-sweep-model-unknown", [*LLM_SWEEP[:2], "-o", f"{T}/l.h5", "--models", "llama9"], {}, "llama9")
case("llm-sweep-n-gpu-word", [*LLM_SWEEP, "-o", f"{T}/l.h5", "--n-gpu", "8,x"], {}, "whole numbers")
case("llm-sweep-network-intra", [*LLM_SWEEP, "-o", f"{T}/l.h5", "--network", "nvlink5"], {}, "not a network")
case("llm-query-a-cube", ["llm", "query", f"{W}/cube.h5", "--model", "llama3-8b"], {}, "not an LLM sweep file")
case("llm-query-missing", ["llm", "query", f"{T}/none.h5", "--model", "llama3-8b"], {}, "cannot read")
case(
    "llm-predict-recompute",
    ["llm", "predict", "--model", "llama3-8b", "--gpu", "H100", "--n-gpu", "8", "--recompute", "partial"],
    {},
    "recompute must be one of",
)
case(
    "llm-predict-memory",
    ["llm", "predict", "--model", "llama3-70b", "--gpu", "H100", "--n-gpu", "8"],
    {},
    "GiB per GPU",
)
case(
    "llm-predict-option",
    ["llm", "predict", "--model", "llama3-8b", "--gpu", "H100", "--n-gpu", "8", "--option", "weight_bytes=-1"],
    {},
    "weight_bytes",
)
case(
    "llm-calibrate-one-row",
    [
        "calibrate",
        str(Path(__file__).resolve().parent.parent / "datasets" / "llm_public.csv"),
        "--out",
        f"{T}/c.toml",
        "--rows-where",
        "id=meg20-01",
    ],
    {},
    "at least two llm rows",
)
case(
    "calibrate-fit-unknown", ["calibrate", f"{W}/measurements.csv", "--out", f"{T}/c.toml", "--fit", "warp"], {}, "warp"
)
case(
    "calibrate-out-folder-missing",
    ["calibrate", f"{W}/measurements.csv", "--out", f"{T}/no/c.toml"],
    {},
    "does not exist",
)
case("validate-missing", ["validate", f"{T}/none.csv"], {}, "does not exist")

# --- calibration TOML ------------------------------------------------------------------------------
calibration("invalid-toml", "[flop_efficiency\n", "not valid TOML")
calibration("unknown-table", "[speed]\nx = 1\n", "unknown table")
calibration("table-is-number", "flop_efficiency = 3\n", "must be a table")
calibration("options-is-number", "options = 3\n", "must be a table")
calibration("flop-precision-typo", "[flop_efficiency]\nfp23 = 0.5\n", "fp23")
calibration("flop-gpu-typo", '[flop_efficiency]\n"A100-SXM4-80GX/tf32" = 0.5\n', "A100-SXM4-80GX")
calibration("flop-gpu-precision-typo", '[flop_efficiency]\n"V100/fp33" = 0.5\n', "fp33")
calibration("flop-alias-twice", '[flop_efficiency]\n"V100/fp32" = 0.5\n"V100-SXM2-16GB/fp32" = 0.6\n', "both name")
calibration("link-kind-typo", "[link_efficiency]\nnvswich = 0.5\n", "nvswich")
calibration("link-name-typo", '[link_efficiency]\n"eth-25gb" = 0.5\n', "eth-25gb")
calibration("memory-gpu-typo", '[memory_efficiency]\n"V100X" = 0.5\n', "V100X")
calibration("value-zero", "[flop_efficiency]\nfp32 = 0\n", "fraction")
calibration("value-above-one", "[flop_efficiency]\nfp32 = 1.5\n", "fraction")
calibration("value-text", '[flop_efficiency]\nfp32 = "high"\n', "fraction")
calibration("value-bool", "[link_efficiency]\npcie = true\n", "fraction")
calibration("value-nan", "[memory_efficiency]\ndefault = nan\n", "fraction")
calibration("option-unknown", "[options]\nwarp = 9\n", "unknown option")
calibration("option-overlap-five", "[options]\noverlap = 5.0\n", "overlap")
calibration("option-inf", "[options]\ngrad_accum_steps = inf\n", "finite")
calibration("binary", b"\x00\x00\x00", "not a text file")
calibration("class-generation-typo", '[class_efficiency]\n"gemm_conv/Hoper/amp" = 0.5\n', "Hoper")
calibration("class-precision-typo", '[class_efficiency]\n"gemm_conv/Hopper/fp23" = 0.5\n', "fp23")
calibration("class-unknown", '[class_efficiency]\n"gemm/Hopper/amp" = 0.5\n', "gemm/Hopper/amp")
calibration("class-is-number", "class_efficiency = 0.5\n", "must be a table")
calibration("link-kind-typo", "[link_efficiency]\nnvswich = 0.5\n", "nvswich", command="sweep")
calibration("alias-typo", '[flop_efficiency]\n"A100-SXM4-80GX/tf32" = 0.5\n', "A100-SXM4-80GX", command="sweep")
calibration("unknown-table", "[speed]\nx = 1\n", "unknown table", command="validate")
calibration("flop-precision-typo", "[flop_efficiency]\nfp23 = 0.5\n", "fp23", command="validate")
case("calibration-missing", [*PREDICT, "--calibration", f"{T}/none.toml"], {}, "does not exist")
case(
    "calibration-query-missing",
    ["query", f"{W}/cube.h5", "--best-arch", "--calibration", f"{T}/none.toml"],
    {},
    "does not exist",
)
case(
    "calibration-query-other",
    ["query", f"{W}/cube.h5", "--best-arch", "--calibration", f"{W}/calib.toml"],
    {},
    "default efficiencies",
)

# --- trace tables ------------------------------------------------------------------------------------
case("trace-folder-missing", ["trace", "import", f"{T}/none", "--out", f"{T}/p.csv"], {}, "does not exist")
case("trace-folder-is-file", ["trace", "import", f"{W}/text.txt", "--out", f"{T}/p.csv"], {}, "does not exist")
trace("table-missing", "pai_task_table.csv", None, "pai_task_table.csv")
trace("wrong-column-count", "pai_job_table.csv", [["j1", "i1", "u1"]], "line 1")
trace(
    "plan-gpu-word",
    "pai_task_table.csv",
    [["j1", "worker", "2", "Terminated", "100", "200", "600", "29.3", "lots", "V100"]],
    "plan_gpu",
)
trace(
    "inst-num-inf",
    "pai_task_table.csv",
    [["j1", "worker", "inf", "Terminated", "100", "200", "600", "29.3", "100", "V100"]],
    "inst_num",
)
trace(
    "inst-num-huge",
    "pai_task_table.csv",
    [["j1", "worker", "1e400", "Terminated", "100", "200", "600", "29.3", "100", "V100"]],
    "inst_num",
)
trace(
    "inst-num-negative",
    "pai_task_table.csv",
    [["j1", "worker", "-2", "Terminated", "100", "200", "600", "29.3", "100", "V100"]],
    "inst_num",
)
trace("cap-gpu-beyond-int32", "pai_machine_spec.csv", [["m1", "V100", "96", "512", "99999999999"]], "cap_gpu")
trace("nul-byte", "pai_job_table.csv", b"j1,i1,u1,Terminated,100\x00,200\n", "pai_job_table.csv")
trace("not-utf8", "pai_group_tag_table.csv", b"i1,u1,,g1,\xff\xfe\n", "pai_group_tag_table.csv")
case("trace-out-folder-missing", ["trace", "import", f"{W}/trace", "--out", f"{T}/no/p.csv"], {}, "does not exist")

# --- --where and other query options ------------------------------------------------------------------
where("no-equals", ["gpu"], "DIM=VALUE")
where("unknown-dim", ["colour=red"], "DIM=VALUE")
where("value-not-in-cube", ["gpu=H100"], "not in the cube")
where("n-gpu-word", ["n_gpu=eight"], "whole number")
where("n-gpu-absent", ["n_gpu=3"], "not in the cube")
where("empty-value", ["gpu="], "not in the cube")
where("code", ["gpu=__import__('os').system('true')"], "not in the cube")
where("list-with-bad", ["precision=fp32,fp64"], "fp64")
where("reduce-only-arch", ["arch=1w1g"], "reduce-only", cube="reduced.h5")
case("query-top-zero", ["query", f"{W}/cube.h5", "--best-arch", "--top", "0"], {}, "--top")
case("query-top-pareto", ["query", f"{W}/cube.h5", "--pareto", "--top", "2"], {}, "--pareto")
case("query-by-speed", ["query", f"{W}/cube.h5", "--best-arch", "--by", "speed"], {}, "--by")
case("query-nothing-asked", ["query", f"{W}/cube.h5"], {}, "--best-arch")
case("query-json-and-csv", ["query", f"{W}/cube.h5", "--best-arch", "--json", "--csv"], {}, "--json")
case("query-job-unknown", ["query", f"{W}/cube.h5", "--best-arch", "--job", "resnet5"], {}, "resnet5")
case("query-missing", ["query", f"{T}/none.h5", "--best-arch"], {}, "no cube")
case("query-text-file", ["query", f"{W}/text.txt", "--best-arch"], {}, "not a readable HDF5 cube")
case("query-not-a-cube", ["query", f"{W}/notcube.h5", "--best-arch"], {}, "not a paigrid cube")
case("query-folder", ["query", f"{W}/trace", "--best-arch"], {}, "trace")
case("query-unfinished", ["query", f"{T}/u.h5", "--best-arch"], {"u.h5.partial": "x"}, "unfinished")
case("info-text-file", ["info", f"{W}/text.txt"], {}, "not a readable HDF5 cube")
case("info-missing", ["info", f"{T}/none.h5"], {}, "no cube")
case("report-not-study", ["report", f"{W}/cube.h5", "--out", f"{T}/r"], {}, "cube.h5")
case("report-reduce-only", ["report", f"{W}/reduced.h5", "--out", f"{T}/r"], {}, "reduce")
case("report-block-jobs-zero", ["report", f"{W}/cube.h5", "--out", f"{T}/r", "--block-jobs", "0"], {}, "block-jobs")

# --- options ------------------------------------------------------------------------------------------
case("option-no-equals", [*PREDICT, "--option", "overlap"], {}, "KEY=VALUE")
case("option-unknown", [*PREDICT, "--option", "warp=9"], {}, "warp")
case("option-overlap-five", [*PREDICT, "--option", "overlap=5"], {}, "overlap")
case("option-grad-accum-inf", [*PREDICT, "--option", "grad_accum_steps=inf"], {}, "grad_accum_steps")
case("option-grad-accum-nan", [*PREDICT, "--option", "grad_accum_steps=nan"], {}, "grad_accum_steps")
case("option-topology-word", [*PREDICT, "--option", "topology_aware=maybe"], {}, "topology_aware")
case(
    "option-sweep-bad", ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "--option", "pcie_roots=0"], {}, "pcie_roots"
)
case("predict-batch-inf", [*PREDICT, "--batch", "inf"], {}, "--batch")
case("predict-batch-nan", [*PREDICT, "--batch", "nan"], {}, "--batch")
case("predict-batch-zero", [*PREDICT, "--batch", "0"], {}, "--batch")
case("predict-batch-word", [*PREDICT, "--batch", "lots"], {}, "--batch")
case("predict-n-gpu-zero", [*PREDICT[:8], "0", *PREDICT[9:]], {}, "--n-gpu")
case("predict-n-gpu-word", [*PREDICT[:8], "many", *PREDICT[9:]], {}, "--n-gpu")
case("predict-n-gpu-beyond-int32", [*PREDICT[:8], "4294967296", *PREDICT[9:]], {}, "--n-gpu")
case("predict-arch-unknown", [*PREDICT[:4], "mesh", *PREDICT[5:]], {}, "mesh")
case("predict-invalid-config", [*PREDICT[:4], "1w1g", *PREDICT[5:]], {}, "1w1g")
case(
    "predict-precision-unsupported",
    [
        "predict",
        "--workload",
        "resnet50",
        "--arch",
        "1w1g",
        "--gpu",
        "K80",
        "--n-gpu",
        "1",
        "--intra",
        "pcie3",
        "--network",
        "none",
        "--precision",
        "amp-fp16",
    ],
    {},
    "K80",
)
case("predict-workload-unknown", ["predict", "--workload", "resnet", *PREDICT[3:]], {}, "resnet")
case("predict-missing-option", PREDICT[:-2], {}, "--precision")
case("population-jobs-float", ["population", "--jobs", "1e11", "--out", f"{T}/p.csv"], {}, "--jobs")
case("population-jobs-huge", ["population", "--jobs", "100000000000", "--out", f"{T}/p.csv"], {}, "memory")
case("population-jobs-zero", ["population", "--jobs", "0", "--out", f"{T}/p.csv"], {}, "--jobs")
case("population-seed-negative", ["population", "--seed", "-1", "--out", f"{T}/p.csv"], {}, "--seed")
case("population-out-missing", ["population", "--jobs", "3"], {}, "--out")
case(
    "sweep-compression-unknown",
    ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "--compression", "brotli"],
    {},
    "--compression",
)
case(
    "sweep-scheduler-not-an-address",
    ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "-q", "--scheduler", "not a url"],
    {},
    "not a url",
)
case(
    "sweep-scheduler-and-workers",
    ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "--scheduler", "tcp://127.0.0.1:1", "--workers", "2"],
    {},
    "--scheduler",
)
case("sweep-workers-zero", ["sweep", f"{W}/spec.toml", "--out", f"{T}/o.h5", "--workers", "0"], {}, "--workers")
case("sweep-out-missing", ["sweep", f"{W}/spec.toml"], {}, "--out")
case("sweep-extra-argument", ["sweep", f"{W}/spec.toml", "extra", "--out", f"{T}/o.h5"], {}, "extra")
case(
    "calibrate-flop-per-unknown",
    ["calibrate", f"{W}/measurements.csv", "--out", f"{T}/c.toml", "--flop-per", "model"],
    {},
    "--flop-per",
)
case("catalogues-unknown", ["catalogues", "cpus"], {}, "cpus")
case("command-unknown", ["sweeep"], {}, "sweeep")
case("option-unknown-flag", ["info", f"{W}/cube.h5", "--verbose"], {}, "--verbose")

# --- output paths -------------------------------------------------------------------------------------
SWEEP_TO = ["sweep", f"{W}/spec.toml", "-q", "--out"]
case("out-folder", [*SWEEP_TO, f"{T}/d"], {"d": ("dir",)}, "folder")
case("out-missing-folder", [*SWEEP_TO, f"{T}/no/o.h5"], {}, "does not exist")
case("out-under-a-file", [*SWEEP_TO, f"{W}/text.txt/o.h5"], {}, "does not exist")
case("out-fifo", [*SWEEP_TO, f"{T}/fifo"], {"fifo": ("fifo",)}, "FIFO")
case("out-device", [*SWEEP_TO, f"{T}/null"], {"null": ("chardev",)}, "device", root_only=True)
case(
    "out-link-to-device",
    [*SWEEP_TO, f"{T}/link"],
    {"null": ("chardev",), "link": ("symlink", "null")},
    "device",
    root_only=True,
)
case("out-socket", [*SWEEP_TO, f"{T}/sock"], {"sock": ("socket",)}, "socket")
case("out-partial-waiting", [*SWEEP_TO, f"{T}/o.h5"], {"o.h5.partial": "x"}, "--resume")
case("out-resume-nothing", [*SWEEP_TO, f"{T}/o.h5", "--resume"], {}, "no interrupted sweep")
case("out-resume-not-a-cube", [*SWEEP_TO, f"{T}/o.h5", "--resume"], {"o.h5.partial": "not hdf5"}, "delete it")
case(
    "out-resume-other-hdf5",
    [*SWEEP_TO, f"{T}/o.h5", "--resume"],
    {"o.h5.partial": ("copy", "notcube.h5")},
    "not an interrupted paigrid sweep",
)
case(
    "out-resume-other-spec",
    ["sweep", f"{T}/s.toml", "-q", "--out", f"{T}/o.h5", "--resume"],
    {
        "s.toml": 'workloads = ["gcn"]\n[grid]\ngpu = ["V100", "A100"]\nn_gpu = [1, 8]\nintra = ["pcie3", '
        '"nvlink2-hcm"]\nnetwork = ["none", "eth-25g"]\nprecision = ["fp32"]\n',
        "o.h5.partial": ("copy", "cube.h5"),
    },
    "different",
)
case("out-partial-symlink", [*SWEEP_TO, f"{T}/o.h5"], {"o.h5.partial": ("symlink", "elsewhere")}, "symbolic link")
case("out-partial-folder", [*SWEEP_TO, f"{T}/o.h5", "--resume"], {"o.h5.partial": ("dir",)}, "not a file")
case("out-locked-by-live-process", [*SWEEP_TO, f"{T}/o.h5"], {"o.h5.lock": ("lock-live",)}, "is writing")
case("out-locked-from-other-host", [*SWEEP_TO, f"{T}/o.h5"], {"o.h5.lock": ("lock-other-host",)}, "elsewhere-host")
case("out-lock-foreign-file", [*SWEEP_TO, f"{T}/o.h5"], {"o.h5.lock": ("old", "not a lock\n")}, "not a paigrid lock")
case("population-out-folder", ["population", "--jobs", "3", "--out", f"{T}/d"], {"d": ("dir",)}, "folder")
case("population-out-socket", ["population", "--jobs", "3", "--out", f"{T}/sock"], {"sock": ("socket",)}, "socket")
case("study-spec-out-folder", ["study-spec", "--out", f"{T}/d"], {"d": ("dir",)}, "folder")
case("study-spec-out-missing-folder", ["study-spec", "--out", f"{T}/no/s.toml"], {}, "does not exist")
case("report-out-is-file", ["report", f"{W}/cube.h5", "--out", f"{W}/text.txt"], {}, "text.txt")
case(
    "spec-unreadable",
    ["sweep", f"{T}/s.toml", "--out", f"{T}/o.h5"],
    {"s.toml": ("mode", "[grid]\n", 0o000)},
    "Permission denied",
    user_only=True,
)
case("out-folder-read-only", [*SWEEP_TO, f"{T}/ro/o.h5"], {"ro": ("dir-mode", 0o555)}, "not writable", user_only=True)
case(
    "population-out-folder-read-only",
    ["population", "--jobs", "3", "--out", f"{T}/ro/p.csv"],
    {"ro": ("dir-mode", 0o555)},
    "not writable",
    user_only=True,
)


def _make(folder: Path, world: Path, name: str, content) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    elif content[0] == "dir":
        path.mkdir()
    elif content[0] == "fifo":
        os.mkfifo(path)
    elif content[0] == "chardev":
        os.mknod(path, 0o666 | 0o020000, os.makedev(1, 3))  # a /dev/null of the test's own
    elif content[0] == "symlink":
        os.symlink(content[1], path)
    elif content[0] == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif content[0] == "copy":
        path.write_bytes((world / content[1]).read_bytes())
    elif content[0] == "lock-live":
        path.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "", "since": "now"}))
    elif content[0] == "lock-other-host":
        path.write_text('{"pid": 1, "host": "elsewhere-host", "started": "", "since": "now"}\n')
    elif content[0] == "mode":
        path.write_text(content[1])
        path.chmod(content[2])
    elif content[0] == "dir-mode":
        path.mkdir()
        path.chmod(content[1])
    elif content[0] == "old":
        path.write_text(content[1])
        os.utime(path, (1, 1))
    else:
        raise ValueError(content)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("world"))


def test_the_corpus_is_large_and_covers_every_command():
    from typer.main import get_command

    from paigrid.cli import app

    assert len(CASES) >= 150, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
    # every command of the help; a hidden one is an old name (``datasets``), the same function as the
    # command it names (covered here), with its bad input checked in tests/test_cli.py
    commands = {name for name, command in get_command(app).commands.items() if not command.hidden}
    assert "catalogues" in commands and "datasets" not in commands
    covered = {c.args[0] for c in CASES}
    assert commands <= covered, commands - covered


@pytest.mark.parametrize("hostile", CASES, ids=[c.id for c in CASES])
def test_hostile_input_gets_one_sentence_and_damages_nothing(hostile, world, tmp_path):
    if hostile.root_only and os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    if hostile.user_only and os.geteuid() == 0:
        pytest.skip("root reads and writes regardless of permissions")
    for name, content in hostile.files.items():
        _make(tmp_path, world, name, content)
    before = snapshot(world, tmp_path)
    args = [a.replace(W, str(world)).replace(T, str(tmp_path)) for a in hostile.args]
    code, stdout, stderr = invoke(*args)
    assert_one_sentence(code, stderr, *hostile.expect)
    assert stdout == "", stdout
    assert snapshot(world, tmp_path) == before


def test_a_damaged_chunk_is_named_in_one_sentence(world, tmp_path):
    """A bit flipped inside one chunk of step_time: the query that reads it names the job and
    the variable; nothing else changes."""
    import shutil

    import h5py

    cube = tmp_path / "cube.h5"
    shutil.copyfile(world / "cube.h5", cube)
    with h5py.File(cube, "r") as f:
        info = f["step_time"].id.get_chunk_info(1)
        job = f["job"][1].decode()
    with open(cube, "r+b") as handle:
        handle.seek(info.byte_offset + info.size // 2)
        byte = handle.read(1)
        handle.seek(info.byte_offset + info.size // 2)
        handle.write(bytes([byte[0] ^ 0x01]))
    before = snapshot(tmp_path)
    code, stdout, stderr = invoke("query", cube, "--best-arch", "--where", "arch=1w1g,ps-worker")
    assert_one_sentence(code, stderr, f"chunk of job {job} of step_time fails its checksum")
    assert snapshot(tmp_path) == before


def test_calibration_keys_resolve_through_aliases(world, tmp_path):
    """A calibration key may name a GPU by an alias ("A100-SXM4-80G"): it takes effect exactly as the
    canonical name does, instead of being ignored (compute model pai-v1, which reads flop_efficiency)."""
    config = [
        "predict",
        "--workload",
        "bert-large-seq384",
        "--arch",
        "1w1g",
        "--gpu",
        "A100-SXM4-80GB",
        "--n-gpu",
        "1",
        "--intra",
        "pcie4",
        "--network",
        "none",
        "--precision",
        "tf32",
        "--json",
        "--option",
        "model=pai-v1",
    ]
    results = []
    for key in ("A100-SXM4-80GB/tf32", "A100-SXM4-80G/tf32", None):
        args = list(config)
        if key:
            (tmp_path / "c.toml").write_text(f'[flop_efficiency]\n"{key}" = 0.1\n')
            args += ["--calibration", tmp_path / "c.toml"]
        code, stdout, stderr = invoke(*args)
        assert code == 0, stderr
        results.append(json.loads(stdout)["step_time"])
    canonical, alias, default = results
    assert canonical == alias and alias > 2 * default
