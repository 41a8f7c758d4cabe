"""The GPU and precision catalogues against the public measurement files: every GPU spelling of
``measured_public_v2.csv`` and ``llm_public_v2.csv`` names exactly one catalogue row, every row
predicts, the new columns load with their units checked, and the FP8 / FP4 precisions run only
where the hardware has them."""

import csv
import math
from importlib import resources

import numpy as np
import pytest

from cli_helpers import assert_clean_error, run
from paigrid.errors import PaigridError
from paigrid.inputs.catalog import Catalogues, builtin_text, memory_bytes, parse_csv, server_shape
from paigrid.inputs.efficiency import defaults
from paigrid.inputs.jobs import Job
from paigrid.inputs.kernel_tables import build_grid
from paigrid.inputs.spec import JOB_OPTIONS, Options, SweepSpec
from paigrid.llm.tables import intra_link_for, peak_flops
from paigrid.predict import predict_configs

DATASETS = resources.files("paigrid.datasets")
FILES = {"measured_public_v2.csv": 2183, "llm_public_v2.csv": 605}
# where a file's GPU text says more than one thing, the row it names (docs/catalogues.md says why)
DECIDED = {
    "GH200 (96GB) [sys_pytorch.txt: NVIDIA_GH200_480GB, 97871 MiB; Lambda label says 80GB]": "GH200-96GB",
    "H200 NVL (141GB) [sys_pytorch.txt: NVIDIA_H200_NVL; Lambda label says SXM]": "H200-NVL",
    "RTX A6000 (48GB) (GPU name from Lambda label; sys file missing)": "RTX-A6000",
    "A100-40GB (source: a100_40gb; form factor not stated)": "A100-SXM4-40GB",
    "A100-80GB (source: a100_80gb; form factor not stated)": "A100-SXM4-80GB",
    "H100-80GB (source: h100_80gb; form factor not stated)": "H100-SXM5-80GB",
    "A100-80GB (variant not stated)": "A100-SXM4-80GB",
    "A100-80GB (NDm A100 v4)": "A100-SXM4-80GB",
    "H100-HBM2e-94/95GB (lower TDP SXM)": "H100-SXM5-96GB-HBM2e",
    "H100-HBM2e-96GB-500W (Grand Teton)": "H100-SXM5-96GB-HBM2e",
    "B200 (192GB)": "B200",
}
#: the GPUs of the default grid before the catalogue grew (the README's sweep size rests on them)
DEFAULT_GRID = [
    "K80",
    "P100-PCIe-16GB",
    "P100-SXM2-16GB",
    "V100-PCIe-16GB",
    "V100-SXM2-16GB",
    "V100-SXM2-32GB",
    "V100-SXM3-32GB",
    "T4",
    "A10",
    "A100-PCIe-40GB",
    "A100-PCIe-80GB",
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "L4",
    "H100-PCIe-80GB",
    "H100-SXM5-80GB",
    "H200",
    "B200",
]


@pytest.fixture(scope="module")
def cats():
    return Catalogues.load()


def _spellings() -> dict[str, set[str]]:
    out = {}
    for name in FILES:
        with DATASETS.joinpath(name).open(encoding="utf-8", newline="") as handle:
            out[name] = {row["gpu"] for row in csv.DictReader(handle)}
    return out


def test_the_copied_files_hold_every_published_row():
    for name, count in FILES.items():
        with DATASETS.joinpath(name).open(encoding="utf-8", newline="") as handle:
            assert sum(1 for _ in csv.DictReader(handle)) == count, name


def test_every_spelling_of_the_measurement_files_names_exactly_one_row(cats):
    def names_of(row):  # counted from the cells, independently of the catalogue's index
        from paigrid.inputs.catalog import _split

        return {n.casefold() for n in [row["name"], *_split(row["aliases"])]}

    per_file = _spellings()
    assert {name: len(names) for name, names in per_file.items()} == {
        "measured_public_v2.csv": 36,
        "llm_public_v2.csv": 10,
    }
    spellings = set().union(*per_file.values())
    for spelling in sorted(spellings):
        matches = [row["name"] for row in cats.gpus.rows if spelling.casefold() in names_of(row)]
        assert len(matches) == 1, (spelling, matches)
        assert cats.gpus.resolve(spelling) == matches[0]
    for spelling, name in DECIDED.items():
        assert spelling in spellings and cats.gpus.resolve(spelling) == name


