"""The model zoo: workloads described by their layers, and the per-operator-class numbers derived
from them (the input of compute model v2).

A zoo file (TOML, ``datasets/zoo/*.toml``; see ``docs/zoo.md``) lists models as layers with
shapes.  Parameterised ``blocks`` and ``times`` (repetition) keep a ResNet or a Transformer short;
every model carries a ``source``.  Numbers may be arithmetic expressions over the model's ``let``
names and a block's arguments.  ``python -m paigrid.inputs.zoo`` regenerates
``datasets/workload_classes.csv`` and ``datasets/zoo_workloads.csv`` (the catalogue rows of zoo
workloads that ``workloads.csv`` lacks, with the facts the layers do not give from
``datasets/zoo_workload_rules.csv``) from the built-in zoo; ``--check`` compares instead of writing,
``--show FILE.toml`` prints the per-class numbers of a user's zoo file, ``--docs PAGE.md``
rewrites the table of zoo models in ``docs/zoo.md``.

A layer or block used ``times = n`` with ``index = "i"`` is n copies that differ, the i-th
evaluated with i = 0 .. n - 1 (DenseNet's growing inputs, a stage whose first block strides).
A model with ``each = { s = [...] }`` is one model per value, ``{s}`` in its name, source and
``alias_size`` replaced by it (MPT at each sequence length).  ``aliases`` (with
``alias_size``) are the spellings of ``measured_public_v2.csv``'s ``model`` column that mean
the model (``resolve_measured``); ``v2`` names the ``models_v2.csv`` row(s) it describes and
how its parameters and FLOPs compare with them (``tests/test_zoo_v2.py``); ``per_sample``
counts the other units of one sample (mel frames, audio samples, tokens).  ``divisible(v, d)``
is the MobileNet/EfficientNet channel rounding.

Units and conventions
---------------------
Everything is per sample (one image, one sequence, one utterance: the catalogue's sample) unless
the name says ``per_step`` (one forward pass of a batch, independent of the batch size).
1 FLOP = one multiply or add (a multiply-add is 2 FLOPs); 1 GFLOP = 1e9 FLOP.  Bytes are FP32
(4 bytes per element; a dropout mask element is 1 byte = 0.25 element); 1 MB = 1e6 bytes.
``instances`` multiplies the per-sample numbers of a layer (128 RoIs through one head, the three
critic passes of a WGAN step) but not its parameters, weight traffic or launches; ``times``
repeats a layer or block with its own weights, so it multiplies everything.

Operator classes
----------------
``gemm_conv``          dense convolutions and matrix multiplies (``conv``, ``linear``, ``matmul``)
``small_conv``         convolutions with groups > 1 (depthwise, grouped), a reduction length
                       cin/groups x kernel area below 64, or fewer than 16 output channels
``recurrent``          LSTM/GRU cells (``rnn``): input projection and recurrent GEMMs
``attention``          scaled dot-product attention (``attention``), in two variants:
                       ``eager`` (the s x s score matrix is materialised: batched GEMM, scale and
                       mask, softmax, dropout, batched GEMM) and ``fused`` (FlashAttention: one
                       kernel, no score matrix); ``matmul``/``linear`` with class "attention"
                       (additive attention, relative-position terms) count the same in both
``elementwise_norm``   ``norm`` (batchnorm, layernorm, groupnorm) and ``eltwise`` ops, and the
                       bias add of a conv or linear layer with a bias (its own kernel, as
                       TensorFlow's BiasAdd and PyTorch's addmm bias copy)
``embedding``          table lookups (``embedding``)

Counting rules (forward unless said otherwise)
----------------------------------------------
Parameters: conv ``cout x cin/groups x kernel area (+ cout bias)``; linear ``in x out (+ out)``;
rnn ``directions x (G h (input + h) + biases G h)`` with G = 4 (LSTM) or 3 (GRU) gates;
norm ``2 x channels`` (``frozen`` norms hold constants, not parameters); embedding ``rows x dim``;
``params`` adds a count.  ``shared = true`` (tied weights) counts no parameters but reads the
weights; ``trainable = false`` moves a layer's parameters to ``frozen_params``.

FLOPs: conv ``2 cout (cin/groups) kernel-area x output positions`` (a ``transposed`` conv:
x input positions); linear ``2 in out tokens``; matmul ``2 m n k count``; rnn
``2 directions steps G h (input + h)``; attention ``4 heads head_dim q_len kv_len`` (QK^T and
attention x V; a causal mask is not exploited by eager kernels; the fused variant counts only the
visible query-key pairs).  ``fwd_GFLOP_per_sample`` sums the compute-bound classes (gemm_conv,
small_conv, recurrent, attention eager), the catalogue's definition.  Element-wise FLOPs (one per
arithmetic operation per element, table ``ELTWISE``) are reported apart and never in that sum.

Activation traffic (``<class>_MB_per_sample``: elements read + written by the forward kernels;
``<class>_train_MB_per_sample``: forward + backward):
- conv, linear, matmul: read the input, write the output; backward reads the output gradient
  twice, the input once and writes the input gradient, so train = 3 x forward.
- rnn, per direction and step: read x_t and h_(t-1), write the G h gate pre-activations and read
  them back, read c_(t-1) (LSTM), write the kept tensors (7h LSTM, 5h GRU): input + 17h (LSTM),
  input + 12h (GRU); train = 3 x forward.
- attention, with S = heads q_len kv_len score elements, X = Q + K + V + O the head tensors and
  d = 1 with dropout (0 without): eager forward 3 X + S (6 + 2.25 d), train 7 X + S (16 + 4.5 d)
  (the four head transposes Q, K, V, context 2 X forward + 2 X backward; the two batched GEMMs
  X forward + 2 X backward; on S: write, scale/mask 2, softmax 2, dropout 2.25, read P forward;
  dP 1, dropout 2.25, softmax 4, scale 2, dS read twice, P read once backward); fused forward
  X + L, train 3 X + 4 L, L = heads q_len (the row statistics).
- norm and eltwise: per element read/write counts of tables ``NORMS`` and ``ELTWISE`` (forward,
  backward, in terms of the input and output elements: batchnorm/layernorm 3 forward + 5
  backward, frozen norm 2 + 2, ReLU 2 + 3, residual add 3 + 3, bias 2 + 1, scale/mask 2 + 2,
  softmax 2 + 4, dropout 2.25 + 2.25, GELU 2 + 3, concat/copy 2 + 2, as ``datasets/README.md``'s
  per-op count).  ``gelu_tanh`` is the unfused tanh-approximation GELU of Hugging Face GPT-2
  (``NewGELUActivation``: 8 forward kernels pow, 3 scalar multiplies, 2 adds, tanh, multiply):
  forward 18 accesses per element (10 reads, 8 writes), backward 28 (the two products' gradients
  6, tanh backward 3, two scalar multiplies 4, pow backward 7, the 0.5 x multiply 2, summing the
  three gradients of x 6), kept x, 0.5 x, tanh and 1 + tanh (4 per element), 8 launches.
  ``in_elements`` gives the input size of a pool, mean or copy that changes it.
- embedding: read the rows and write the output (2 lookups x dim); backward reads the output
  gradient and, for a trainable table, reads and writes the gradient rows.
- ``backward = false`` marks a layer no backward pass reaches (frozen layers at the start of a
  network): its train traffic is its forward traffic.
Mixed precision (``elementwise_norm_amp_fp32_train_MB_per_sample``): the part of the
element-wise/norm train traffic whose tensors stay FP32 under PyTorch autocast, counted at 4
bytes under AMP too (the rest of the traffic moves the precision's activation bytes): layer and
group norms, softmax, log-softmax and ``gelu_tanh`` (they autocast to float32, table
``AUTOCAST_FP32``), and the layers marked ``amp_fp32 = true``: ops autocast does not list run in
the widest input type, so an add or dropout on an FP32 residual stream (which starts at an FP32
embedding or a LayerNorm output) stays FP32; ``amp_fp32 = false`` turns the rule off for a layer.
Embedding lookups (``embedding_amp_fp32_train_MB_per_sample``) stay FP32 too, all of their
traffic: mixed precision keeps the tables as FP32 variables and no framework casts a lookup
(PyTorch autocast's op lists name no embedding op, so it runs in its FP32 weight's type;
TensorFlow's automatic mixed precision rewrites op types and inserts casts but never changes a
variable, so the gather reads FP32 rows and the gradient rows are FP32), ``EMBEDDING_AMP_SOURCE``.
Memory layout (``gemm_conv_nchw_transpose_train_MB_per_sample``): cuDNN's tensor-core convolutions
take NHWC tensors, so under half precision and TF32 an NCHW network (PyTorch's default layout) transposes
each gemm_conv convolution's activation tensors in and out of NHWC in each of the three calls of a
step: 6 accesses per element of input + output (``NCHW_TRANSPOSE_ACCESSES``); a channels-last
network moves none, nor do depthwise and grouped convolutions (native NCHW kernels).
Weight traffic (``<class>_weight_MB_per_step``): the parameters each forward pass of a batch
reads once (tied weights included); an rnn reads its recurrent matrix at every step; embedding
rows are per sample, in the activation traffic.  Backward reads the weights again and writes
their gradients (3 x forward).

Activations kept for backward (``activation_<variant>_MB_per_sample``), each tensor once:
the ``input``; a norm's input (not when frozen); a ReLU/tanh/sigmoid/softmax output; a GELU
input; a dropout mask (1 byte); pool and concat outputs; a linear layer's input (a conv keeps
nothing of its own: its input is a ReLU, pool or input tensor already kept); a matmul's two
inputs; an rnn's 7h (LSTM) or 5h (GRU) per direction and step; eager attention Q, K, V, the
softmax output and, with dropout, its mask and output (Korthikanti et al. 2023: 9 a s k bytes);
fused attention Q, K, V and the row statistics.  ``saved = EXPR`` overrides a layer's count (in
elements) where a tensor is shared; ``log_softmax`` keeps its input logits too (TensorFlow's
fused cross-entropy).

Kernel launches per forward step (``<class>_launches_per_step``), independent of the batch: 1 per
conv, linear, matmul, norm, eltwise op (8 for ``gelu_tanh``), bias add and embedding table; an rnn
1 + 2 x steps per direction (cuDNN: input GEMM, then a recurrent GEMM and a pointwise kernel per step); eager
attention 8 (+1 with dropout: 4 transposes, 2 batched GEMMs, scale/mask, softmax), fused 1;
``launches = EXPR`` overrides (TensorFlow's unfused LSTM cells, decoder loops).
Mixed-precision casts (``amp_cast_launches_per_step``): ``amp_casts = EXPR`` on a layer counts the
cast kernels per forward step that mixed precision launches for its inputs, where the source
shows an FP32 activation entering an op autocast runs in half precision (a conv, linear or bmm
after a softmax), a half-precision one entering an op autocast runs in FP32 (softmax) or a
``cat`` of both (autocast promotes to the widest type): PyTorch documentation, "Automatic Mixed
Precision package - torch.amp", CUDA op reference; apex amp O1 casts at the same op lists.
Per forward step, like ``launches`` (a cast in a decoder loop runs once a frame); pai-v2 counts
each twice (the cast and its gradient's cast back) at a half precision only.  Weight casts are
not counted here (autocast caches them per forward; the fitted launch time carries them).

Optimizer update traffic per parameter per step (``optimizer_update_bytes_per_param``): read and
write the FP32 (master) weight, read the gradient (``grad_bytes_per_param`` of the precision),
read and write each 4-byte state slot (``state_bytes_per_param`` of ``optimizers.csv``), write the
low-precision working copy (``weight_bytes_per_param - 4``); LAMB adds 12 bytes (writes and reads
back the update, reads the weight again for the trust ratio).  FP32: SGD 12, momentum 20,
Adam/AdamW 28, LAMB 40, RMSProp/Adagrad 20 bytes per parameter.
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import difflib
import fnmatch
import functools
import hashlib
import io
import itertools
import math
import sys
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from paigrid.errors import PaigridError
from paigrid.files import read_text, write_text_atomically
from paigrid.inputs.catalog import Catalogue, builtin_text, check_rows, csv_table, load

CLASSES = ("gemm_conv", "small_conv", "recurrent", "attention", "elementwise_norm", "embedding")
VARIANTS = ("eager", "fused")
#: classes whose FLOPs make the catalogue's ``fwd_GFLOP_per_sample`` (convolutions and matmuls)
COMPUTE_CLASSES = ("gemm_conv", "small_conv", "recurrent", "attention")
BYTES_PER_ELEMENT = 4
SMALL_CONV_REDUCTION = 64
SMALL_CONV_CHANNELS = 16
OUTPUT_NAME = "workload_classes.csv"
LAMB_EXTRA_BYTES = 12

#: element-wise kinds: (forward reads per input element, forward writes per output element,
#: backward accesses per input element, backward accesses per output element, kept elements per
#: input element, kept elements per output element, forward FLOPs per output element)
ELTWISE = {
    "relu": (1, 1, 1, 2, 0, 1, 1),
    "clipped_relu": (1, 1, 1, 2, 0, 1, 2),
    "tanh": (1, 1, 1, 2, 0, 1, 1),
    "sigmoid": (1, 1, 1, 2, 0, 1, 1),
    "gelu": (1, 1, 2, 1, 1, 0, 8),
    "silu": (1, 1, 2, 1, 1, 0, 4),
    "hardswish": (1, 1, 2, 1, 1, 0, 4),
    "hardsigmoid": (1, 1, 1, 2, 0, 1, 3),
    "gelu_tanh": (10, 8, 20, 8, 1, 3, 9),
    "add": (2, 1, 2, 1, 0, 0, 1),
    "mul": (2, 1, 4, 1, 0, 0, 1),
    "bias": (1, 1, 0, 1, 0, 0, 1),
    "scale": (1, 1, 1, 1, 0, 0, 1),
    "softmax": (1, 1, 1, 3, 0, 1, 5),
    "log_softmax": (1, 1, 1, 3, 1, 1, 5),
    "dropout": (1, 1.25, 1, 1.25, 0, 0.25, 1),
    "concat": (1, 1, 1, 1, 0, 1, 0),
    "copy": (1, 1, 1, 1, 0, 0, 0),
    "maxpool": (1, 1, 2, 2, 0, 1, 0),
    "avgpool": (1, 1, 1, 1, 0, 1, 0),
    "mean": (1, 1, 1, 1, 0, 0, 0),
}
#: forward kernels of an element-wise kind that is not one kernel (default 1): ``gelu_tanh`` is
#: the tanh-approximation GELU written as eight PyTorch tensor operations (Hugging Face
#: transformers ``NewGELUActivation``, ``gelu_new``: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
#: x^3))), each its own kernel in eager mode)
ELTWISE_LAUNCHES = {"gelu_tanh": 8.0}
#: kinds whose traffic stays FP32 under PyTorch autocast (mixed precision): layer_norm,
#: group_norm, softmax and log_softmax autocast to float32, and gelu_tanh's pow does too, so the
#: rest of that composition widens to float32 (PyTorch documentation, "Automatic Mixed Precision
#: package - torch.amp", CUDA ops that can autocast to float32)
AUTOCAST_FP32 = ("layernorm", "groupnorm", "softmax", "log_softmax", "gelu_tanh")
#: accesses per element of a gemm_conv convolution's input + output that an NCHW network adds
#: under half precision and TF32: cuDNN's tensor-core convolution kernels take NHWC tensors, so each of
#: the three calls of a training step (forward, backward data, backward filter) transposes its
#: two activation tensors (X and Y; dY and dX; X and dY) in and out of NHWC, a read and a write
#: of each (NVIDIA Deep Learning Performance documentation, 'Convolutional Layers User's Guide',
#: Tensor Layouts In Memory: NCHW vs NHWC; PyTorch's tutorial '(beta) Channels Last Memory
#: Format': channels-last avoids these transposes); depthwise and grouped convolutions have
#: native NCHW kernels and count none
NCHW_TRANSPOSE_ACCESSES = 6.0
#: why embedding traffic stays FP32 under mixed precision (the embedding rule of the docstring)
EMBEDDING_AMP_SOURCE = (
    "PyTorch Automatic Mixed Precision package documentation (torch.amp, 'Autocast Op Reference': embedding is on "
    "no cast list, so it runs in the type of its FP32 weight); NVIDIA Training With Mixed Precision user guide "
    "(TensorFlow automatic mixed precision: the graph rewrite casts op inputs, variables and their updates stay FP32)"
)
#: norms: (forward reads per element, forward writes, backward accesses, kept, forward FLOPs)
NORMS = {"batchnorm": (2, 1, 5, 1, 6), "layernorm": (2, 1, 5, 1, 6), "groupnorm": (2, 1, 5, 1, 6)}
FROZEN_NORM = (1, 1, 2, 0, 2)
#: pooling kinds whose input is larger than their output (``in_elements`` required)
NEEDS_INPUT = ("maxpool", "avgpool", "mean")

COMMON = {"op", "name", "times", "index", "instances", "saved", "launches", "backward", "note", "amp_casts"}
FIELDS = {
    "input": ({"elements"}, set()),
    "params": ({"count"}, {"trainable"}),
    "conv": (
        {"cin", "cout", "k", "out"},
        {"stride", "groups", "bias", "in", "transposed", "trainable", "shared", "class"},
    ),
    "linear": ({"in", "out"}, {"tokens", "bias", "trainable", "shared", "class"}),
    "matmul": ({"m", "n", "k"}, {"count", "class"}),
    "rnn": ({"cell", "input", "hidden", "steps"}, {"directions", "biases", "trainable"}),
    "attention": ({"heads", "head_dim", "q_len"}, {"kv_len", "causal", "dropout"}),
    "norm": ({"kind", "channels", "elements"}, {"affine", "frozen", "trainable", "amp_fp32"}),
    "eltwise": ({"kind", "elements"}, {"in_elements", "amp_fp32"}),
    "embedding": ({"rows", "dim", "lookups"}, {"trainable", "shared", "amp_fp32"}),
}
USE_KEYS = {"use", "name", "times", "index", "instances", "note"}
MODEL_KEYS = {
    "source",
    "layers",
    "let",
    "workloads",
    "sample",
    "notes",
    "optimizer",
    "each",
    "aliases",
    "alias_size",
    "v2",
    "per_sample",
}
#: keys of a model's ``v2`` table: the ``models_v2.csv`` row it describes, whether its parameters
#: and FLOPs are compared with that row's, an independent count where the row has none, and the
#: recorded reason where the layers disagree with the row
V2_KEYS = {"model", "params", "flops", "params_M", "gflops", "source", "params_note", "flops_note"}
BLOCK_KEYS = {"args", "defaults", "let", "layers", "note"}
FILE_KEYS = {"about", "blocks", "models"}
CLASS_OVERRIDES = ("gemm_conv", "small_conv", "attention")


def _divisible(value: float, divisor: float = 8) -> float:
    """``value`` rounded to a multiple of ``divisor`` (at least ``divisor``, never 10% below
    ``value``): the channel rounding of the TensorFlow MobileNet/EfficientNet code and timm's
    ``make_divisible``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


