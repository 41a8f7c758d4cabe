"""The models of ``datasets/models_v2.csv`` in the zoo (``datasets/zoo/*.toml``, their ``v2``
tables): parameters and forward FLOPs within 2% of the file's figures, or of an independent
count where the file has none, or the disagreement recorded with its reason; every ``model``
spelling of ``datasets/measured_public_v2.csv`` (at its size) resolves to a zoo entry; the
llm-foundry NumParams of every MPT row equal the zoo's count; the new models stay out of the
default sweep."""

import csv
import math
import re
from pathlib import Path

import pytest

from paigrid.errors import PaigridError
from paigrid.inputs import zoo
from paigrid.inputs.catalog import load

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ROOT / "datasets"
TOLERANCE = 0.02
MODELS = zoo.builtin_models()
V2_ROWS = {r["model"]: r for r in csv.DictReader((DATASETS / "models_v2.csv").read_text(encoding="utf-8").splitlines())}
MEASURED = list(csv.DictReader((DATASETS / "measured_public_v2.csv").read_text(encoding="utf-8").splitlines()))

#: rows of models_v2.csv no zoo entry describes yet (the test fails when one is added, so that
#: this list shrinks with the zoo)
NOT_YET_DESCRIBED = {
    "DCNv2",
    "GPUNet-0/1/2/D1",
    "MoFlow",
    "SE(3)-Transformer",
    "SIM (Search-based user Interest Model)",
    "U-Net Industrial",
    "V-Net",
    "Wide & Deep",
    "nnU-Net 2D/3D U-Net",
}
#: spellings of measured_public_v2.csv's ``model`` with no zoo entry yet (the models above):
#: the test checks they still fail with a sentence, and fails once one resolves
NOT_YET_RESOLVABLE = {
    "MoFlow",
    "SE(3)-Transformer",
}


def described() -> dict[str, list[zoo.Model]]:
    out: dict[str, list[zoo.Model]] = {}
    for model in MODELS:
        for name in model.v2.get("model", []):
            out.setdefault(name, []).append(model)
    return out


def checks():
    """(zoo model, models_v2 row, what) for every parameter and FLOP comparison the zoo states."""
    for model in MODELS:
        for name in model.v2.get("model", []):
            for what in ("params", "flops"):
                yield pytest.param(model, name, what, id=f"{model.name}-{what}")


def test_every_v2_model_is_described_or_listed():
    names = described()
    assert not set(names) - set(V2_ROWS), "v2 tables name rows that models_v2.csv does not have"
    missing = set(V2_ROWS) - set(names)
    assert missing == NOT_YET_DESCRIBED, (
        f"not described and not listed: {sorted(missing - NOT_YET_DESCRIBED)}; "
        f"listed but now described: {sorted(NOT_YET_DESCRIBED - missing)}"
    )


def _figure(text: str) -> float:
    text = text.strip().lstrip("~")
    return float(text) if text else math.nan


@pytest.mark.parametrize("model,name,what", list(checks()))
def test_parameters_and_flops_agree_or_say_why(model, name, what):
    v2, row = model.v2, V2_ROWS[name]
    ours = model.params / 1e6 if what == "params" else model.flops() / 1e9
    note = v2[f"{what}_note"]
    if not v2[what]:
        return  # a variant at another size than the file's figure (the entry at that size is checked)
    stated = _figure(row["parameters_M" if what == "params" else "fwd_gflops_per_sample"])
    if math.isnan(stated):
        stated = v2["params_M" if what == "params" else "gflops"]
    if math.isnan(stated):
        assert note.strip(), f"{model.name}: no {what} figure in models_v2.csv, no independent count, no reason"
        return
    off = abs(ours / stated - 1)
    if note:
        assert off > TOLERANCE, f"{model.name} {what}: now within 2% ({ours:.4g} vs {stated:.4g}); remove the note"
    else:
        assert off <= TOLERANCE, f"{model.name} {what}: {ours:.4g} against {stated:.4g} ({off:.1%})"


def test_every_figure_of_the_file_is_checked_once():
    """Each parameter and FLOP figure of a described row is compared by at least one zoo entry."""
    for name, models in described().items():
        row = V2_ROWS[name]
        for what, column in (("params", "parameters_M"), ("flops", "fwd_gflops_per_sample")):
            if row[column].strip():
                assert any(m.v2[what] for m in models), f"{name}: no zoo entry checks its {column}"