def test_the_llm_files_precision_names_are_catalogue_precisions(cats):
    with DATASETS.joinpath("llm_public_v2.csv").open(encoding="utf-8", newline="") as handle:
        plain = {row["precision"] for row in csv.DictReader(handle) if " " not in row["precision"]}
    assert plain == {"amp-bf16", "fp8", "fp8-cs", "fp8-blockwise", "mxfp8", "nvfp4"}
    assert {cats.precisions.resolve(p) for p in plain} == {
        "amp-bf16",
        "fp8",
        "fp8-current",
        "fp8-blockwise",
        "mxfp8",
        "nvfp4",
    }


def test_a_semicolon_inside_brackets_is_part_of_an_alias():
    from paigrid.inputs.catalog import _split

    assert _split("a; b (x; y) ;c [p; q (r; s)]; d") == ["a", "b (x; y)", "c [p; q (r; s)]", "d"]
    assert _split("unbalanced ) ; e") == ["unbalanced )", "e"]


def test_fp16_holds_the_fp32_accumulate_rate(cats):
    """BF16 tensor math accumulates in FP32 only, so where a GPU has both, the fp16 peak (FP16 with
    FP32 accumulate, what mixed precision runs) equals it; on GeForce cards that is half the
    FP16-accumulate headline."""
    both = [
        n
        for n in cats.gpus.names
        if cats.gpus.number(n, "bf16_TFLOP_per_s") > 0 and cats.gpus.number(n, "fp16_TFLOP_per_s") > 0
    ]
    assert len(both) >= 30
    for name in both:
        assert cats.gpus.number(name, "fp16_TFLOP_per_s") == cats.gpus.number(name, "bf16_TFLOP_per_s"), name
    assert cats.gpus.number("RTX-3090", "fp16_TFLOP_per_s") == 71.0  # 142 with FP16 accumulate
    assert cats.gpus.number("RTX-4090", "fp8_TFLOP_per_s") == 330.3  # 660.6 with FP16 accumulate
    assert cats.gpus.number("RTX-2080-Ti", "fp16_TFLOP_per_s") == 53.8  # 107.6 with FP16 accumulate