FUNCTIONS = {"ceil": math.ceil, "floor": math.floor, "min": min, "max": max, "sqrt": math.sqrt, "divisible": _divisible}


@dataclass
class Layer:
    """One expanded layer: its numbers per copy (per instance for per-sample ones) and multipliers.

    ``flops``, ``act``, ``train``, ``kept`` and ``launches`` map a variant (eager, fused) to the
    count; ``act``/``train``/``kept``/``weight`` are in elements (x 4 bytes)."""

    path: str
    op: str
    cls: str
    times: float
    instances: float
    params: float = 0.0
    frozen: float = 0.0
    weight: float = 0.0
    flops: dict = field(default_factory=dict)
    act: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)
    kept: dict = field(default_factory=dict)
    launches: dict = field(default_factory=dict)
    amp_fp32: dict = field(default_factory=lambda: {v: 0.0 for v in VARIANTS})
    #: elements per sample the NCHW <-> NHWC transposes around a tensor-core convolution move
    #: (forward + backward; ``NCHW_TRANSPOSE_ACCESSES``), 0 for every other layer
    nchw_transpose: float = 0.0
    #: cast kernels per forward step that mixed precision launches for this layer's inputs
    #: (``amp_casts``), 0 unless the layer says
    amp_casts: float = 0.0


