"""The model options are declared once (``paigrid.inputs.options``): every declared option is a
field of its family's options, reaches its kernel slot, is in the ``--option`` help of every
command of its family and on docs/options.md; the generated files are current; the parsing and
range checks of both families follow the declarations."""

import dataclasses
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import typer

from cli_helpers import assert_clean_error, run
from paigrid.cli import app
from paigrid.errors import PaigridError
from paigrid.inputs import options as D
from paigrid.inputs.catalog import Catalogues
from paigrid.inputs.efficiency import defaults as efficiency_defaults
from paigrid.inputs.jobs import Job
from paigrid.inputs.kernel_tables import job_vector, link_table, option_vector, resolve_dp_network
from paigrid.inputs.spec import JOB_OPTIONS, Options, spec_from_dict
from paigrid.kernels import dp_columns as L
from paigrid.kernels import llm_columns as K
from paigrid.llm.models import model as llm_model
from paigrid.llm.tables import LlmOptions, model_vector

ROOT = Path(__file__).resolve().parent.parent
ALL = [*D.DP_OPTIONS, *D.LLM_OPTIONS]
IDS = [f"{o.family}-{o.name}" for o in ALL]
# tp 2: the 8B model at 8,192 tokens does not fit one H100 per replica (98 GiB against 87.6)
LLM_PREDICT = ("llm", "predict", "--model", "llama3-8b", "--gpu", "H100", "--n-gpu", "8", "--tp", "2")


