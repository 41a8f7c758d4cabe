"""The model zoo (``paigrid.inputs.zoo``, ``datasets/zoo/*.toml``): every catalogue workload is
described by its layers and agrees with ``workloads.csv``; ``workload_classes.csv`` is exactly what
the zoo regenerates; a tiny model checks every derived number against a formula worked by hand;
bad zoo files fail with one sentence naming the file and the layer; the example of ``docs/zoo.md``
prints what the page shows."""

import csv
import math
import re
from pathlib import Path

import pytest

from paigrid.errors import PaigridError
from paigrid.inputs import zoo
from paigrid.inputs.catalog import Catalogues, load

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = load("workloads")
MODELS = {workload: model for model in zoo.builtin_models() for workload in model.workloads}

#: catalogue numbers the layer count disagrees with, beyond the tolerance: (workload, column) ->
#: (the zoo's value, why the catalogue is off).  The test checks the disagreement is still there,
#: so a corrected catalogue makes it fail until the entry is removed.
KNOWN_DISAGREEMENTS = {
    ("mask-rcnn", "fwd_GFLOP_per_sample"): (
        404.31,
        "the catalogue counts the mask head's 2x2/2 transposed conv over the 28x28 output "
        "(256 x 256 x 4 x 784 MAC per RoI) where it runs over the 14x14 input (256 x 256 x 4 "
        "x 196): 64 RoIs x 154 MMAC = 9.87 GMAC = 19.7 GFLOP too many",
    ),
    ("transformer-xl-large", "params_M"): (
        285.17,
        "the catalogue keeps the paper's 257M while its own FLOP count (and its notes: "
        "'about 283M') use run_wt103_large.sh, whose layers hold 285.2M parameters",
    ),
}


def tolerance(workload: str, column: str) -> float:
    """1% for parameters, 2% for FLOPs; 0.1% where the catalogue says it counted layer shapes."""
    source = WORKLOADS.row(workload)["params_source" if column == "params_M" else "flops_source"]
    if re.search(r"layer.shapes?\b", source):
        return 0.001
    return 0.01 if column == "params_M" else 0.02


def derived(workload: str, column: str) -> float:
    model = MODELS[workload]
    return model.params / 1e6 if column == "params_M" else model.flops() / 1e9


def test_every_catalogue_workload_is_described():
    """The catalogue's workloads are all in the zoo; the zoo's other models (the models of
    ``models_v2.csv``, ``tests/test_zoo_v2.py``) are not catalogue workloads, so they stay out of
    the default sweep, and each says which ``models_v2.csv`` row it describes."""
    assert set(WORKLOADS.names) <= set(MODELS)
    for workload in set(MODELS) - set(WORKLOADS.names):
        with pytest.raises(PaigridError):
            WORKLOADS.resolve(workload)
        assert MODELS[workload].v2, f"{workload} is neither a catalogue workload nor a models_v2.csv model"


@pytest.mark.parametrize("column", ["params_M", "fwd_GFLOP_per_sample"])
@pytest.mark.parametrize("workload", WORKLOADS.names)
def test_layer_counts_agree_with_the_catalogue(workload, column):
    value, stored = derived(workload, column), WORKLOADS.number(workload, column)
    if (workload, column) in KNOWN_DISAGREEMENTS:
        expected, why = KNOWN_DISAGREEMENTS[(workload, column)]
        assert value == pytest.approx(expected, rel=1e-4), why
        assert abs(value / stored - 1) > tolerance(workload, column), (
            f"the catalogue now agrees: remove {workload} {column} from KNOWN_DISAGREEMENTS"
        )
        return
    assert value == pytest.approx(stored, rel=tolerance(workload, column))


def test_exact_published_parameter_counts():
    """Where a source states the exact count, the layers give it to the parameter."""
    exact = {
        "resnet50-v1.5": 25_557_032,
        "resnet101": 44_549_160,
        "vgg16": 138_357_544,
        "inception-v3": 27_161_264,
        "gnmt": 160_671_297,
        "bert-base": 110_106_428,
        "gpt2-small": 124_439_808,
        "a3c": 677_943,
        "gcn": 164_905,
        "mask-rcnn": 44_401_393 - 222_400,
    }
    for workload, count in exact.items():
        assert MODELS[workload].params == count, workload