@dataclass
class Model:
    """A zoo model after expansion: its layers, where it came from and its source."""

    name: str
    source: str
    origin: str
    workloads: list[str]
    layers: list[Layer]
    sample: str = ""
    optimizer: str = ""
    #: measured spellings of the model (``measured_public_v2.csv``'s ``model`` column) and the
    #: ``seq_len_or_image_size`` each applies at ("" = any)
    aliases: list[tuple[str, str]] = field(default_factory=list)
    #: the ``v2`` table: ``model`` (the ``models_v2.csv`` rows, a list), ``params`` and ``flops`` (bools:
    #: compare with the row's figures), ``params_M``/``gflops`` (an independent count), ``source``,
    #: ``params_note``/``flops_note`` (why the layers disagree); empty without one
    v2: dict = field(default_factory=dict)
    #: counts of other units in one sample ("mel frames", "audio samples", "tokens"), for
    #: throughputs measured in them
    per_sample: dict[str, float] = field(default_factory=dict)

    @property
    def params(self) -> float:
        """Trainable parameters."""
        return sum(layer.params * layer.times for layer in self.layers)

    @property
    def frozen_params(self) -> float:
        """Parameters of frozen (``trainable = false``) layers."""
        return sum(layer.frozen * layer.times for layer in self.layers)

    def _sum(self, what: str, cls: str | None, variant: str, per_sample: bool) -> float:
        total = 0.0
        for layer in self.layers:
            if cls is None or layer.cls == cls:
                value = getattr(layer, what)
                value = value[variant] if isinstance(value, dict) else value
                total += value * layer.times * (layer.instances if per_sample else 1.0)
        return total

    def flops(self, cls: str | None = None, variant: str = "eager") -> float:
        """Forward FLOPs per sample of one class, or of the compute-bound classes (``cls`` None)."""
        if cls is None:
            return sum(self._sum("flops", c, variant, True) for c in COMPUTE_CLASSES)
        return self._sum("flops", cls, variant, True)

    def act_bytes(self, cls: str | None = None, variant: str = "eager", train: bool = False) -> float:
        """Activation bytes read + written per sample (forward, or forward + backward)."""
        return BYTES_PER_ELEMENT * self._sum("train" if train else "act", cls, variant, True)

    def weight_bytes(self, cls: str | None = None) -> float:
        """Weight bytes read by one forward step (batch-independent)."""
        return BYTES_PER_ELEMENT * self._sum("weight", cls, "eager", False)

    def amp_fp32_bytes(self, cls: str | None = None, variant: str = "eager") -> float:
        """Forward + backward activation bytes per sample (at FP32, part of ``act_bytes(train=True)``)
        of the layers whose tensors stay FP32 under mixed precision (autocast)."""
        return BYTES_PER_ELEMENT * self._sum("amp_fp32", cls, variant, True)

    def nchw_transpose_bytes(self) -> float:
        """FP32 bytes per sample of the layout transposes cuDNN runs around the tensor-core
        convolutions of an NCHW network (forward + backward, ``NCHW_TRANSPOSE_ACCESSES``)."""
        return BYTES_PER_ELEMENT * sum(layer.nchw_transpose * layer.times * layer.instances for layer in self.layers)

    def amp_cast_launches(self) -> float:
        """Cast kernels per forward step that mixed precision adds (the layers' ``amp_casts``)."""
        return sum(layer.amp_casts * layer.times for layer in self.layers)

    def kept_bytes(self, variant: str = "eager") -> float:
        """Activation bytes kept for backward per sample."""
        return BYTES_PER_ELEMENT * self._sum("kept", None, variant, True)

    def launches(self, cls: str | None = None, variant: str = "eager") -> float:
        """Kernel launches of one forward step."""
        return self._sum("launches", cls, variant, False)


# ---------------------------------------------------------------------------------------------
# expressions


class _Where:
    """Where a value comes from, for error sentences: file, model and layer path."""

    def __init__(self, origin: str, model: str, path: str = ""):
        self.origin, self.model, self.path = origin, model, path

    def at(self, path: str) -> _Where:
        return _Where(self.origin, self.model, path)

    def fail(self, problem: str) -> PaigridError:
        where = f"{self.origin}: model {self.model!r}" if self.model else self.origin
        if self.path:
            where += f", layer {self.path}"
        return PaigridError(f"{where}: {problem.rstrip('.')}.")


