"""How a measured run was run, read from its ``framework``, ``notes`` and ``data_pipeline`` cells.

A published row says in words what framework ran it and how: "TensorFlow 1.15 (tf_cnn_benchmarks
...)", "XLA in folder name", "AMP config uses channels-last", "synthetic (torch.randn inputs
...)", "real data (COCO 2017, PyTorch dataloader)".  ``row_settings`` turns those words into
settings; the ones the model has a term for reach it, the others are recorded:

* ``execution`` (reaches the model: the pai-v2 ``execution`` variant, eager or graphs launch
  cost): ``graphs`` for compiled execution (TensorFlow with XLA, ``torch.compile``, CUDA
  graphs); ``eager`` for PyTorch eager and for TensorFlow graphs without XLA (the TF graph
  executor still launches every kernel from the host, one op at a time).  A row that names no
  framework gets the default of its framework family (PyTorch: eager), and says so.
* ``pipeline``: ``synthetic`` (inputs made on the GPU or the host without decoding), ``dali``
  (GPU decoding), ``gpu-cached`` (a preprocessed dataset kept on the GPU), ``cpu-decode``
  (the framework's CPU data loader) or ``not stated``.  The model's input-pipeline bound is the
  ``input_rate_samples_per_s`` option, a server's decode rate; no row states one, so no row sets
  it (the pipeline is recorded, and docs/accuracy.md shows the CPU-decode rows apart).
* ``memory_format`` (reaches the model: the pai-v2 ``memory_format`` variant, the NCHW layout
  transposes of tensor-core convolutions under the half precisions and TF32): ``channels_last`` where the notes
  say channels-last or NHWC, ``nchw`` where they say NCHW; a silent row gets its framework's
  (``MEMORY_FORMAT_DEFAULTS``, with the reason; tf_cnn_benchmarks its own NCHW), and says so.
* ``framework`` (``tf1``, ``tf2``, ``pytorch``, ``mxnet``), ``xla``, ``compiled``,
  ``channels_last``: recorded.
* ``defaults_used``: one sentence per setting a row was silent on and that was defaulted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FRAMEWORKS = ("tf1", "tf2", "pytorch", "mxnet")
#: the activations' layout of a row silent on it, per framework, and why
MEMORY_FORMAT_DEFAULTS = {"pytorch": "nchw", "tf1": "channels_last", "tf2": "channels_last", "mxnet": "channels_last"}
MEMORY_FORMAT_REASONS = {
    "pytorch": "PyTorch tensors are contiguous NCHW unless converted to torch.channels_last",
    "tf1": "NVIDIA's TensorFlow scripts (DeepLearningExamples) default to NHWC",
    "tf2": "NVIDIA's TensorFlow scripts (DeepLearningExamples) default to NHWC",
    "mxnet": "NVIDIA's MXNet scripts (DeepLearningExamples) default to NHWC",
}
#: tf_cnn_benchmarks, whatever the TensorFlow version: its own default layout
TF_CNN_BENCHMARKS = ("nchw", "tf_cnn_benchmarks' --data_format defaults to NCHW")
PIPELINES = ("synthetic", "dali", "gpu-cached", "cpu-decode", "not stated")


@dataclass(frozen=True)
class RunSettings:
    """The settings of one measured run (see the module docstring)."""

    framework: str
    execution: str
    pipeline: str
    xla: bool = False
    compiled: bool = False
    channels_last: bool = False
    defaults_used: list[str] = field(default_factory=list)
    memory_format: str = "channels_last"


def _framework(text: str) -> str:
    folded = text.casefold()
    if "tensorflow 1" in folded or "tensorflow-1" in folded or "tf1" in folded:
        return "tf1"
    if "tensorflow" in folded:
        return "tf2"
    if "mxnet" in folded:
        return "mxnet"
    if "pytorch" in folded or "torch" in folded:
        return "pytorch"
    return ""


def _pipeline(text: str) -> str:
    folded = text.casefold()
    if folded.startswith("synthetic"):
        return "synthetic"
    if "dali optional" in folded:
        return "not stated"
    if "dali" in folded:
        return "dali"
    if "on gpu" in folded or "cache on gpu" in folded:
        return "gpu-cached"
    if folded.startswith("real data"):
        return "cpu-decode"
    return "not stated"


def row_settings(cells: dict[str, str]) -> RunSettings:
    """The settings of a row as published (``framework``, ``notes``, ``data_pipeline`` cells)."""
    framework_text = cells.get("framework") or ""
    notes = cells.get("notes") or ""
    defaults: list[str] = []
    framework = _framework(framework_text)
    if not framework:
        framework = "pytorch"
        defaults.append("framework not stated: PyTorch")
    xla = bool(re.search(r"XLA in folder name|with XLA|--xla|xla=true|XLA enabled", notes, re.I)) and not re.search(
        r"no XLA", notes, re.I
    )
    compiled = bool(re.search(r"torch\.compile", framework_text + " " + notes, re.I))
    channels_last = bool(re.search(r"channels[- ]last|NHWC|nhwc", notes))
    if channels_last:
        memory_format = "channels_last"
    elif re.search(r"\bNCHW\b", notes):
        memory_format = "nchw"
    else:
        memory_format, reason = MEMORY_FORMAT_DEFAULTS[framework], MEMORY_FORMAT_REASONS[framework]
        if "tf_cnn_benchmarks" in framework_text:
            memory_format, reason = TF_CNN_BENCHMARKS
        defaults.append(f"memory layout not stated: {memory_format} ({reason})")
    execution = "graphs" if xla or compiled else "eager"
    if framework in ("tf1", "tf2") and not xla:
        defaults.append("TensorFlow graphs without XLA: eager launch cost per kernel")
    elif framework == "pytorch" and not compiled:
        defaults.append("PyTorch eager execution (no torch.compile stated)")
    pipeline = _pipeline(cells.get("data_pipeline") or "")
    if pipeline == "not stated":
        defaults.append("input pipeline not stated: no input-pipeline bound")
    return RunSettings(framework, execution, pipeline, xla, compiled, channels_last, defaults, memory_format)