def test_regenerating_gives_the_stored_table():
    stored = (ROOT / "datasets" / zoo.OUTPUT_NAME).read_text(encoding="utf-8")
    assert zoo.classes_csv(zoo.builtin_models()) == stored
    assert zoo.main(["--check"]) == 0


def test_the_table_names_its_sources_inside_the_repository():
    text = (ROOT / "datasets" / zoo.OUTPUT_NAME).read_text(encoding="utf-8")
    rows = list(csv.DictReader(text.splitlines()))
    names = [r["name"] for r in rows]
    n = len(WORKLOADS.names)
    assert names[:n] == WORKLOADS.names  # the catalogue's rows first, in its order
    assert names[n:] == [w for model in zoo.builtin_models() for w in model.workloads if w not in WORKLOADS.names]
    for r in rows:
        assert r["source"].strip()
        assert (ROOT / r["derived_from"]).is_file(), r["derived_from"]
        if r["name"] in WORKLOADS.names:
            assert r["optimizer"] == WORKLOADS.row(r["name"])["optimizer"]
    assert all(
        c == "name"
        or c in ("optimizer", "source", "derived_from")
        or re.search(r"_(M|GFLOP_per_sample|MB_per_sample|MB_per_step|per_step|B_per_param)$", c)
        for c in zoo.columns()
    )


def test_fused_attention_keeps_and_moves_less():
    for workload, model in MODELS.items():
        assert model.kept_bytes("fused") <= model.kept_bytes("eager")
        assert model.flops("attention", "fused") <= model.flops("attention", "eager")
        if model.flops("attention") > 0 and any(layer.op == "attention" for layer in model.layers):
            assert model.act_bytes("attention", "fused") < model.act_bytes("attention", "eager"), workload
    gpt2 = MODELS["gpt2-small"]
    # causal: the fused kernel skips the masked half, (s + 1) / 2s of the pairs
    assert gpt2.flops("attention", "fused") == pytest.approx(gpt2.flops("attention") * 1025 / 2048)
    bert = MODELS["bert-large-seq512"]
    assert bert.flops("attention", "fused") == bert.flops("attention", "eager")


# ---------------------------------------------------------------------------------------------
# a tiny model, every number by hand

TINY = """
[blocks.pair]
args = ["n"]
layers = [
  { op = "linear", in = "n", out = 64, tokens = 10 },
  { op = "norm", kind = "layernorm", channels = 64, elements = 640 },
]

[models.tiny]
source = "a test model"
let = { c = 8 }
layers = [
  { op = "input", elements = "c*8*8" },
  { op = "conv", name = "conv", cin = "c", cout = 16, k = 3, stride = 2, out = 4 },
  { op = "embedding", rows = 100, dim = 32, lookups = 10 },
  { op = "linear", name = "linear", in = 32, out = 64, tokens = 10 },
  { op = "attention", heads = 2, head_dim = 8, q_len = 10, causal = true },
  { op = "rnn", cell = "lstm", input = 32, hidden = 16, steps = 10 },
  { op = "eltwise", kind = "relu", elements = 640, instances = 2 },
  { use = "pair", times = 3, n = 64 },
]
"""


@pytest.fixture(scope="module")
def tiny():
    (model,) = zoo.parse_zoo(TINY, "tiny.toml")
    return model


def test_tiny_model_parameters(tiny):
    conv = 16 * 8 * 3 * 3  # 1152, no bias by default
    embedding = 100 * 32  # 3200
    linear = 32 * 64 + 64  # 2112, bias by default
    lstm = 4 * 16 * (32 + 16) + 2 * 4 * 16  # 3200: 4 gates, two biases (cuDNN)
    pair = 64 * 64 + 64 + 2 * 64  # 4288: linear + layernorm scale and shift
    assert tiny.params == conv + embedding + linear + lstm + 3 * pair
    assert tiny.frozen_params == 0