def _evaluate(value, scope: dict, where: _Where, key: str):
    """A number from a TOML value: a number, a bool, or an arithmetic expression over ``scope``."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if not isinstance(value, str):
        raise where.fail(f"{key!r} must be a number or an expression, not {type(value).__name__}")
    try:
        tree = ast.parse(value.strip(), mode="eval")
    except SyntaxError:
        raise where.fail(f"{key!r} = {value!r} is not an arithmetic expression") from None
    return _node(tree.body, scope, where, key, value)


def _node(node, scope, where, key, text):
    bad = lambda why: where.fail(f"{key!r} = {text!r}: {why}")  # noqa: E731
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in scope:
            close = difflib.get_close_matches(node.id, list(scope), n=1)
            raise bad(f"unknown name {node.id!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        return scope[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _node(node.operand, scope, where, key, text)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _node(node.left, scope, where, key, text), _node(node.right, scope, where, key, text)
        ops = {
            ast.Add: lambda: a + b,
            ast.Sub: lambda: a - b,
            ast.Mult: lambda: a * b,
            ast.Div: lambda: a / b,
            ast.FloorDiv: lambda: a // b,
            ast.Mod: lambda: a % b,
            ast.Pow: lambda: a**b,
        }
        if type(node.op) not in ops:
            raise bad("only + - * / // % ** are allowed")
        if isinstance(node.op, ast.Pow) and (abs(b) > 64 or abs(a) > 1e15):
            raise bad("a power is limited to exponents of 64 and bases of 1e15")
        try:
            return ops[type(node.op)]()
        except ZeroDivisionError:
            raise bad("division by zero") from None
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a, b = _node(node.left, scope, where, key, text), _node(node.comparators[0], scope, where, key, text)
        ops = {ast.Eq: a == b, ast.NotEq: a != b, ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b}
        if type(node.ops[0]) in ops:
            return int(ops[type(node.ops[0])])
    if isinstance(node, ast.BoolOp):
        values = [_node(v, scope, where, key, text) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return int(not _node(node.operand, scope, where, key, text))
    if isinstance(node, ast.IfExp):
        test = _node(node.test, scope, where, key, text)
        return _node(node.body if test else node.orelse, scope, where, key, text)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        args = [_node(a, scope, where, key, text) for a in node.args]
        try:
            return FUNCTIONS[node.func.id](*args)
        except (TypeError, ValueError) as exc:
            raise bad(f"{node.func.id}() cannot take {len(args)} argument(s) like these ({exc})") from None
    raise bad(
        "only numbers, names, + - * / // % **, comparisons, and/or/not, 'x if c else y' and "
        f"{', '.join(FUNCTIONS)} are allowed"
    )


def _number(
    spec: dict,
    key: str,
    scope: dict,
    where: _Where,
    default=None,
    minimum: float | None = 0,
    strict: bool = True,
    integer: bool = False,
):
    """Evaluate ``spec[key]`` (or ``default``) and check it is >= / > ``minimum``."""
    if key not in spec:
        if default is None:
            raise where.fail(f"{spec.get('op', 'layer')} needs {key!r}")
        return default
    value = _evaluate(spec[key], scope, where, key)
    if isinstance(value, complex) or value != value or value in (math.inf, -math.inf):
        raise where.fail(f"{key!r} is not a finite number")
    if minimum is not None and (value < minimum or (strict and value == minimum)):
        sign = ">" if strict else ">="
        raise where.fail(f"{key!r} must be {sign} {minimum:g}, not {value:g}")
    if integer and value != int(value):
        raise where.fail(f"{key!r} must be a whole number, not {value:g}")
    return value


def _shape(spec: dict, key: str, scope: dict, where: _Where, dims: int, default=None) -> list[float]:
    """A spatial shape of ``dims`` sizes: a list, or one number for every dimension."""
    if key not in spec:
        return default
    raw = spec[key]
    items = raw if isinstance(raw, list) else [raw] * dims
    if len(items) != dims:
        raise where.fail(f"{key!r} has {len(items)} sizes where 'out' has {dims}")
    return [_number({key: item}, key, scope, where) for item in items]


def _flag(spec: dict, key: str, scope: dict, where: _Where, default: bool) -> bool:
    """A yes/no field: true, false, or an expression (non-zero is true)."""
    value = spec.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, int)) and not isinstance(value, float):
        return bool(_evaluate(value, scope, where, key))
    raise where.fail(f"{key!r} must be true, false or an expression")


# ---------------------------------------------------------------------------------------------
# one layer


def _layer(spec: dict, scope: dict, where: _Where, path: str, times: float, instances: float) -> list[Layer]:
    """The layer ``spec`` (and the bias-add kernel of a conv or linear layer with a bias)."""
    op = spec["op"]
    required, optional = FIELDS[op]
    unknown = sorted(set(spec) - required - optional - COMMON)
    if unknown:
        allowed = sorted(required | optional | COMMON)
        close = difflib.get_close_matches(unknown[0], allowed, n=1)
        raise where.fail(
            f"{op} has no field {unknown[0]!r}"
            + (f" (did you mean {close[0]!r}?)" if close else f"; its fields are {', '.join(allowed)}")
        )
    missing = [key for key in sorted(required) if key not in spec]
    if missing:
        raise where.fail(f"{op} needs {', '.join(repr(m) for m in missing)}")
    num = lambda key, default=None, **kw: _number(spec, key, scope, where, default, **kw)  # noqa: E731
    layer = Layer(path, op, "", times, instances)
    trainable = _flag(spec, "trainable", scope, where, True)
    shared = _flag(spec, "shared", scope, where, False)
    flops = act = train = kept = launches = weight = params = bias_elements = 0.0
    variants = None  # per-variant overrides (attention)

    if op == "input":
        cls, kept = "elementwise_norm", num("elements")
        launches = 0.0
    elif op == "params":
        cls, params = "gemm_conv", num("count", minimum=0, strict=False, integer=True)
    elif op == "conv":
        cin, cout = num("cin", integer=True), num("cout", integer=True)
        groups = num("groups", 1, integer=True)
        if cin % groups or cout % groups:
            raise where.fail(f"groups = {groups:g} must divide cin = {cin:g} and cout = {cout:g}")
        raw_out = spec["out"]
        if isinstance(raw_out, list) and not 1 <= len(raw_out) <= 3:
            raise where.fail("'out' must hold 1 to 3 sizes")
        dims = len(raw_out) if isinstance(raw_out, list) else 2
        out = _shape(spec, "out", scope, where, dims)
        k = _shape(spec, "k", scope, where, dims)
        stride = _shape(spec, "stride", scope, where, dims, [1] * dims)
        transposed = _flag(spec, "transposed", scope, where, False)
        default_in = [o / s for o, s in zip(out, stride)] if transposed else [o * s for o, s in zip(out, stride)]
        size_in = _shape(spec, "in", scope, where, dims, default_in)
        reduction = cin / groups * math.prod(k)
        has_bias = _flag(spec, "bias", scope, where, False)
        params = cout * reduction + (cout if has_bias else 0)
        bias_elements = cout * math.prod(out) if has_bias else 0.0
        flops = 2 * cout * reduction * math.prod(size_in if transposed else out)
        act = cin * math.prod(size_in) + cout * math.prod(out)
        train, weight, launches = 3 * act, params, 1.0
        small = groups > 1 or reduction < SMALL_CONV_REDUCTION or cout < SMALL_CONV_CHANNELS
        cls = _class(spec, where, "small_conv" if small else "gemm_conv")
        if cls == "gemm_conv":
            layer.nchw_transpose = NCHW_TRANSPOSE_ACCESSES * act
    elif op == "linear":
        n_in, n_out = num("in", integer=True), num("out", integer=True)
        tokens = num("tokens", 1, strict=False)
        has_bias = _flag(spec, "bias", scope, where, True)
        params = n_in * n_out + (n_out if has_bias else 0)
        bias_elements = tokens * n_out if has_bias else 0.0
        flops = 2 * n_in * n_out * tokens
        act = tokens * (n_in + n_out)
        train, weight, kept, launches = 3 * act, params, tokens * n_in, 1.0
        cls = _class(spec, where, "gemm_conv")
    elif op == "matmul":
        m, n, k, count = num("m"), num("n"), num("k"), num("count", 1)
        flops = 2 * m * n * k * count
        act = count * (m * k + k * n + m * n)
        train, kept, launches = 3 * act, count * (m * k + k * n), 1.0
        cls = _class(spec, where, "gemm_conv")
    elif op == "rnn":
        cell = spec["cell"]
        if not isinstance(cell, str) or cell not in ("lstm", "gru"):
            raise where.fail(f"rnn cell {cell!r} is not 'lstm' or 'gru'")
        gates, kept_h, act_h = (4, 7, 17) if cell == "lstm" else (3, 5, 12)
        n_in, h, steps = num("input", integer=True), num("hidden", integer=True), num("steps")
        dirs, biases = num("directions", 1, integer=True), num("biases", 2, minimum=0, strict=False, integer=True)
        if dirs not in (1, 2):
            raise where.fail(f"'directions' must be 1 or 2, not {dirs:g}")
        params = dirs * (gates * h * (n_in + h) + biases * gates * h)
        flops = 2 * dirs * steps * gates * h * (n_in + h)
        act = dirs * steps * (n_in + act_h * h)
        train, kept = 3 * act, dirs * steps * kept_h * h
        weight = dirs * (gates * h * n_in + biases * gates * h + steps * gates * h * h)
        launches, cls = dirs * (1 + 2 * steps), "recurrent"
    elif op == "attention":
        a, d, sq = num("heads", integer=True), num("head_dim"), num("q_len")
        sk = num("kv_len", sq)
        causal, dropout = _flag(spec, "causal", scope, where, False), _flag(spec, "dropout", scope, where, True)
        if causal and sk < sq:
            raise where.fail(f"a causal attention needs kv_len >= q_len, not {sk:g} < {sq:g}")
        pairs = sq * (sk - sq) + sq * (sq + 1) / 2 if causal else sq * sk
        score, qkvo, rows, dr = a * sq * sk, a * d * (2 * sq + 2 * sk), a * sq, 1.0 if dropout else 0.0
        variants = {
            "flops": {"eager": 4 * a * d * sq * sk, "fused": 4 * a * d * pairs},
            "act": {"eager": 3 * qkvo + score * (6 + 2.25 * dr), "fused": qkvo + rows},
            "train": {"eager": 7 * qkvo + score * (16 + 4.5 * dr), "fused": 3 * qkvo + 4 * rows},
            "kept": {"eager": a * d * (sq + 2 * sk) + score * (1 + 1.25 * dr), "fused": a * d * (sq + 2 * sk) + rows},
            "launches": {"eager": 8 + dr, "fused": 1.0},
        }
        cls = "attention"
    elif op == "norm":
        kind = spec["kind"]
        if not isinstance(kind, str) or kind not in NORMS:
            raise where.fail(f"norm kind {kind!r} is not one of {', '.join(NORMS)}")
        channels, elements = num("channels", integer=True), num("elements")
        frozen = _flag(spec, "frozen", scope, where, False)
        reads, writes, back, keeps, per = FROZEN_NORM if frozen else NORMS[kind]
        params = 0 if frozen or not _flag(spec, "affine", scope, where, True) else 2 * channels
        act, kept = elements * (reads + writes), elements * keeps
        train, flops, weight = act + elements * back, elements * per, params
        launches, cls = 1.0, "elementwise_norm"
    elif op == "eltwise":
        kind = spec["kind"]
        if not isinstance(kind, str) or kind not in ELTWISE:
            close = difflib.get_close_matches(str(kind), list(ELTWISE), n=1)
            raise where.fail(
                f"eltwise kind {kind!r} is unknown"
                + (f" (did you mean {close[0]!r}?)" if close else f"; known: {', '.join(ELTWISE)}")
            )
        elements = num("elements")
        if kind in NEEDS_INPUT and "in_elements" not in spec:
            raise where.fail(f"eltwise {kind} needs 'in_elements' (its input is larger than its output)")
        n_in = num("in_elements", elements)
        fin, fout, bin_, bout, kin, kout, per = ELTWISE[kind]
        act = fin * n_in + fout * elements
        train = act + bin_ * n_in + bout * elements
        kept, flops = kin * n_in + kout * elements, per * elements
        launches, cls = ELTWISE_LAUNCHES.get(kind, 1.0), "elementwise_norm"
    elif op == "embedding":
        rows, dim = num("rows", integer=True), num("dim", integer=True)
        lookups = num("lookups", strict=False)
        params = rows * dim
        act = 2 * lookups * dim
        train = act + lookups * dim * (3 if trainable else 1)
        launches, cls = 1.0, "embedding"
    else:  # pragma: no cover - FIELDS is checked before
        raise where.fail(f"unknown op {op!r}")

    if shared:
        params = 0.0
    if not trainable:
        params, layer.frozen = 0.0, params
    layer.cls, layer.params, layer.weight = cls, params, weight
    for what, value in (("flops", flops), ("act", act), ("train", train), ("kept", kept), ("launches", launches)):
        per_variant = variants[what] if variants and what in variants else {v: value for v in VARIANTS}
        setattr(layer, what, dict(per_variant))
    if "saved" in spec:
        saved = num("saved", minimum=0, strict=False)
        layer.kept = {v: saved for v in VARIANTS}
    if "launches" in spec:
        count = num("launches", minimum=0, strict=False)
        layer.launches = {v: count for v in VARIANTS}
    if "amp_casts" in spec:
        layer.amp_casts = num("amp_casts", minimum=0, strict=False)
    backward = _flag(spec, "backward", scope, where, True)
    if not backward:
        layer.train = dict(layer.act)
    if op in ("norm", "eltwise"):
        automatic = spec["kind"] in AUTOCAST_FP32 and not (op == "norm" and _flag(spec, "frozen", scope, where, False))
        if _flag(spec, "amp_fp32", scope, where, automatic):
            layer.amp_fp32 = dict(layer.train)
    elif op == "embedding" and _flag(spec, "amp_fp32", scope, where, True):
        # mixed precision keeps every table in FP32 (the master weights) and no framework casts a
        # lookup: PyTorch autocast lists no embedding op, so it runs in its FP32 weight's type;
        # TensorFlow's AMP graph rewrite changes op types, never variables, so the gather reads
        # FP32 rows; the gradient rows are the table's type (EMBEDDING_AMP_SOURCE)
        layer.amp_fp32 = dict(layer.train)
    if not bias_elements:
        return [layer]
    bias = Layer(f"{path} bias", "eltwise", "elementwise_norm", times, instances)
    fin, fout, bin_, bout, _, _, per = ELTWISE["bias"]
    bias.flops = {v: per * bias_elements for v in VARIANTS}
    bias.act = {v: (fin + fout) * bias_elements for v in VARIANTS}
    bias.train = {v: (fin + fout + (bin_ + bout) * backward) * bias_elements for v in VARIANTS}
    bias.kept = {v: 0.0 for v in VARIANTS}
    bias.launches = {v: 1.0 for v in VARIANTS}
    return [layer, bias]


def _class(spec: dict, where: _Where, default: str) -> str:
    cls = spec.get("class", default)
    if cls not in CLASS_OVERRIDES:
        raise where.fail(f"'class' must be one of {', '.join(CLASS_OVERRIDES)}, not {cls!r}")
    return cls


# ---------------------------------------------------------------------------------------------
# files, blocks and models


def _let(table, scope: dict, where: _Where, what: str) -> dict:
    if not isinstance(table, dict):
        raise where.fail(f"{what} must be a table of name = value")
    scope = dict(scope)
    for name, value in table.items():
        scope[name] = _evaluate(value, scope, where, name)
    return scope


def _expand(
    layers,
    scope: dict,
    blocks: dict,
    where: _Where,
    prefix: str,
    times: float,
    instances: float,
    stack: tuple[str, ...],
    out: list[Layer],
    model_scope: dict,
    first: int = 1,
    suffix: str = "",
) -> None:
    """Append the layers of ``layers`` to ``out``, expanding blocks (whose scope is the model's
    ``let`` names, then the block's defaults, arguments and ``let``); ``first`` and ``suffix``
    number and mark the labels of one copy of an indexed layer."""
    if not isinstance(layers, list):
        raise (where.at(prefix) if prefix else where).fail("'layers' must be a list of tables")
    for index, spec in enumerate(layers, start=first):
        label = f"#{index}"
        if isinstance(spec, dict):
            what = spec.get("name") or (f"use {spec['use']}" if "use" in spec else spec.get("op"))
            label += f" ({what})" if isinstance(what, str) else ""
        label += suffix
        path = f"{prefix} > {label}" if prefix else label
        here = where.at(path)
        if not isinstance(spec, dict):
            raise here.fail('a layer must be a table such as { op = "conv", ... }')
        n = _number(spec, "times", scope, here, 1, minimum=0, strict=False, integer=True)
        k = _number(spec, "instances", scope, here, 1, minimum=0, strict=False)
        if "index" in spec:
            # 'times' copies that differ: the i-th sees the index name bound to i = 0, 1, ..., n - 1
            name = spec["index"]
            if not isinstance(name, str) or not name.isidentifier():
                raise here.fail("'index' must be a name, such as \"i\"")
            one = {key: value for key, value in spec.items() if key not in ("index", "times")}
            for i in range(int(n)):
                _expand(
                    [one],
                    {**scope, name: i},
                    blocks,
                    where,
                    prefix,
                    times,
                    instances,
                    stack,
                    out,
                    model_scope,
                    index,
                    f" [{name}={i}]",
                )
            continue
        if "use" in spec:
            name = spec["use"]
            if not isinstance(name, str):
                raise here.fail("'use' must name a block")
            if "op" in spec:
                raise here.fail("a layer has either 'op' or 'use', not both")
            if name not in blocks:
                close = difflib.get_close_matches(str(name), list(blocks), n=1)
                raise here.fail(
                    f"there is no block {name!r} in this file" + (f" (did you mean {close[0]!r}?)" if close else "")
                )
            if name in stack:
                raise here.fail(f"block {name!r} uses itself ({' > '.join([*stack, name])})")
            if n == 0:
                continue  # a block used 0 times adds nothing (its sizes may not even be valid then)
            block = blocks[name]
            args = {key: value for key, value in spec.items() if key not in USE_KEYS}
            missing = [a for a in block["args"] if a not in args]
            if missing:
                raise here.fail(f"block {name!r} needs the argument(s) {', '.join(missing)}")
            extra = [a for a in args if a not in block["args"] and a not in block["defaults"]]
            if extra:
                raise here.fail(
                    f"block {name!r} has no argument {extra[0]!r} "
                    f"(its arguments: {', '.join([*block['args'], *block['defaults']]) or 'none'})"
                )
            inner = dict(model_scope)
            inner.update({key: _evaluate(value, inner, here, key) for key, value in block["defaults"].items()})
            inner.update({key: _evaluate(value, scope, here, key) for key, value in args.items()})
            inner = _let(block["let"], inner, here, f"block {name!r} 'let'")
            _expand(
                block["layers"], inner, blocks, where, path, times * n, instances * k, (*stack, name), out, model_scope
            )
            continue
        op = spec.get("op")
        if op is not None and not isinstance(op, str):
            raise here.fail("'op' must be a name such as \"conv\"")
        if op is None:
            raise here.fail("a layer needs 'op' (one of " + ", ".join(FIELDS) + ") or 'use' (a block)")
        if op not in FIELDS:
            close = difflib.get_close_matches(str(op), list(FIELDS), n=1)
            raise here.fail(
                f"unknown op {op!r}" + (f" (did you mean {close[0]!r}?)" if close else f"; ops are {', '.join(FIELDS)}")
            )
        if n == 0:
            continue
        out.extend(_layer(spec, scope, here, path, times * n, instances * k))


def _check_keys(table: dict, allowed: set, where: _Where, what: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(allowed), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f"; its keys are {', '.join(sorted(allowed))}"
        raise where.fail(f"{what} has no key {unknown[0]!r}{hint}")


def parse_zoo(text: str, origin: str) -> list[Model]:
    """The models of one zoo file's TOML text, expanded and validated; ``origin`` names the file
    in errors and in ``Model.origin``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PaigridError(f"{origin}: the zoo file is not valid TOML ({exc}).") from None
    top = _Where(origin, "")
    _check_keys(data, FILE_KEYS, top, "a zoo file")
    blocks = {}
    if not isinstance(data.get("blocks", {}), dict):
        raise top.fail("'blocks' must hold [blocks.NAME] tables")
    for name, block in data.get("blocks", {}).items():
        here = top
        if not isinstance(block, dict):
            raise top.fail(f"block {name!r} must be a table")
        _check_keys(block, BLOCK_KEYS, top, f"block {name!r}")
        args, defaults = block.get("args", []), block.get("defaults", {})
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise here.fail(f"block {name!r}: 'args' must be a list of names")
        if not isinstance(defaults, dict):
            raise here.fail(f"block {name!r}: 'defaults' must be a table")
        if "layers" not in block:
            raise here.fail(f"block {name!r} has no 'layers'")
        blocks[name] = {"args": args, "defaults": defaults, "let": block.get("let", {}), "layers": block["layers"]}
    models = data.get("models", {})
    if not isinstance(models, dict) or not models:
        raise top.fail("a zoo file needs at least one [models.NAME] table")
    out = []
    for name, spec in models.items():
        where = _Where(origin, name)
        if not isinstance(spec, dict):
            raise where.fail("a model must be a table")
        _check_keys(spec, MODEL_KEYS, where, "a model")
        for values in _each(spec, where):
            here = _Where(origin, _format(name, values, where, "the model name"))
            out.append(_model(here, spec, values, blocks, origin))
    return out


def _each(spec: dict, where: _Where) -> list[dict]:
    """The bindings of a model's ``each = { name = [values] }`` table: one model per combination
    (one model, no bindings, without it)."""
    table = spec.get("each", {})
    if not isinstance(table, dict) or not all(isinstance(v, list) and v for v in table.values()):
        raise where.fail("'each' must be a table of name = [value, ...]")
    for key, values in table.items():
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise where.fail(f"'each' {key!r} must list numbers")
    if table and "{" not in where.model:
        raise where.fail("a model with 'each' needs its names in the model name, such as \"m-seq{s}\"")
    return [dict(zip(table, combo)) for combo in itertools.product(*table.values())]


def _format(text: str, values: dict, where: _Where, what: str) -> str:
    """``text`` with ``{name}`` replaced by the ``each`` values."""
    try:
        return text.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise where.fail(f"{what} {text!r} names {exc} that 'each' does not give") from None


def _model(where: _Where, spec: dict, values: dict, blocks: dict, origin: str) -> Model:
    """One model of a ``[models.NAME]`` table, with the ``each`` values ``values`` bound."""
    name = where.model
    source = spec.get("source")
    if not isinstance(source, str) or not source.strip():
        raise where.fail("every model needs a 'source' naming the paper or code its layers come from")
    if "layers" not in spec:
        raise where.fail("the model has no 'layers'")
    workloads = spec.get("workloads", [name])
    if not isinstance(workloads, list) or not workloads or not all(isinstance(w, str) for w in workloads):
        raise where.fail("'workloads' must be a list of workload names")
    workloads = [_format(w, values, where, "the workload name") for w in workloads]
    scope = _let(spec.get("let", {}), dict(values), where, "'let'")
    layers: list[Layer] = []
    _expand(spec["layers"], scope, blocks, where, "", 1.0, 1.0, (), layers, scope)
    if not layers:
        raise where.fail("the model has no layers")
    aliases = spec.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise where.fail("'aliases' must be a list of measured model names")
    size = spec.get("alias_size", "")
    if not isinstance(size, str):
        raise where.fail('\'alias_size\' must be a string such as "384" or "224x224"')
    size = _format(size, values, where, "'alias_size'")
    counts = spec.get("per_sample", {})
    if not isinstance(counts, dict):
        raise where.fail("'per_sample' must be a table of unit = count, such as { tokens = \"s\" }")
    per_sample = {unit: _number(counts, unit, scope, where) for unit in counts}
    return Model(
        name,
        _format(source.strip(), values, where, "the source"),
        origin,
        workloads,
        layers,
        _format(str(spec.get("sample", "")), values, where, "the sample"),
        str(spec.get("optimizer", "")),
        [(a.strip(), size) for a in aliases],
        _v2(spec.get("v2"), scope, where),
        per_sample,
    )


def _v2(table, scope: dict, where: _Where) -> dict:
    """A model's ``v2`` table, its ``params``/``flops`` flags and counts evaluated in ``scope``."""
    if table is None:
        return {}
    names = table.get("model") if isinstance(table, dict) else None
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise where.fail("'v2' must be a table naming its models_v2.csv row(s): v2 = { model = \"...\" }")
    _check_keys(table, V2_KEYS, where, "a model's 'v2' table")
    out = {key: str(table.get(key, "")) for key in ("source", "params_note", "flops_note")}
    out["model"] = names
    for key in ("params", "flops"):
        out[key] = _flag(table, key, scope, where, True)
    for key in ("params_M", "gflops"):
        out[key] = _number(table, key, scope, where, math.nan) if key in table else math.nan
    if (not math.isnan(out["params_M"]) or not math.isnan(out["gflops"])) and not out["source"]:
        raise where.fail("an independent count in 'v2' needs its 'source'")
    return out


def load_zoo(path: str | Path, origin: str | None = None) -> list[Model]:
    """The models of a zoo file (a clear sentence for a missing, unreadable or invalid file)."""
    return parse_zoo(read_text(path, "the zoo file"), origin or str(path))


def builtin_folder() -> Path:
    """``datasets/zoo`` inside the installed package."""
    return Path(str(resources.files("paigrid.datasets").joinpath("zoo")))


def builtin_models() -> list[Model]:
    """Every model of the built-in zoo, files in name order; a workload named twice is an error
    (parsed once per process: the built-in files do not change under it)."""
    return list(_builtin_models())


@functools.cache
def _builtin_models() -> tuple[Model, ...]:
    models: list[Model] = []
    seen: dict[str, str] = {}  # workload -> the file that describes it
    for path in sorted(builtin_folder().glob("*.toml")):
        for model in load_zoo(path, f"datasets/zoo/{path.name}"):
            for workload in model.workloads:
                if workload in seen:
                    raise PaigridError(
                        f"workload {workload!r} is described twice, in {seen[workload]} and {model.origin}."
                    )
                seen[workload] = model.origin
            models.append(model)
    return tuple(models)


# ---------------------------------------------------------------------------------------------
# measured model names


def same_size(a: str, b: str) -> bool:
    """Whether two ``seq_len_or_image_size`` texts name the same size: equal numbers, ``N`` and
    ``NxN`` (a square image), or the same words."""

    def norm(text: str) -> str:
        text = text.strip().casefold().replace(" ", "")
        parts = text.split("x")
        if len(parts) == 2 and parts[0] == parts[1]:
            text = parts[0]
        try:
            return f"{float(text):g}"
        except ValueError:
            return text

    return norm(a) == norm(b)


def alias_rows(models: list[Model] | None = None) -> list[dict[str, str]]:
    """The zoo's measured-name aliases in the schema of ``measurement_aliases.csv``
    (``measured_model``, ``seq_len_or_image_size``, ``workload``, ``note``), zoo file order."""
    models = builtin_models() if models is None else models
    return [
        {
            "measured_model": alias,
            "seq_len_or_image_size": size,
            "workload": model.workloads[0],
            "note": f"{model.origin}: {model.sample or model.name}",
        }
        for model in models
        for alias, size in model.aliases
    ]


def resolve_measured(name: str, size: str = "", models: list[Model] | None = None) -> str:
    """The zoo workload of a measured model name (``measured_public_v2.csv``'s ``model``) at a
    ``seq_len_or_image_size``: an alias listed at that size, else one listed for any size, else a
    zoo workload of that name; one sentence naming the sizes it is known at, or that it is unknown."""
    rows = alias_rows(models)
    folded = name.strip().casefold()
    entries = [r for r in rows if r["measured_model"].casefold() == folded]
    for wanted in (
        lambda r: r["seq_len_or_image_size"] and size.strip() and same_size(r["seq_len_or_image_size"], size),
        lambda r: not r["seq_len_or_image_size"],
    ):
        for entry in entries:
            if wanted(entry):
                return entry["workload"]
    if entries:
        sizes = ", ".join(sorted({e["seq_len_or_image_size"] for e in entries}))
        raise PaigridError(f"the zoo has model {name!r} at {sizes}, not at {size.strip() or '(no size)'}.")
    names = {w.casefold(): w for m in (builtin_models() if models is None else models) for w in m.workloads}
    if folded in names:
        return names[folded]
    raise PaigridError(f"the zoo has no model or alias {name!r}.")


# ---------------------------------------------------------------------------------------------
# optimizer update traffic


def optimizer_update_bytes_per_param(
    optimizer: str, precision: str = "fp32", optimizers: Catalogue | None = None, precisions: Catalogue | None = None
) -> float:
    """Bytes one optimizer step reads and writes per parameter (see the module docstring)."""
    optimizers = optimizers or load("optimizers")
    precisions = precisions or load("precisions")
    name = optimizers.resolve(optimizer)
    state = optimizers.number(name, "state_bytes_per_param")
    grad = precisions.number(precision, "grad_bytes_per_param")
    working = precisions.number(precision, "weight_bytes_per_param") - 4
    extra = LAMB_EXTRA_BYTES if name == "lamb" else 0
    return 2 * 4 + grad + 2 * state + working + extra


# ---------------------------------------------------------------------------------------------
# the workload_classes.csv table


def _g(value: float) -> str:
    return f"{value:.6g}"


def columns() -> list[str]:
    """Column names of ``workload_classes.csv``, units in the names."""
    cols = ["name", "params_M", "frozen_params_M", "fwd_GFLOP_per_sample"]
    parts = [c for c in CLASSES if c != "attention"]
    parts[3:3] = ["attention_eager", "attention_fused"]
    for metric in (
        "GFLOP_per_sample",
        "MB_per_sample",
        "train_MB_per_sample",
        "weight_MB_per_step",
        "launches_per_step",
    ):
        cols += [f"{p}_{metric}" for p in parts]
    cols += [
        "elementwise_norm_amp_fp32_train_MB_per_sample",
        "embedding_amp_fp32_train_MB_per_sample",
        "gemm_conv_nchw_transpose_train_MB_per_sample",
        "amp_cast_launches_per_step",
        "activation_eager_MB_per_sample",
        "activation_fused_MB_per_sample",
        "launches_eager_per_step",
        "launches_fused_per_step",
        "optimizer",
        "optimizer_update_fp32_B_per_param",
        "optimizer_update_amp_B_per_param",
        "optimizer_update_fp32_MB_per_step",
        "source",
        "derived_from",
    ]
    return cols


def row(model: Model, workload: str, optimizer: str, optimizers: Catalogue, precisions: Catalogue) -> dict:
    """One ``workload_classes.csv`` row of ``model`` under the name ``workload``."""
    out = {
        "name": workload,
        "params_M": _g(model.params / 1e6),
        "frozen_params_M": _g(model.frozen_params / 1e6),
        "fwd_GFLOP_per_sample": _g(model.flops() / 1e9),
    }
    parts = [(c, "eager") for c in CLASSES if c != "attention"]
    parts[3:3] = [("attention", "eager"), ("attention", "fused")]
    for cls, variant in parts:
        label = f"{cls}_{variant}" if cls == "attention" else cls
        out[f"{label}_GFLOP_per_sample"] = _g(model.flops(cls, variant) / 1e9)
        out[f"{label}_MB_per_sample"] = _g(model.act_bytes(cls, variant) / 1e6)
        out[f"{label}_train_MB_per_sample"] = _g(model.act_bytes(cls, variant, train=True) / 1e6)
        out[f"{label}_weight_MB_per_step"] = _g(model.weight_bytes(cls) / 1e6)
        out[f"{label}_launches_per_step"] = _g(model.launches(cls, variant))
    out["elementwise_norm_amp_fp32_train_MB_per_sample"] = _g(model.amp_fp32_bytes("elementwise_norm") / 1e6)
    out["embedding_amp_fp32_train_MB_per_sample"] = _g(model.amp_fp32_bytes("embedding") / 1e6)
    out["gemm_conv_nchw_transpose_train_MB_per_sample"] = _g(model.nchw_transpose_bytes() / 1e6)
    out["amp_cast_launches_per_step"] = _g(model.amp_cast_launches())
    for variant in VARIANTS:
        out[f"activation_{variant}_MB_per_sample"] = _g(model.kept_bytes(variant) / 1e6)
        out[f"launches_{variant}_per_step"] = _g(model.launches(None, variant))
    fp32 = optimizer_update_bytes_per_param(optimizer, "fp32", optimizers, precisions) if optimizer else math.nan
    amp = optimizer_update_bytes_per_param(optimizer, "amp-fp16", optimizers, precisions) if optimizer else math.nan
    out.update(
        {
            "optimizer": optimizer,
            "optimizer_update_fp32_B_per_param": _g(fp32),
            "optimizer_update_amp_B_per_param": _g(amp),
            "optimizer_update_fp32_MB_per_step": _g(fp32 * model.params / 1e6),
            "source": model.source,
            "derived_from": model.origin,
        }
    )
    return out


def classes_csv(models: list[Model], workloads: Catalogue | None = None) -> str:
    """The text of ``workload_classes.csv`` for ``models``: catalogue workloads in catalogue order,
    then the others in zoo order; the optimizer is the model's own or the catalogue's."""
    workloads = workloads or load("workloads")
    optimizers, precisions = load("optimizers"), load("precisions")
    known = {name: i for i, name in enumerate(workloads.names)}
    entries: list[tuple] = []  # (sort key, row)
    for order, model in enumerate(models):
        for workload in model.workloads:
            try:
                canonical, in_catalogue = workloads.resolve(workload), True
            except PaigridError:
                canonical, in_catalogue = workload, False
            optimizer = model.optimizer or (workloads.row(canonical)["optimizer"] if in_catalogue else "")
            key = (0, known[canonical], 0) if in_catalogue else (1, order, len(entries))
            entries.append((key, row(model, canonical, optimizer, optimizers, precisions)))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns(), lineterminator="\n")
    writer.writeheader()
    for _, values in sorted(entries, key=lambda e: e[0]):
        writer.writerow(values)
    return buffer.getvalue()