def test_every_row_is_complete_and_says_what_is_estimated(cats):
    generations = {"Kepler", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell"}
    for row in cats.gpus.rows:
        name = row["name"]
        assert row["generation"] in generations and row["segment"], name
        assert len(row["source"]) > 200 and "memory_GiB" in row["source"], name
        per_server, domain = server_shape(cats.gpus, name)
        assert per_server >= 1 and domain >= 1
        if cats.gpus.number(name, "nvlink_gen") == 0:
            assert domain == 1, name
        if row["default_grid"] == "no":  # the added GPUs: no hyperscaler list price, each an estimate
            assert row["price_source"].startswith("estimate: "), name
        peaks = [cats.gpus.number(name, f"{p}_TFLOP_per_s") for p in ("fp16", "fp8", "fp4")]
        present = [p for p in peaks if p > 0]
        assert present == sorted(present), name  # each narrower format at least as fast
    assert server_shape(cats.gpus, "GB200") == (4, 72) and server_shape(cats.gpus, "B300") == (8, 8)
    assert server_shape(cats.gpus, "RTX-3090") == (8, 2) and server_shape(cats.gpus, "K80") == (8, 1)
    assert memory_bytes(cats.gpus, "A100-SXM4-80GB") == 80 * 2**30
    assert memory_bytes(cats.gpus, "H100-SXM5-80GB") == pytest.approx(81559 * 2**20, rel=1e-4)


def test_the_default_grid_keeps_its_gpus_and_precisions(cats):
    assert cats.gpus.default_names == DEFAULT_GRID
    assert cats.precisions.default_names == ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp8"]
    options = Options()
    job = Job("j", "resnet50", 32.0, {key: getattr(options, key) for key in JOB_OPTIONS})
    grid = build_grid(SweepSpec(), [job], cats, defaults())
    assert grid.gpu == DEFAULT_GRID and grid.precision == cats.precisions.default_names
    assert "pcie6" not in grid.intra and len(grid.intra) == 9 and len(grid.network) == 13
    links = {gpu: intra_link_for(cats, gpu) for gpu in ("H800-SXM5-80GB", "GB300", "B300", "H100-SXM5-96GB-HBM2e")}
    assert links == {
        "H800-SXM5-80GB": "nvswitch-nvlink4-h800",
        "GB300": "nvlink5",
        "B300": "nvlink5",
        "H100-SXM5-96GB-HBM2e": "nvswitch-nvlink4",
    }
    assert grid.configs == 5 * 18 * 11 * 9 * 13 * 5  # one job: the default sweep's size per workload
    wider = build_grid(
        SweepSpec(gpu=["RTX-3090", "GB300"], precision=["mxfp8", "nvfp4", "fp8-cs"]), [job], cats, defaults()
    )
    assert wider.gpu == ["RTX-3090", "GB300"] and wider.precision == ["mxfp8", "nvfp4", "fp8-current"]


def _predict(cats, configs, model="pai-v2"):
    options = Options(model=model)
    job = Job("j", "bert-large-seq128", 8.0, {key: getattr(options, key) for key in JOB_OPTIONS})
    return predict_configs([job] * len(configs), configs, cats, defaults(), options)


@pytest.mark.parametrize("model", ["pai-v1", "pai-v2"])
def test_every_gpu_predicts_at_every_precision_it_has(cats, model):
    configs, expected = [], []
    for gpu in cats.gpus.names:
        for precision in cats.precisions.names:
            configs.append(
                {"arch": "1w1g", "gpu": gpu, "n_gpu": 1, "intra": "pcie3", "network": "none", "precision": precision}
            )
            expected.append(not cats.lacks_precision(gpu, precision))
    results = _predict(cats, configs, model)
    for config, result, has in zip(configs, results, expected):
        assert bool(result["valid"]) == has, config
        assert (result["step_time"] > 0) if has else math.isnan(result["step_time"]), config
    assert sum(expected) > 150


def test_precisions_need_their_hardware(cats):
    assert "Hopper" in cats.lacks_precision("H100", "mxfp8") and not cats.lacks_precision("GB200", "mxfp8")
    assert "fp4_TFLOP_per_s is empty" in cats.lacks_precision("H200", "nvfp4")
    assert not cats.lacks_precision("B300", "nvfp4") and not cats.lacks_precision("H100", "fp8-blockwise")
    assert cats.lacks_precision("L40S", "fp8-blockwise") and not cats.lacks_precision("L40S", "fp8-current")
    assert math.isnan(peak_flops(cats, "H100", "mxfp8")) and peak_flops(cats, "B200", "mxfp8") == 4500e12
    assert peak_flops(cats, "GB300", "nvfp4") == 15000e12
    eff = defaults()
    for variant in ("fp8-current", "fp8-blockwise", "mxfp8"):
        assert eff.class_for("gemm_conv", "Blackwell", variant) == eff.class_for("gemm_conv", "Blackwell", "fp8")
        assert eff.flop_for("B200", variant) > 0
    assert eff.class_for("gemm_conv", "Blackwell", "nvfp4") < eff.class_for("gemm_conv", "Blackwell", "fp8")
    # FlashAttention-2 needs Ampere or newer: the new Turing and Pascal cards fall back as Volta does
    for generation in ("Turing", "Pascal"):
        assert eff.class_for("attention_fused", generation, "amp-fp16") == eff.class_for(
            "attention_fused", "Volta", "amp-fp16"
        )
    assert eff.class_for("attention_fused", "Turing", "amp-fp16") < eff.class_for(
        "attention_fused", "Ampere", "amp-fp16"
    )
    result = run(
        "predict",
        "--workload",
        "resnet50",
        "--arch",
        "1w1g",
        "--gpu",
        "H100",
        "--n-gpu",
        1,
        "--intra",
        "pcie5",
        "--network",
        "none",
        "--precision",
        "mxfp8",
    )
    assert_clean_error(
        result,
        "the H100-SXM5-80GB has no mxfp8 support (mxfp8 needs hardware of the generation(s) "
        "Blackwell; the H100-SXM5-80GB is Hopper)",
    )
    configs = [
        {"arch": "1w1g", "gpu": gpu, "n_gpu": 1, "intra": "pcie5", "network": "none", "precision": p}
        for gpu, p in (("B200", "amp-bf16"), ("B200", "mxfp8"), ("B200", "nvfp4"))
    ]
    bf16, mx, fp4 = (r["t_flop"] for r in _predict(cats, configs))
    assert bf16 > mx > fp4 > 0


def test_a_catalogue_without_the_new_columns_still_predicts(tmp_path):
    """A user GPU file of the old schema: no fp4 column (nvfp4 is then unsupported, not an error),
    no memory_GiB (the datasheet GB), no server shape (8 GPUs, no NVLink domain), no default_grid
    (every row is swept)."""
    new = ("fp4_TFLOP_per_s", "memory_GiB", "gpus_per_server", "nvlink_domain_GPUs", "segment", "default_grid")
    rows = list(csv.DictReader(builtin_text("gpus").splitlines()))
    header = [c for c in rows[0] if c not in new]
    path = tmp_path / "old_gpus.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(r for r in rows if r["name"] in ("V100-SXM2-16GB", "B200"))
    cats = Catalogues.load({"gpus": path})
    assert cats.gpus.default_names == ["V100-SXM2-16GB", "B200"]
    assert server_shape(cats.gpus, "B200") == (8, 1) and memory_bytes(cats.gpus, "B200") == 180e9
    assert "fp4_TFLOP_per_s is empty" in cats.lacks_precision("B200", "nvfp4")
    results = _predict(
        cats,
        [
            {"arch": "1w1g", "gpu": "B200", "n_gpu": 1, "intra": "pcie5", "network": "none", "precision": p}
            for p in ("amp-bf16", "nvfp4")
        ],
    )
    assert results[0]["step_time"] > 0 and np.isnan(results[1]["step_time"])


@pytest.mark.parametrize(
    "column, value, message",
    [
        ("memory_GiB", "81920", "memory_GiB 81920 is"),  # MiB in a GiB column
        ("memory_GiB", "0", "memory_GiB"),
        ("gpus_per_server", "4.5", "gpus_per_server"),
        ("nvlink_domain_GPUs", "0", "nvlink_domain_GPUs"),
        ("segment", "gaming", "segment"),
        ("default_grid", "maybe", "default_grid"),
        ("fp4_TFLOP_per_s", "-1", "fp4_TFLOP_per_s"),
    ],
)
def test_bad_cells_of_the_new_columns_are_one_sentence(column, value, message):
    rows = list(csv.DictReader(builtin_text("gpus").splitlines()))
    row = next(r for r in rows if r["name"] == "A100-SXM4-80GB")
    row[column] = value
    text = builtin_text("gpus").splitlines()[0] + "\n" + _csv_line(row)
    with pytest.raises(PaigridError, match=message):
        parse_csv(text, "gpus", "my.csv")


def test_an_nvlink_domain_needs_nvlink():
    rows = list(csv.DictReader(builtin_text("gpus").splitlines()))
    row = next(r for r in rows if r["name"] == "T4")
    row["nvlink_domain_GPUs"] = "8"
    with pytest.raises(PaigridError, match="nvlink_gen is 0"):
        parse_csv(builtin_text("gpus").splitlines()[0] + "\n" + _csv_line(row), "gpus", "my.csv")


def _csv_line(row: dict) -> str:
    import io

    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(row.values())
    return buffer.getvalue()


def test_catalogues_lists_the_new_rows():
    result = run("catalogues", "gpus")
    assert result.exit_code == 0 and "GB300" in result.output and "RTX-3090" in result.output
    assert "memory_GiB" in result.output and "nvfp4" in run("catalogues", "precisions").output


def test_the_amp_variants_differ_in_the_gradient_bytes_kept_and_sent(cats):
    """amp-fp16 (apex O2: FP16 gradients, FP16 all-reduce), amp-fp16-autocast (torch.cuda.amp: FP32
    gradients, FP32 all-reduce) and amp-fp16-fp16wire (FP32 gradients, FP16 all-reduce) share the
    FP16 peak, efficiency and activation bytes; the optimizer update reads the kept gradient bytes
    and the all-reduce moves the wire bytes, so on 8 GPUs autocast communicates twice as long."""
    assert not {"amp-fp16-autocast", "amp-bf16-autocast", "amp-fp16-fp16wire"} & set(cats.precisions.default_names)
    options = Options()
    job = Job("j", "bert-large-seq128", 8.0, {key: getattr(options, key) for key in JOB_OPTIONS})
    names = ("amp-fp16", "amp-fp16-autocast", "amp-fp16-fp16wire")
    configs = [
        {"arch": arch, "gpu": "V100-SXM2-16GB", "n_gpu": n, "intra": "pcie3", "network": "none", "precision": p}
        for arch, n in (("1w1g", 1), ("allreduce-local", 8))
        for p in names
    ]
    one, eight = np.split(np.array(predict_configs([job] * 6, configs, cats, defaults(), options)), 2)
    o2, autocast, wire = eight
    assert {r["t_flop"] for r in one} == {o2["t_flop"]}
    assert one[0]["t_mem"] < one[1]["t_mem"] == one[2]["t_mem"]  # 4 gradient bytes read by the update
    assert o2["t_comm"] == wire["t_comm"] > 0 and autocast["t_comm"] == pytest.approx(2 * o2["t_comm"], rel=1e-6)
    assert o2["step_time"] < wire["step_time"] < autocast["step_time"]