def _tool():
    spec = importlib.util.spec_from_file_location("options_reference", ROOT / "tools" / "options_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- declared once: the option classes are the declarations --------------------------------------
def test_options_fields_are_the_dp_declarations():
    fields = {f.name: f.default for f in dataclasses.fields(Options)}
    assert list(fields) == [o.name for o in D.DP_OPTIONS]
    for option in D.DP_OPTIONS:
        assert fields[option.name] == option.default or (
            option.default != option.default and fields[option.name] != fields[option.name]
        ), option.name


def test_llm_options_fields_are_the_llm_declarations():
    names = [f.name for f in dataclasses.fields(LlmOptions)]
    assert names == [o.name for o in D.LLM_OPTIONS]
    defaults = LlmOptions.defaults()
    for option in D.LLM_OPTIONS:
        assert getattr(defaults, option.name) == D.default(option)


@pytest.mark.parametrize("cls", [Options, LlmOptions], ids=["dp", "llm"])
def test_option_fields_have_the_declared_types_and_are_keyword_only(cls):
    """The fields are built from the declarations (``options.fields_class``): each has its
    kind's type (``| None`` where unset is a value), a default exactly where the declaration
    gives one, and is keyword-only; the stub the type checker reads says the same."""
    family = "dp" if cls is Options else "llm"
    stub = (ROOT / "engine" / "inputs" / "option_fields.pyi").read_text(encoding="utf-8")
    for f, option in zip(dataclasses.fields(cls), D.OPTIONS[family], strict=True):
        kind = D.PYTHON_TYPES[option.kind]
        assert f.type == (kind | None if option.nullable else kind), option.name
        assert (f.default is not dataclasses.MISSING) == D.has_field_default(option), option.name
        assert f.kw_only, option.name
        default = " = ..." if D.has_field_default(option) else ""
        assert f"\n    {option.name}: {D.field_type_text(option)}{default}\n" in stub, option.name
    with pytest.raises(TypeError):
        cls(*[getattr(cls.defaults() if cls is LlmOptions else cls(), f.name) for f in dataclasses.fields(cls)])


@pytest.mark.parametrize("option", ALL, ids=IDS)
def test_declaration_is_complete(option):
    assert option.family in D.FAMILIES and option.kind in D.KINDS and option.doc
    layout = L if option.family == "dp" else K
    assert isinstance(getattr(layout, option.slot, None), int), f"{option.slot} is not a kernel constant"
    if option.kind == "word":
        assert option.choices and D.default(option) in option.choices and option.example in option.choices
    if option.kind in ("whole", "number"):
        assert option.bound is not None and option.bound.source, "a number needs bounds with a source"
        assert option.bound.holds(D.default(option)) and option.bound.holds(option.example)
    assert D.parse_value(option, option.example, "test") == option.example
    assert option.example != D.default(option)


def test_every_options_vector_slot_is_declared():
    """Each slot of both options vectors is set by a declared option (the data-parallel
    workspace comes from model_defaults.toml, not an option)."""
    dp_slots = {getattr(L, o.slot) for o in D.DP_OPTIONS if o.encode is not None}
    assert dp_slots | {L.O_WORKSPACE} == set(range(L.N_OPTIONS))
    llm_slots = {getattr(K, o.slot) for o in D.LLM_OPTIONS if o.encode is not None}
    assert llm_slots == set(range(K.N_OPTION_FIELDS))


# --- every option reaches its kernel slot --------------------------------------------------------
@pytest.fixture(scope="module")
def cats():
    return Catalogues.load()


def _dp_slot(option, value, cats):
    options = Options(**{**option.needs, option.name: value})
    if option.slot.startswith("L_"):
        # a link-table option (fabric_tiers): the row that a fabric named as a network becomes, NaN
        # where the name is no network of the data-parallel jobs
        try:
            name = resolve_dp_network(cats, "dgx-h100-superpod", value)
        except PaigridError:
            return math.nan
        return link_table(cats, [name], efficiency_defaults())[0, getattr(L, option.slot)]
    if option.slot.startswith("O_"):
        return option_vector(options)[getattr(L, option.slot)]
    workload = SLOT_WORKLOADS.get(option.name, "bert-large-seq384")
    job = Job("j", workload, 8.0, {key: getattr(options, key) for key in JOB_OPTIONS})
    return job_vector(job, cats, options)[getattr(L, option.slot)]


#: the workload whose job table shows an option's slot, where BERT has none of what it acts on
SLOT_WORKLOADS = {"memory_format": "resnet50-v1.5"}  # the layout transposes are of convolutions


def _llm_slot(option, value):
    options = dataclasses.replace(LlmOptions.defaults(), **{**option.needs, option.name: value})
    if option.slot.startswith("OP_"):
        return options.vector()[getattr(K, option.slot)]
    return model_vector(llm_model("llama3-8b"), attention=options.attention)[getattr(K, option.slot)]


@pytest.mark.parametrize("option", ALL, ids=IDS)
def test_option_reaches_its_kernel_slot(option, cats):
    if option.family == "dp":
        before, after = _dp_slot(option, D.default(option), cats), _dp_slot(option, option.example, cats)
    else:
        before, after = _llm_slot(option, D.default(option)), _llm_slot(option, option.example)
    assert np.isfinite(after) or after == math.inf
    assert before != after, f"{option.name}={option.example!r} does not move {option.slot}"


# --- the help, the docs and the bounds file derive from the declarations --------------------------
def _option_helps():
    """(command path, help of its --option) for every command that has one."""
    out = []
    stack = [("paigrid", typer.main.get_command(app))]
    while stack:
        path, command = stack.pop()
        for name, sub in getattr(command, "commands", {}).items():
            stack.append((f"{path} {name}", sub))
        for param in getattr(command, "params", []):
            if "--option" in getattr(param, "opts", []):
                out.append((path, param.help))
    return out


def test_every_option_is_in_the_help_of_its_family():
    helps = _option_helps()
    assert len(helps) >= 6, helps  # sweep, predict, validate, calibrate, llm sweep, llm predict
    for path, text in helps:
        family = "llm" if path.startswith("paigrid llm ") else "dp"
        assert text == D.option_help(family), path
    for family in D.FAMILIES:
        for option in D.OPTIONS[family]:
            assert f" {option.name}," in D.option_help(family) or D.option_help(family).endswith(f" {option.name}.")


def test_options_page_bounds_file_and_fields_stub_are_up_to_date():
    tool = _tool()
    assert tool.render_page() == (ROOT / "docs" / "options.md").read_text(encoding="utf-8"), (
        "docs/options.md is not what the declarations say: run python tools/options_reference.py"
    )
    assert tool.render_bounds() == (ROOT / "datasets" / "parameter_bounds.csv").read_text(encoding="utf-8"), (
        "datasets/parameter_bounds.csv is not what the declarations say: run python tools/options_reference.py"
    )
    assert tool.render_stub() == (ROOT / "engine" / "inputs" / "option_fields.pyi").read_text(encoding="utf-8"), (
        "engine/inputs/option_fields.pyi is not what the declarations say: run python tools/options_reference.py"
    )


@pytest.mark.parametrize("option", ALL, ids=IDS)
def test_every_option_is_on_the_options_page(option):
    page = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    section = page.split("## LLM options")[0 if option.family == "dp" else 1]
    assert f"| `{option.name}` |" in section


def test_the_bounds_readers_see_the_declared_bounds():
    from paigrid.accuracy.calibrate import bounds_for
    from paigrid.inputs.efficiency import declared_bounds

    for name, bound in D.PARAMETER_BOUNDS.items():
        assert declared_bounds()[name] == (bound.lower, bound.upper, bound.unit)
    assert bounds_for("class_efficiency", "launch_eager/Ampere") == (1.0, 30.0)


# --- parsing and range checks, the same for both families -----------------------------------------
BAD = [
    ("dp", {"overlap": 2.0}, ["overlap must be a fraction at most 1, not 2", "bounds: 0 to 1"]),
    ("dp", {"coordination_us": 1e308}, ["coordination_us", "at most 1000000 us", "not 1e+308"]),
    ("dp", {"grad_accum_steps": 1e12}, ["at most 2147483647"]),
    ("dp", {"grad_accum_steps": 1.5}, ["grad_accum_steps must be a whole number"]),
    ("dp", {"bucket_mb": math.inf}, ["bucket_mb must be a finite number"]),
    ("dp", {"input_rate_samples_per_s": 0.0}, ["input_rate_samples_per_s must be a number above 0 samples/s"]),
    ("dp", {"collective": "star"}, ["collective must be one of default, ring, tree"]),
    ("dp", {"topology_aware": "yes"}, ["topology_aware must be true or false"]),
    ("dp", {"gpus_per_node": "8"}, ["gpus_per_node must be a number"]),
    ("dp", {"warp": 9}, ["unknown option(s) warp"]),
    ("llm", {"workspace_GiB": 1e308}, ["workspace_GiB must be a finite number at most 1000 GiB, not 1e+308"]),
    ("llm", {"weight_bytes": -1.0}, ["weight_bytes must be a finite number at least 0 bytes, not -1"]),
    ("llm", {"overlap_efficiency": 1.5}, ["overlap_efficiency must be a fraction at most 1"]),
    ("llm", {"attention": "magic"}, ["attention must be one of eager, fused, not 'magic'"]),
    ("llm", {"overlap_dp": "True"}, ["overlap_dp must be true or false"]),
    ("llm", {"weight_bytes": "2"}, ["weight_bytes must be a number"]),
    ("llm", {"warp": 9}, ["unknown LLM option(s) warp"]),
]


@pytest.mark.parametrize(("family", "values", "fragments"), BAD, ids=[f"{f}-{next(iter(v))}" for f, v, _ in BAD])
def test_a_bad_value_is_one_sentence(family, values, fragments):
    with pytest.raises(PaigridError) as info:
        D.parse_options(family, values, "here")
    text = str(info.value)
    assert text.startswith("here: ") and text.endswith(".") and "\n" not in text
    for fragment in fragments:
        assert fragment in text, text


def test_both_families_read_command_line_values_the_same_way():
    from paigrid.cli.arguments import parse_option_items

    items = parse_option_items(
        ["overlap=0.5", "overlap_dp=false", "workspace_GiB=4", "attention=fused", "ps_nic=per-worker"]
    )
    assert items == {
        "overlap": 0.5,
        "overlap_dp": False,
        "workspace_GiB": 4,
        "attention": "fused",
        "ps_nic": "per-worker",
    }
    llm = LlmOptions.defaults().with_items({k: items[k] for k in ("overlap_dp", "workspace_GiB", "attention")})
    assert (llm.overlap_dp, llm.workspace_GiB, llm.attention) == (False, 4.0, "fused")
    dp = Options().with_overrides({k: items[k] for k in ("overlap", "attention", "ps_nic")}, "--option")
    assert (dp.overlap, dp.attention, dp.ps_nic) == (0.5, "fused", "per-worker")


def test_the_old_attention_spelling_is_read_as_fused_with_a_note():
    with pytest.warns(D.OldSpelling, match="old spelling of 'fused'"):
        assert LlmOptions.defaults().with_items({"attention": "flash"}).attention == "fused"
    with pytest.warns(D.OldSpelling):
        assert spec_from_dict({"options": {"attention": "flash"}}, "s.toml").options.attention == "fused"
    assert LlmOptions.defaults().attention == "fused"  # the shipped default's spelling
    result = run(*LLM_PREDICT, "--option", "attention=flash", "--json")
    assert result.exit_code == 0, result.output
    assert "paigrid: note: --option: attention 'flash' is the old spelling of 'fused'" in result.output


def test_an_out_of_range_llm_option_on_the_command_line_is_one_sentence():
    result = run(*LLM_PREDICT, "--option", "workspace_GiB=1e308")
    assert_clean_error(result, "workspace_GiB", "at most 1000 GiB", "1e+308")


def test_an_out_of_range_llm_option_in_a_spec_is_one_sentence(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('workloads = ["llama3-8b"]\n[llm.options]\nworkspace_GiB = 1e308\n', encoding="utf-8")
    result = run("sweep", spec, "--out", tmp_path / "c.h5", "-q")
    assert_clean_error(result, "[llm.options]", "workspace_GiB", "at most 1000 GiB")
    assert not (tmp_path / "c.h5").exists()