#: the generated catalogue of zoo workloads that ``workloads.csv`` lacks, and the rules it follows
ZOO_WORKLOADS_NAME = "zoo_workloads.csv"
RULES_NAME = "zoo_workload_rules.csv"
#: ``zoo_workloads.csv``'s columns: the workload catalogue's (``workloads.csv``) and where each came from
ZOO_WORKLOAD_COLUMNS = (
    "name",
    "aliases",
    "suite",
    "domain",
    "params_M",
    "fwd_GFLOP_per_sample",
    "membound_MB_per_sample",
    "input_MB_per_sample",
    "activation_MB_per_sample",
    "default_batch",
    "optimizer",
    "sample_unit",
    "tokens_per_sample",
    "params_source",
    "flops_source",
    "estimation_notes",
    "rule_source",
    "derived_from",
)
#: ``membound_MB_per_sample`` = this x the activations kept for backward, the rule of every
#: ``workloads.csv`` row ("membound = 8 x A"; pai-v2 times the classes of ``workload_classes.csv``
#: instead, pai-v1 reads this)
MEMBOUND_PER_KEPT = 8.0
#: the columns of ``zoo_workload_rules.csv``
RULE_COLUMNS = (
    "workloads",
    "suite",
    "domain",
    "sample_unit",
    "optimizer",
    "default_batch",
    "input_bytes_per_element",
    "source",
)