def test_independent_counts_name_their_source():
    for model in MODELS:
        if not (math.isnan(model.v2.get("params_M", math.nan)) and math.isnan(model.v2.get("gflops", math.nan))):
            assert model.v2["source"].strip(), model.name


def measured_spellings() -> list[tuple[str, str]]:
    return sorted({(r["model"], r["seq_len_or_image_size"]) for r in MEASURED})


@pytest.mark.parametrize("name,size", measured_spellings())
def test_every_measured_spelling_resolves(name, size):
    if name in NOT_YET_RESOLVABLE:
        with pytest.raises(PaigridError, match=r"^the zoo has no model or alias .*\.$"):
            zoo.resolve_measured(name, size, MODELS)
        return
    workload = zoo.resolve_measured(name, size, MODELS)
    assert workload in {w for m in MODELS for w in m.workloads}


def test_most_measured_rows_resolve():
    """The rows of the measured file whose model the zoo describes: 2,161 of 2,183."""
    resolved = sum(r["model"] not in NOT_YET_RESOLVABLE for r in MEASURED)
    assert (resolved, len(MEASURED)) == (2161, 2183)


def test_measured_sizes_pick_the_variant():
    assert zoo.resolve_measured("MPT-7b", "8192", MODELS) == "mpt-7b-seq8192"
    assert zoo.resolve_measured("BERT-base (uncased) SQuAD v1.1 fine-tuning", "384", MODELS) == "bert-base-seq384"
    assert zoo.resolve_measured("timm vgg16", "224x224", MODELS) == "vgg16"
    assert zoo.resolve_measured("timm vgg16", "224", MODELS) == "vgg16"
    with pytest.raises(PaigridError, match=r"the zoo has model 'MPT-70b' at 2048, not at 4096\."):
        zoo.resolve_measured("MPT-70b", "4096", MODELS)
    with pytest.raises(PaigridError, match=r"no model or alias 'ResNet-9000'"):
        zoo.resolve_measured("ResNet-9000", "", MODELS)


def test_mpt_parameter_counts_equal_the_benchmark_numparams():
    """llm-foundry's benchmark table prints NumParams for every (model, sequence length): the
    zoo's layers give it to the parameter (the learned positions grow with the length)."""
    by_name = {w: m for m in MODELS for w in m.workloads}
    seen = 0
    for r in MEASURED:
        found = re.search(r"NumParams (\d+), seq len (\d+)", r["model_config"])
        if found:
            model = by_name[zoo.resolve_measured(r["model"], r["seq_len_or_image_size"], MODELS)]
            assert model.params == int(found.group(1)), (r["id"], model.name)
            seen += 1
    assert seen >= 100