def test_tiny_model_flops(tiny):
    conv = 2 * 16 * (8 * 9) * (4 * 4)  # 36864: 72-long reduction -> gemm_conv
    linear = 2 * 32 * 64 * 10 + 3 * 2 * 64 * 64 * 10
    attention = 4 * 2 * 8 * 10 * 10  # QK^T and AV: 6400
    attention_fused = 4 * 2 * 8 * (10 * 11 / 2)  # causal: 55 visible pairs
    lstm = 2 * 10 * 4 * 16 * (32 + 16)  # 61440
    assert tiny.flops("gemm_conv") == conv + linear
    assert tiny.flops("small_conv") == 0
    assert tiny.flops("attention", "eager") == attention
    assert tiny.flops("attention", "fused") == attention_fused
    assert tiny.flops("recurrent") == lstm
    assert tiny.flops() == conv + linear + attention + lstm
    # element-wise FLOPs: bias adds 1 per element (4 x 640), ReLU 1 (2 x 640), layernorm 6 (3 x 640)
    assert tiny.flops("elementwise_norm") == 4 * 640 + 2 * 640 + 6 * 3 * 640
    assert tiny.flops("embedding") == 0


def test_tiny_model_traffic(tiny):
    B = 4  # bytes per FP32 element
    conv = 8 * 8 * 8 + 16 * 4 * 4  # reads the 8x8 input (4x4 out x stride 2), writes 4x4
    linear = 10 * (32 + 64) + 3 * 10 * (64 + 64)
    assert tiny.act_bytes("gemm_conv") == B * (conv + linear)
    assert tiny.act_bytes("gemm_conv", train=True) == 3 * B * (conv + linear)
    X, S, L = 2 * 8 * (10 + 10 + 10 + 10), 2 * 10 * 10, 2 * 10  # Q+K+V+O, scores, row stats
    assert tiny.act_bytes("attention", "eager") == B * (3 * X + S * (6 + 2.25))
    assert tiny.act_bytes("attention", "eager", train=True) == B * (7 * X + S * (16 + 4.5))
    assert tiny.act_bytes("attention", "fused") == B * (X + L)
    assert tiny.act_bytes("attention", "fused", train=True) == B * (3 * X + 4 * L)
    assert tiny.act_bytes("recurrent") == B * 10 * (32 + 17 * 16)
    assert tiny.act_bytes("recurrent", train=True) == 3 * B * 10 * (32 + 17 * 16)
    assert tiny.act_bytes("embedding") == B * 2 * 10 * 32
    assert tiny.act_bytes("embedding", train=True) == B * 5 * 10 * 32
    bias, relu, norm = 640, 2 * 640, 3 * 640  # elements: each bias add, ReLU x 2 instances, 3 norms
    assert tiny.act_bytes("elementwise_norm") == B * (4 * 2 * bias + 2 * relu + 3 * norm)
    assert tiny.act_bytes("elementwise_norm", train=True) == B * (4 * 3 * bias + 5 * relu + 8 * norm)
    weights = {
        "gemm_conv": 1152 + 2112 + 3 * (64 * 64 + 64),
        "recurrent": 4 * 16 * 32 + 2 * 4 * 16 + 10 * 4 * 16 * 16,  # W_hh read every step
        "elementwise_norm": 3 * 128,
        "embedding": 0,
        "attention": 0,
        "small_conv": 0,
    }
    for cls, count in weights.items():
        assert tiny.weight_bytes(cls) == B * count, cls


def test_tiny_model_activations_and_launches(tiny):
    B = 4
    common = 8 * 8 * 8 + 10 * 32 + 3 * 10 * 64 + 10 * 7 * 16 + 2 * 640 + 3 * 640
    #        input       linear in  pair linear in  LSTM 7h/step  ReLU out   layernorm in
    q_k_v = 2 * 8 * 30
    assert tiny.kept_bytes("eager") == B * (common + q_k_v + 200 * 2.25)
    assert tiny.kept_bytes("fused") == B * (common + q_k_v + 20)
    assert tiny.launches("gemm_conv") == 1 + 1 + 3
    assert tiny.launches("attention", "eager") == 9
    assert tiny.launches("attention", "fused") == 1
    assert tiny.launches("recurrent") == 1 + 2 * 10
    assert tiny.launches("elementwise_norm") == 4 + 1 + 3
    assert tiny.launches("embedding") == 1
    assert tiny.launches() == 5 + 9 + 21 + 8 + 1