def workload_rules(text: str | None = None) -> list[dict[str, str]]:
    """The rows of ``datasets/zoo_workload_rules.csv`` (or ``text`` in its schema): ``workloads``
    (``;``-separated names or ``fnmatch`` patterns), the catalogue facts the zoo does not hold
    (suite, domain, sample unit, optimizer, default batch, input bytes per element) and their
    ``source``."""
    if text is None:
        text = resources.files("paigrid.datasets").joinpath(RULES_NAME).read_text(encoding="utf-8")
    _, rows = csv_table(text, RULES_NAME, "the zoo workload rules", RULE_COLUMNS)
    return [row for _, row in rows]


def rule_for(workload: str, rules: list[dict[str, str]]) -> dict[str, str] | None:
    """The first rule whose ``workloads`` names or patterns match ``workload`` (None: no rule,
    the workload is not a data-parallel catalogue workload, e.g. MPT, an LLM-family model)."""
    for rule in rules:
        if any(fnmatch.fnmatchcase(workload, p.strip()) for p in rule["workloads"].split(";") if p.strip()):
            return rule
    return None


def input_elements(model: Model) -> float:
    """Elements of the model's ``input`` layers per sample."""
    return sum(layer.kept["eager"] * layer.times * layer.instances for layer in model.layers if layer.op == "input")