def test_alias_rows_have_the_measurement_alias_schema():
    rows = zoo.alias_rows(MODELS)
    header = (DATASETS / "measurement_aliases.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert rows and all(list(r) == header for r in rows)
    spellings = [(r["measured_model"].casefold(), r["seq_len_or_image_size"]) for r in rows]
    assert len(spellings) == len(set(spellings)), "a measured spelling is listed twice"


def test_new_models_stay_out_of_the_default_sweep():
    """The default sweep runs the workload catalogue: the zoo's new models are not in it."""
    catalogue = set(load("workloads").names)
    new = [w for m in MODELS if m.v2 for w in m.workloads if w not in catalogue]
    assert len(new) > 50 and not catalogue & set(new)


def test_same_size():
    assert zoo.same_size("224x224", "224") and zoo.same_size("384", "384.0")
    assert zoo.same_size("segment 8000 samples", "Segment 8000 samples")
    assert not zoo.same_size("224x224", "256") and not zoo.same_size("300x200", "300")


def test_docs_list_every_model():
    page = (ROOT / "docs" / "zoo.md").read_text(encoding="utf-8")
    assert zoo.with_models_table(page, MODELS) == page, "run python -m paigrid.inputs.zoo --docs docs/zoo.md"
    for model in MODELS:
        assert f"| `{model.workloads[0]}` |" in page


def test_measurement_aliases_agree_with_the_zoo():
    """The rows of measurement_aliases.csv for spellings of measured_public_v2.csv (those that
    name a catalogue workload, so that the catalogue's reader resolves them too) give the zoo's
    answer; every zoo alias naming a catalogue workload is among them."""
    aliases = list(csv.DictReader((DATASETS / "measurement_aliases.csv").read_text(encoding="utf-8").splitlines()))
    spellings = {(r["model"], r["seq_len_or_image_size"]) for r in MEASURED}
    checked = 0
    for row in aliases:
        for name, size in spellings:
            if name.casefold() == row["measured_model"].casefold() and (
                not row["seq_len_or_image_size"] or zoo.same_size(row["seq_len_or_image_size"], size)
            ):
                assert zoo.resolve_measured(name, size, MODELS) == row["workload"], (name, size)
                checked += 1
    catalogue = set(load("workloads").names)
    listed = {(r["measured_model"], r["seq_len_or_image_size"]) for r in aliases}
    for row in zoo.alias_rows(MODELS):
        if row["workload"] in catalogue:
            assert (row["measured_model"], row["seq_len_or_image_size"]) in listed, row
    assert checked >= 4


def test_docs_table_is_written_between_its_markers(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text(f"# t\n\n{zoo.DOCS_START}\nold\n{zoo.DOCS_END}\nafter\n", encoding="utf-8")
    assert zoo.main(["--docs", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert "old" not in text and text.endswith(f"{zoo.DOCS_END}\nafter\n") and "| `mpt-7b-seq2048` |" in text
    bare = tmp_path / "bare.md"
    bare.write_text("# no markers\n", encoding="utf-8")
    assert zoo.main(["--docs", str(bare)]) == 2
    assert "has no zoo-models markers" in capsys.readouterr().err
    assert bare.read_text(encoding="utf-8") == "# no markers\n"


def test_rows_measured_in_other_units_find_their_count():
    """A throughput in mel frames, audio samples or tokens per second converts to samples per
    second with the zoo entry's ``per_sample`` count of that unit."""
    by_name = {w: m for m in MODELS for w in m.workloads}
    units = {"mel": "mel frames", "audio samples": "audio samples", "tokens": "tokens"}
    seen = 0
    for r in MEASURED:
        wanted = [unit for key, unit in units.items() if key in r["throughput_unit"]]
        if wanted and r["model"] not in NOT_YET_RESOLVABLE:
            model = by_name[zoo.resolve_measured(r["model"], r["seq_len_or_image_size"], MODELS)]
            assert model.per_sample.get(wanted[0], 0) > 0, (r["id"], model.name, wanted[0])
            seen += 1
    assert seen > 1000


def test_per_sample_counts():
    by_name = {w: m for m in MODELS for w in m.workloads}
    assert by_name["mpt-7b-seq8192"].per_sample == {"tokens": 8192}
    assert by_name["waveglow"].per_sample == {"audio samples": 8000, "mel frames": 32}
    assert by_name["tacotron2"].sample.startswith("one utterance of 100 characters and 566 mel frames")
    assert by_name["mpt-7b-seq8192"].sample == "one 8192-token sequence"


def test_vae_cf_counts_no_more_flops_than_its_fp32_rows_could_run():
    """VAE-CF's encoder input is sparse (an embedding lookup of the user's items): with the dense
    I x 600 product counted, DLE's V100 FP32 row would run above the GPU's FP32 peak."""
    gpus = load("gpus")
    model = next(m for m in MODELS if m.name == "vae-cf")
    rows = [r for r in MEASURED if r["model"] == "VAE-CF" and r["precision"] == "fp32"]
    assert rows
    for r in rows:
        n_gpu = int(r["gpus_per_node"]) * int(r["nodes"])
        gpu = gpus.resolve(r["gpu"].split(" (")[0])
        rate = 3 * model.flops() * float(r["throughput"]) / n_gpu  # FLOP/s per GPU, users/s as published
        assert rate < gpus.number(gpu, "fp32_TFLOP_per_s") * 1e12, r["id"]
    dense = 2 * (20108 * 600 + 600 * 400 + 200 * 600 + 600 * 20108)  # a dense interaction vector
    assert model.flops() < 0.6 * dense  # the encoder's first layer reads only the user's rows