def test_optimizer_update_bytes():
    fp32 = {"sgd": 12, "momentum": 20, "adam": 28, "adamw": 28, "lamb": 40, "rmsprop": 20, "adagrad": 20}
    for name, count in fp32.items():
        assert zoo.optimizer_update_bytes_per_param(name) == count, name
    # AMP: FP32 master weight read + write 8, FP16 gradient 2, Adam state 16, FP16 copy written 2
    assert zoo.optimizer_update_bytes_per_param("adam", "amp-fp16") == 8 + 2 + 16 + 2
    assert zoo.optimizer_update_bytes_per_param("momentum", "fp8") == 8 + 2 + 8 + 3


# ---------------------------------------------------------------------------------------------
# bad zoo files: one sentence naming the file and the layer

GOOD_LAYER = '{ op = "linear", in = 4, out = 4 }'


def zoo_file(layers: str = GOOD_LAYER, head: str = "", model: str = 'source = "s"\n') -> str:
    return f"{head}\n[models.m]\n{model}layers = [\n  {layers},\n]\n"


BAD = [
    (zoo_file(model=""), ["'m'", "needs a 'source'"]),
    ('[models.m\nsource = "s"', ["is not valid TOML"]),
    (zoo_file('{ op = "conv2d", cin = 1 }'), ["layer #1", "unknown op 'conv2d'", "did you mean 'conv'"]),
    (zoo_file('{ op = "linear", in = 4, out = 4, tokenz = 3 }'), ["layer #1", "no field 'tokenz'", "'tokens'"]),
    (zoo_file('{ op = "conv", name = "c1", cin = 3, k = 3, out = 8 }'), ["layer #1 (c1)", "conv needs 'cout'"]),
    (zoo_file('{ op = "linear", in = "h*2", out = 4 }'), ["'in' = 'h*2'", "unknown name 'h'"]),
    (zoo_file('{ op = "linear", in = "4 +* 2", out = 4 }'), ["is not an arithmetic expression"]),
    (zoo_file('{ op = "linear", in = "__import__(1)", out = 4 }'), ["only numbers"]),
    (zoo_file('{ op = "linear", in = -4, out = 4 }'), ["'in' must be > 0"]),
    (zoo_file('{ op = "linear", in = 4.5, out = 4 }'), ["whole number"]),
    (zoo_file('{ op = "conv", cin = 6, cout = 4, k = 3, out = 8, groups = 4 }'), ["groups = 4 must divide"]),
    (zoo_file('{ op = "conv", cin = 6, cout = 4, k = [3, 3, 3], out = [8, 8] }'), ["'k' has 3 sizes"]),
    (zoo_file('{ use = "blok" }', head="[blocks.block]\nlayers = []"), ["no block 'blok'", "'block'"]),
    (zoo_file('{ use = "a" }', head='[blocks.a]\nlayers = [ { use = "a" } ]'), ["uses itself"]),
    (zoo_file('{ use = "b" }', head='[blocks.b]\nargs = ["n"]\nlayers = []'), ["needs the argument(s) n"]),
    (zoo_file('{ use = "b", n = 1, m = 2 }', head='[blocks.b]\nargs = ["n"]\nlayers = []'), ["no argument 'm'"]),
    (
        zoo_file('{ op = "attention", heads = 2, head_dim = 8, q_len = 10, kv_len = 5, causal = true }'),
        ["kv_len >= q_len"],
    ),
    (zoo_file('{ op = "eltwise", kind = "relux", elements = 4 }'), ["kind 'relux' is unknown", "'relu'"]),
    (zoo_file('{ op = "eltwise", kind = "maxpool", elements = 4 }'), ["needs 'in_elements'"]),
    (zoo_file('{ op = "rnn", cell = "rnn_tanh", input = 4, hidden = 4, steps = 2 }'), ["'lstm' or 'gru'"]),
    (zoo_file('{ op = "norm", kind = "rmsnorm", channels = 4, elements = 4 }'), ["norm kind 'rmsnorm'"]),
    (zoo_file('{ op = "linear", in = 4, out = 4, class = "dense" }'), ["'class' must be one of"]),
    (zoo_file('{ op = "linear", in = 4, out = 4, bias = "yes" }'), ["'bias'", "unknown name 'yes'"]),
    (zoo_file('{ op = "linear", in = 4, out = 4, times = -1 }'), ["'times' must be >= 0"]),
    (zoo_file(head='colour = "blue"'), ["a zoo file has no key 'colour'"]),
    (zoo_file(model='source = "s"\nsauce = 1\n'), ["a model has no key 'sauce'", "'source'"]),
    ('about = "nothing"\n', ["needs at least one [models.NAME] table"]),
    (zoo_file('"conv"'), ["layer #1", "must be a table"]),
    (zoo_file('{ op = "eltwise", elements = 4 }'), ["eltwise needs 'kind'"]),
    (zoo_file('{ op = "rnn", input = 4, hidden = 4 }'), ["rnn needs 'cell', 'steps'"]),
    (zoo_file('{ op = ["conv"] }'), ["'op' must be a name"]),
    (zoo_file("{ use = 3 }"), ["'use' must name a block"]),
    (zoo_file('{ op = "linear", in = "2**1000", out = 4 }'), ["a power is limited"]),
    (zoo_file('{ op = "linear", in = "max()", out = 4 }'), ["max() cannot take 0 argument(s)"]),
    (zoo_file(head="blocks = 3"), ["'blocks' must hold [blocks.NAME] tables"]),
    (zoo_file('{ op = "linear", in = 4, out = 4, times = 2, index = 3 }'), ["'index' must be a name"]),
    (zoo_file(model='source = "s"\neach = { s = [1, 2] }\n'), ["needs its names in the model name"]),
    (zoo_file(model='source = "s"\neach = { s = 3 }\n'), ["'each' must be a table of name = [value, ...]"]),
    (zoo_file(model='source = "s"\naliases = "x"\n'), ["'aliases' must be a list"]),
    (zoo_file(model='source = "s"\nv2 = { models = "x" }\n'), ["'v2' must be a table naming"]),
    (zoo_file(model='source = "s"\nv2 = { model = "x", param = 1 }\n'), ["'v2' table has no key 'param'"]),
    (zoo_file(model='source = "s"\nv2 = { model = "x", params_M = 1 }\n'), ["needs its 'source'"]),
]