def zoo_workload_row(model: Model, workload: str, rule: dict[str, str]) -> dict[str, str]:
    """The workload-catalogue row of a zoo workload: parameters, FLOPs and activations from its
    layers, the sample unit, optimizer, default batch, suite and domain from its ``rule``; every
    estimate named in ``estimation_notes``."""
    kept_mb = model.kept_bytes("eager") / 1e6
    input_mb = input_elements(model) * float(rule["input_bytes_per_element"]) / 1e6
    tokens = model.per_sample.get("tokens", 1.0)
    optimizer = model.optimizer or rule["optimizer"]
    notes = (
        f"Generated from {model.origin} by python -m paigrid.inputs.zoo. activation_MB_per_sample = the "
        f"zoo's activations kept for backward (eager attention); membound = {MEMBOUND_PER_KEPT:g} x A "
        f"(the rule of workloads.csv); input = {input_elements(model):.6g} input elements x "
        f"{rule['input_bytes_per_element']} byte(s); tokens_per_sample = the zoo's per_sample tokens "
        "(1 without); sample unit, optimizer and default batch from the rule (rule_source), an ESTIMATE "
        "where it says so; validate and calibrate use each measured row's own batch and optimizer. "
        f"Sample: {model.sample or 'one sample'}."
    )
    return {
        "name": workload,
        "aliases": "",
        "suite": rule["suite"],
        "domain": rule["domain"],
        "params_M": _g(model.params / 1e6),
        "fwd_GFLOP_per_sample": _g(model.flops() / 1e9),
        "membound_MB_per_sample": _g(MEMBOUND_PER_KEPT * kept_mb),
        "input_MB_per_sample": _g(input_mb),
        "activation_MB_per_sample": _g(kept_mb),
        "default_batch": rule["default_batch"],
        "optimizer": optimizer,
        "sample_unit": rule["sample_unit"],
        "tokens_per_sample": _g(tokens),
        "params_source": f"layer count of {model.origin}: {model.source}",
        "flops_source": f"layer count of {model.origin} (forward, compute-bound classes)",
        "estimation_notes": notes,
        "rule_source": rule["source"],
        "derived_from": model.origin,
    }


def zoo_workloads_csv(models: list[Model], workloads: Catalogue | None = None, rules=None) -> str:
    """The text of ``zoo_workloads.csv``: a catalogue row (``zoo_workload_row``) for every zoo
    workload that ``workloads.csv`` lacks and a rule covers, in zoo order."""
    workloads = workloads or load("workloads")
    rules = workload_rules() if rules is None else rules
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, ZOO_WORKLOAD_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for model in models:
        for workload in model.workloads:
            try:
                workloads.resolve(workload)
                continue  # the catalogue's own row
            except PaigridError:
                pass
            rule = rule_for(workload, rules)
            if rule is not None:
                writer.writerow(zoo_workload_row(model, workload, rule))
    return buffer.getvalue()


def zoo_workloads_path() -> Path:
    """Where the built-in ``zoo_workloads.csv`` lives."""
    return Path(str(resources.files("paigrid.datasets").joinpath(ZOO_WORKLOADS_NAME)))


#: the origin of the workload catalogue ``with_zoo_workloads`` builds
WITH_ZOO_ORIGIN = "the built-in workloads.csv and zoo_workloads.csv"


def with_zoo_workloads(cats):
    """``cats`` with its workload catalogue extended by the zoo's workloads
    (``datasets/zoo_workloads.csv``) when it is the built-in one; a user's workload catalogue,
    or one already extended, is returned as it is.  The default sweep keeps the built-in
    catalogue alone; validate and calibrate read measured rows of zoo models through this."""
    if cats.workloads.origin != "the built-in workloads.csv":
        return cats
    text = zoo_workloads_path().read_text(encoding="utf-8")
    header, rows = csv_table(text, f"the built-in {ZOO_WORKLOADS_NAME}", "a workloads catalogue", ("name",))
    check_rows("workloads", header, rows, f"the built-in {ZOO_WORKLOADS_NAME}")
    base = cats.workloads
    columns = base.columns + [c for c in header if c not in base.columns]
    merged = [dict(r) for r in base.rows] + [{c: row.get(c, "") for c in columns} for _, row in rows]
    for r in merged:
        for c in columns:
            r.setdefault(c, "")
    digest = hashlib.sha256((builtin_text("workloads") + text).encode()).hexdigest()
    extended = Catalogue("workloads", WITH_ZOO_ORIGIN, columns, merged, digest)
    return dataclasses.replace(cats, workloads=extended)


def builtin_csv_path() -> Path:
    """Where the built-in ``workload_classes.csv`` lives."""
    return Path(str(resources.files("paigrid.datasets").joinpath(OUTPUT_NAME)))


def summary(model: Model) -> str:
    """A short per-class table of one model, as ``--show`` prints it (5 significant digits)."""
    lines = [
        f"{model.name}: {model.params / 1e6:.5g} M parameters, {model.flops() / 1e9:.5g} GFLOP forward per sample",
        f"{'class':<18}{'GFLOP':>11}{'fwd MB':>11}{'train MB':>11}{'weight MB':>11}{'launches':>10}",
    ]
    parts = [(c, "eager") for c in CLASSES if c != "attention"]
    parts[3:3] = [("attention", "eager"), ("attention", "fused")]
    for cls, variant in parts:
        label = f"{cls}_{variant}" if cls == "attention" else cls
        lines.append(
            f"{label:<18}{model.flops(cls, variant) / 1e9:>11.5g}"
            f"{model.act_bytes(cls, variant) / 1e6:>11.5g}"
            f"{model.act_bytes(cls, variant, True) / 1e6:>11.5g}"
            f"{model.weight_bytes(cls) / 1e6:>11.5g}{model.launches(cls, variant):>10.5g}"
        )
    lines.append(
        f"activations kept for backward: eager {model.kept_bytes('eager') / 1e6:.5g} MB, "
        f"fused {model.kept_bytes('fused') / 1e6:.5g} MB per sample"
    )
    return "\n".join(lines)


DOCS_START = "<!-- zoo models: generated by python -m paigrid.inputs.zoo --docs docs/zoo.md -->"
DOCS_END = "<!-- end of zoo models -->"


def models_table(models: list[Model] | None = None) -> str:
    """A Markdown table of every zoo model: workload, file, parameters (M), forward GFLOP per
    sample, the ``models_v2.csv`` row(s) it describes and the measured spellings that reach it."""
    models = builtin_models() if models is None else models
    lines = [
        "| workload | file | params (M) | fwd GFLOP / sample | per sample | models_v2.csv row | "
        "checked against (params; FLOPs) | measured as |",
        "|---|---|---:|---:|---|---|---|---|",
    ]
    for model in models:
        spellings = "; ".join(f"{a} @ {s}" if s else a for a, s in model.aliases)
        counts = ", ".join(f"{n:g} {unit}" for unit, n in model.per_sample.items())
        lines.append(
            f"| `{model.workloads[0]}` | {Path(model.origin).name} | {model.params / 1e6:.2f} | "
            f"{model.flops() / 1e9:.4g} | {counts} | {'; '.join(model.v2.get('model', []))} | "
            f"{_checked(model)} | {spellings} |"
        )
    return "\n".join(lines)


def _checked(model: Model) -> str:
    """How the v2 table compares a model's parameters and FLOPs (see ``tests/test_zoo_v2.py``)."""
    if not model.v2:
        return ""

    def one(what: str, count: str) -> str:
        if model.v2[f"{what}_note"]:
            return "note"
        if not model.v2[what]:
            return "other size"
        return "independent" if not math.isnan(model.v2[count]) else "file"

    return f"{one('params', 'params_M')}; {one('flops', 'gflops')}"


def with_models_table(page: str, models: list[Model] | None = None, origin: str = "the page") -> str:
    """``page`` with the text between ``DOCS_START`` and ``DOCS_END`` replaced by the table."""
    if DOCS_START not in page or DOCS_END not in page:
        raise PaigridError(
            f"{origin} has no zoo-models markers ({DOCS_START} ... {DOCS_END}) to write the table between."
        )
    head, rest = page.split(DOCS_START, 1)
    _, tail = rest.split(DOCS_END, 1)
    return f"{head}{DOCS_START}\n{models_table(models)}\n{DOCS_END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """``python -m paigrid.inputs.zoo``: regenerate, check or show."""
    parser = argparse.ArgumentParser(prog="python -m paigrid.inputs.zoo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare the regenerated table with the stored file instead of writing it"
    )
    parser.add_argument("--out", help=f"where to write the table (default: the package's {OUTPUT_NAME})")
    parser.add_argument(
        "--show",
        nargs="+",
        metavar="ZOO.toml",
        help="print the per-class numbers of the models of these zoo files and stop",
    )
    parser.add_argument(
        "--docs", metavar="PAGE.md", help="rewrite the table of zoo models in this page (docs/zoo.md) and stop"
    )
    args = parser.parse_args(argv)
    try:
        if args.docs:
            page = read_text(args.docs, "the documentation page")
            write_text_atomically(Path(args.docs), with_models_table(page, origin=args.docs))
            print(f"wrote the zoo models table of {args.docs}")
            return 0
        if args.show:
            for path in args.show:
                for model in load_zoo(path):
                    print(summary(model))
            return 0
        outputs = [(Path(args.out) if args.out else builtin_csv_path(), classes_csv(builtin_models()))]
        if not args.out:  # the built-in tables: the classes and the zoo workload catalogue
            outputs.append((zoo_workloads_path(), zoo_workloads_csv(builtin_models())))
        if args.check:
            stale = [target for target, text in outputs if read_text(target, "the generated table") != text]
            for target in stale:
                print(f"{target} is out of date: run python -m paigrid.inputs.zoo", file=sys.stderr)
            for target, _ in outputs:
                if target not in stale:
                    print(f"{target} is up to date")
            return 1 if stale else 0
        for target, text in outputs:
            write_text_atomically(target, text)
            print(f"wrote {target}")
        return 0
    except PaigridError as error:
        print(f"paigrid: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