@pytest.mark.parametrize("text,fragments", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_zoo_input_is_one_sentence(text, fragments):
    with pytest.raises(PaigridError) as caught:
        zoo.parse_zoo(text, "bad.toml")
    message = str(caught.value)
    assert message.startswith("bad.toml") and message.endswith(".") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message


def test_indexed_repeats_and_each_variants():
    """``index`` gives each copy of a repeated layer its number; ``each`` makes one model per
    value, its name, source, alias size and numbers formatted with the value."""
    text = """
[blocks.grow]
args = ["cin"]
layers = [ { op = "linear", in = "cin", out = 8, bias = false } ]

[models."m-seq{s}"]
source = "at {s}"
each = { s = [2, 4] }
aliases = ["M"]
alias_size = "{s}"
v2 = { model = "M", params = "s == 4" }
layers = [ { use = "grow", times = 3, index = "i", cin = "s + 10*i" } ]
"""
    short, long = zoo.parse_zoo(text, "t.toml")
    assert (short.name, long.name, long.source) == ("m-seq2", "m-seq4", "at 4")
    assert short.params == 8 * (2 + 12 + 22) and long.params == 8 * (4 + 14 + 24)
    assert [layer.path for layer in short.layers] == [
        "#1 (use grow) [i=0] > #1 (linear)",
        "#1 (use grow) [i=1] > #1 (linear)",
        "#1 (use grow) [i=2] > #1 (linear)",
    ]
    assert short.aliases == [("M", "2")] and not short.v2["params"] and long.v2["params"]
    assert zoo.resolve_measured("m", "4", [short, long]) == "m-seq4"


def test_nested_layer_paths_name_the_block(tmp_path):
    text = zoo_file(
        '{ use = "b", name = "stage2", times = 2 }',
        head='[blocks.b]\nlayers = [ { op = "linear", name = "fc", in = 4, out = 0 } ]',
    )
    with pytest.raises(PaigridError, match=r"model 'm', layer #1 \(stage2\) > #1 \(fc\): 'out' must be > 0"):
        zoo.parse_zoo(text, "bad.toml")


def test_missing_zoo_file_and_cli_errors(tmp_path, capsys):
    with pytest.raises(PaigridError, match="does not exist"):
        zoo.load_zoo(tmp_path / "none.toml")
    (tmp_path / "bad.toml").write_text(zoo_file('{ op = "conv" }'))
    assert zoo.main(["--show", str(tmp_path / "bad.toml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paigrid: error:") and len(err.strip().splitlines()) == 1


def test_stale_table_is_reported(tmp_path, capsys):
    (tmp_path / "old.csv").write_text("name\n")
    assert zoo.main(["--check", "--out", str(tmp_path / "old.csv")]) == 1
    assert zoo.main(["--out", str(tmp_path / "new.csv")]) == 0
    assert zoo.main(["--check", "--out", str(tmp_path / "new.csv")]) == 0


# ---------------------------------------------------------------------------------------------
# the example of docs/zoo.md


def test_docs_example_prints_what_the_page_shows(tmp_path, capsys):
    page = (ROOT / "docs" / "zoo.md").read_text(encoding="utf-8")
    example = re.search(r"```toml\n(.*?)```", page, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", page, re.S).group(1)
    (tmp_path / "tiny-vit.toml").write_text(example)
    assert zoo.main(["--show", str(tmp_path / "tiny-vit.toml")]) == 0
    assert capsys.readouterr().out == shown
    (model,) = zoo.load_zoo(tmp_path / "tiny-vit.toml")
    # the page's arithmetic: patch conv 3*16*16*128 + 128, two layers of 12 h^2 + 13 h, final
    # layernorm 2h, head 10 h + 10
    h, s = 128, 16
    assert model.params == 3 * 256 * h + h + 2 * (12 * h * h + 13 * h) + 2 * h + 10 * h + 10
    patches = 2 * (3 * 256) * h * s  # the conv: a 768-long reduction per output
    layer = 2 * 12 * h * h * s + 4 * s * s * h  # projections and FFN, QK^T and AV
    assert math.isclose(model.flops(), patches + 2 * layer + 2 * h * 10)


# ---------------------------------------------------------------------------------------------
# the unfused tanh GELU and the tensors that stay FP32 under autocast

GELU_AMP = """
[models.m]
source = "a test model"
layers = [
  { op = "eltwise", kind = "gelu_tanh", elements = 100 },
  { op = "eltwise", kind = "gelu", elements = 100 },
  { op = "norm", kind = "layernorm", channels = 10, elements = 100 },
  { op = "norm", kind = "batchnorm", channels = 10, elements = 100 },
  { op = "eltwise", kind = "add", elements = 100, amp_fp32 = true },
  { op = "eltwise", kind = "add", elements = 100 },
  { op = "eltwise", kind = "log_softmax", elements = 100, amp_fp32 = false },
]
"""


def test_gelu_tanh_counts_eight_kernels_and_autocast_fp32_tensors():
    (model,) = zoo.parse_zoo(GELU_AMP, "gelu.toml")
    gelu_tanh, gelu, layernorm, batchnorm, add32, add, log_softmax = model.layers
    # HF gelu_new: 8 forward kernels, 10 reads + 8 writes forward, 28 accesses backward, 4 kept
    assert gelu_tanh.launches["eager"] == 8 and gelu.launches["eager"] == 1
    assert gelu_tanh.act["eager"] == 18 * 100 and gelu_tanh.train["eager"] == (18 + 28) * 100
    assert gelu_tanh.kept["eager"] == 4 * 100
    # autocast float32 ops (layer_norm, pow in gelu_tanh, log_softmax) and the marked add stay FP32
    assert gelu_tanh.amp_fp32 == gelu_tanh.train and layernorm.amp_fp32 == layernorm.train
    assert add32.amp_fp32 == add32.train
    for layer in (gelu, batchnorm, add, log_softmax):
        assert layer.amp_fp32 == {"eager": 0.0, "fused": 0.0}, layer.path
    expected = 4 * (gelu_tanh.train["eager"] + layernorm.train["eager"] + add32.train["eager"])
    assert model.amp_fp32_bytes("elementwise_norm") == expected


EMBEDDING_AMP = """
[models.m]
source = "a test model"
layers = [
  { op = "embedding", rows = 1000, dim = 16, lookups = 4 },
  { op = "embedding", rows = 1000, dim = 16, lookups = 4, trainable = false },
  { op = "embedding", rows = 1000, dim = 16, lookups = 4, amp_fp32 = false },
  { op = "linear", in = 16, out = 16, tokens = 4, bias = false },
]
"""


def test_embedding_traffic_stays_fp32_under_mixed_precision():
    """Tables are FP32 variables that no framework's mixed precision casts: all of a lookup's
    forward and backward traffic (frozen or trainable) is counted FP32, unless the layer says
    ``amp_fp32 = false``; the column ``embedding_amp_fp32_train_MB_per_sample`` carries it."""
    (model,) = zoo.parse_zoo(EMBEDDING_AMP, "embedding.toml")
    trainable, frozen, marked_off, linear = model.layers
    assert trainable.amp_fp32 == trainable.train and trainable.train["eager"] == 2 * 4 * 16 + 3 * 4 * 16
    assert frozen.amp_fp32 == frozen.train and frozen.train["eager"] == 2 * 4 * 16 + 4 * 16
    for layer in (marked_off, linear):
        assert layer.amp_fp32 == {"eager": 0.0, "fused": 0.0}, layer.path
    expected = 4 * (trainable.train["eager"] + frozen.train["eager"])
    assert model.amp_fp32_bytes("embedding") == expected
    row = zoo.row(model, "m", "", Catalogues.load().optimizers, Catalogues.load().precisions)
    assert float(row["embedding_amp_fp32_train_MB_per_sample"]) == pytest.approx(expected / 1e6)


NCHW_CONVS = """
[models.m]
source = "a test model"
layers = [
  { op = "conv", cin = 64, cout = 64, k = 3, out = [8, 8] },
  { op = "conv", cin = 64, cout = 64, k = 3, out = [8, 8], groups = 64 },
  { op = "linear", in = 16, out = 16, tokens = 4, bias = false },
]
"""


def test_nchw_transposes_count_six_accesses_of_a_tensor_core_convolutions_tensors():
    """Forward, backward-data and backward-filter each transpose their two activation tensors
    in and out of NHWC: 6 x (input + output) elements for a gemm_conv convolution; a depthwise
    convolution (native NCHW kernels) and a linear layer none."""
    (model,) = zoo.parse_zoo(NCHW_CONVS, "nchw.toml")
    dense, depthwise, linear = model.layers
    assert dense.cls == "gemm_conv" and depthwise.cls == "small_conv"
    assert dense.nchw_transpose == 6 * (64 * 64 + 64 * 64)
    assert depthwise.nchw_transpose == 0.0 and linear.nchw_transpose == 0.0
    assert model.nchw_transpose_bytes() == 4 * dense.nchw_transpose
    row = zoo.row(model, "m", "", Catalogues.load().optimizers, Catalogues.load().precisions)
    assert float(row["gemm_conv_nchw_transpose_train_MB_per_sample"]) == pytest.approx(4 * dense.nchw_transpose / 1e6)


AMP_CASTS = """
[models.m]
source = "a test model"
let = { T = 10 }
layers = [
  { op = "eltwise", kind = "softmax", elements = 16, launches = "T", amp_casts = "T" },
  { op = "matmul", m = 1, n = 4, k = 16, times = 2, launches = "T", amp_casts = "T" },
  { op = "linear", in = 16, out = 16, tokens = 4, bias = false },
]
"""


def test_amp_casts_count_per_forward_step_and_repeat_with_times():
    """``amp_casts`` is the cast kernels one forward step launches for a layer's inputs under
    mixed precision: the row sums them over the layers, ``times`` included (each repeat is its own
    call), a layer without the key counts none, and the per-sample numbers do not change."""
    (model,) = zoo.parse_zoo(AMP_CASTS, "casts.toml")
    softmax, matmul, linear = model.layers
    assert (softmax.amp_casts, matmul.amp_casts, linear.amp_casts) == (10.0, 10.0, 0.0)
    assert model.amp_cast_launches() == 10.0 + 2 * 10.0
    cats = Catalogues.load()
    row = zoo.row(model, "m", "", cats.optimizers, cats.precisions)
    assert float(row["amp_cast_launches_per_step"]) == 30.0
    (plain,) = zoo.parse_zoo(AMP_CASTS.replace(', amp_casts = "T"', ""), "casts.toml")
    assert plain.amp_cast_launches() == 0.0
    assert plain.act_bytes(train=True) == model.act_bytes(train=True)
    assert plain.launches() == model.launches()


def test_amp_casts_must_be_a_count():
    with pytest.raises(PaigridError, match="amp_casts"):
        zoo.parse_zoo(AMP_CASTS.replace('amp_casts = "T" }', "amp_casts = -1 }", 1), "casts.toml")
