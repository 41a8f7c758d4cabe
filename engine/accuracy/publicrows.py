"""The public data-parallel measurements as published (``datasets/measured_public_v2.csv``).

The file is copied from public benchmark files and README tables with the sources' own words in
its cells (``intra_link`` "nvswitch (implied by DGX A100 platform named in source)", ``gpu``
"RTX 3090 (24GB)", ``throughput_unit`` "mel frames/s (DLE ...)", ...), and a ``notes`` column
that says how to read each row.  ``read_public`` turns every row it can into a
``measurements.Measurement`` and lists every other row with one reason; no row aborts the file.
A file is of this schema when it has the columns ``model_config`` and ``notes``
(``is_public_schema``); the older ``measurements_public.csv`` schema keeps its strict reader.

How each cell is read (the decisions for the file's awkward values; docs/calibration.md):

* ``model``: through ``datasets/measurement_aliases.csv``, the zoo's measured-name aliases
  (``zoo.alias_rows``) and the workload catalogue's names and aliases, at the row's
  ``seq_len_or_image_size`` ("224x224" and 224 are the same size).  A name nothing knows is
  listed "model not in the zoo".  A zoo workload that ``workloads.csv`` lacks is a catalogue
  workload through ``datasets/zoo_workloads.csv`` (generated from the zoo's layers, the sample
  unit, optimizer and default batch from ``datasets/zoo_workload_rules.csv``, by model family and
  source); one without a rule is listed "zoo model not in the workload catalogue".  A name
  neither knows is listed: "model not in the zoo".
* ``gpu``: the cell as written through the GPU catalogue's names and aliases, then its leading
  name (before " (" or " [", the memory or system-file remark), then that name with the memory in
  brackets ("RTX 3090 24GB").  Where the cell names the part the system file reports and a label
  that disagrees (the H200 NVL boards Lambda labels SXM, the GH200 at 96 GB labelled 80 GB) the
  leading name, which is the system file's (nvidia-smi's) name, is used; those rows are also
  DOUBTFUL.  "form factor not stated" (the MosaicML A100/H100 rows, 8-GPU FSDP nodes) is read as
  the SXM part, an assumption the output lists.  A GPU the catalogue lacks is listed.
* ``intra_link``: "n/a (1 GPU)" is the host PCIe link (unused); "pcie (...)" the PCIe link of the
  GPU's generation; "nvswitch (...)" / "nvlink (implied by DGX-1 ...)" the NVSwitch or
  hybrid-cube-mesh link that fits the GPU (``links.csv`` ``fits_gpus``; DGX-2 is
  ``nvswitch-nvlink2``); "nvlink (bridge ...)" an intra link of kind ``nvlink-bridge`` that fits the
  GPU, else (``links.csv`` has none today) PCIe of the GPU's generation, an assumption: a bridge
  joins two cards, so a ring over more GPUs crosses PCIe anyway, and on two cards the exchange is
  modelled slower than it is; "not stated": the GPU's usual
  server (the NVLink/NVSwitch link whose ``fits_gpus`` names it, else PCIe of its generation),
  an assumption the output lists.
* ``network``: empty (one server) is ``none``; a multi-server row says "not stated" or names the
  1600 Gb/s RoCE cluster (8 x 200 Gb/s, which no ``links.csv`` network is): both are read as the
  usual cluster of the GPU's DGX generation (``USUAL_NETWORK``: InfiniBand, 8 NICs a server for
  A100/H100-class, 4 for V100), an assumption listed per row.  On one server the network is unused
  whatever the cell says.
* ``precision``: the precision catalogue's names; "fp32" on an Ampere, Ada, Hopper or Blackwell
  GPU under NGC PyTorch or TensorFlow is ``tf32`` (their default FP32 math there: TensorFlow 1.15
  and 2.3 on Ampere are NVIDIA's builds, TF32 on by default; the notes say "TF32 may be active by
  default"), an assumption; "bf16" (pure BF16, the MPT rows) is
  ``amp-bf16``; "amp (fp16 or bf16 not stated)" is fp16 (torch.cuda.amp's default), an
  assumption.  An AMP row takes the AMP of its framework (``amp_precision``: the gradient bytes
  kept and sent): notes saying "apex opt_level O2" (the NCF rows' run logs) ``amp-fp16`` (FP16
  gradients, FP16 all-reduce); tf_cnn_benchmarks ``amp-fp16-fp16wire`` (FP32 gradients cast to
  FP16 for the all-reduce, its default ``--compact_gradient_transfer``); every other framework
  ``amp-fp16-autocast`` / ``amp-bf16-autocast`` (torch.cuda.amp, apex O1, TensorFlow's AMP
  rewrite: FP32 gradients and all-reduce), each an assumption listed per row.
* ``batch_per_gpu``: an empty cell is listed ("batch per GPU not stated"): the model's
  throughput depends on it and guessing would fit noise.  ``grad_accum_steps``: empty is 1 (the
  benchmark scripts accumulate only where they say so), an assumption.
* ``throughput``: of the whole job, as the notes of every multi-GPU row state ("total ...",
  "global"); a note that says per GPU ("tokens/s/GPU" as the value) multiplies by the GPU count;
  rows silent on it (only one-GPU rows here) are read as the whole job, where the two agree.
  ``throughput_unit``: images/sequences/samples/items/users/molecules per second are samples/s,
  "M..." per second x 1e6, molecules/ms x 1000, tokens/s divided by the workload's
  ``tokens_per_sample`` (the zoo's ``per_sample`` tokens where it gives them: GNMT's source + target
  tokens, which DLE's trainer counts), audio samples/s by the row's segment ("segment 8000 samples", else the
  zoo's ``per_sample`` audio samples) and mel frames/s by the zoo's ``per_sample`` mel frames
  (else a ``frames_per_sample`` column, else ``tokens_per_sample`` when above 1), each an
  assumption listed per row; a unit with no such count is listed as not convertible.  "not stated (values
  consistent with ...)" takes the unit the cell names, an assumption.
* ``framework``, ``notes``, ``data_pipeline``: the settings of ``settings.row_settings``.
* rows whose notes say DOUBTFUL are read and kept apart (``PublicReading.doubtful``): reported,
  left out of fits and summaries unless ``include_doubtful``.
* the MPT rows (llm-foundry, FSDP) are LLM-family: the LLM model predicts them as ZeRO-3 data
  parallel layouts (``llm.rows.public_llm_reason``; docs/accuracy.md judges them in its LLM
  section), and they are listed here with that prediction as their reason.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from paigrid.accuracy.measurements import REQUIRED, Measurement, _measurement, load_aliases
from paigrid.accuracy.settings import row_settings
from paigrid.errors import PaigridError
from paigrid.files import read_text
from paigrid.inputs.catalog import Catalogues, csv_table

#: the columns that mark a measurements file as the public-as-published schema
SCHEMA_COLUMNS = ("model_config", "notes")
#: the usual multi-server network of a GPU generation's DGX system: (network, NICs per server).
#: DGX-1 V100: 4 x 100 Gb/s EDR InfiniBand (DGX-1 with V100 system architecture whitepaper, 2017);
#: DGX A100: 8 x 200 Gb/s HDR (DGX A100 system architecture whitepaper, 2020); DGX H100/H200: 8 x
#: 400 Gb/s NDR (DGX H100 datasheet, 2022); DGX B200: 8 x 400 Gb/s NDR (DGX B200 datasheet, 2024)
USUAL_NETWORK = {
    "Volta": ("ib-edr-100g", 4),
    "Ampere": ("ib-hdr-200g", 8),
    "Hopper": ("ib-ndr-400g", 8),
    "Blackwell": ("ib-ndr-400g", 8),
}
#: samples/s multipliers of the throughput units read as samples
SAMPLE_WORDS = (
    "images",
    "img",
    "sequences",
    "seq",
    "samples",
    "items",
    "users",
    "molecules",
    "sentences",
    "utterances",
    "queries",
    "graphs",
)


@dataclass
class Refused:
    """A row that cannot be modelled: its id, line and the reason (one sentence)."""

    id: str
    line: int
    reason: str

    @property
    def category(self) -> str:
        """The reason's first clause, for counting ("model not in the zoo", ...)."""
        return self.reason.split(":")[0]


@dataclass
class PublicReading:
    """What ``read_public`` made of a file: rows to model, DOUBTFUL rows kept apart, refused rows
    with their reasons and, per row id, the assumptions and defaults its reading used."""

    rows: list[Measurement]
    doubtful: list[Measurement] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    assumptions: dict[str, list[str]] = field(default_factory=dict)
    total_rows: int = 0
    #: the catalogues the rows resolve against (the built-in workloads extended with the zoo's,
    #: ``zoo.with_zoo_workloads``); predictions of the rows use these
    cats: Catalogues | None = None

    def counts(self) -> dict[str, int]:
        """Refused rows per reason category, most frequent first."""
        out: dict[str, int] = {}
        for r in self.refused:
            out[r.category] = out.get(r.category, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def assumption_counts(self) -> dict[str, int]:
        """Rows per assumption or default used (of the modelled and DOUBTFUL rows)."""
        out: dict[str, int] = {}
        for items in self.assumptions.values():
            for text in items:
                out[text] = out.get(text, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


class NotModelled(Exception):
    """A row the model cannot express; the message is the listed reason."""


def is_public_schema(header: list[str]) -> bool:
    """True for the public-as-published schema (``SCHEMA_COLUMNS`` present)."""
    return all(c in header for c in SCHEMA_COLUMNS)


# --- cells --------------------------------------------------------------------------------------
def _size(cell: str) -> str:
    """``seq_len_or_image_size`` as the alias table writes it: "224x224" -> "224"."""
    text = cell.strip()
    match = re.fullmatch(r"(\d+)x(\d+)", text)
    return match.group(1) if match and match.group(1) == match.group(2) else text


def resolve_gpu(cell: str, cats: Catalogues, notes: list[str], cache: dict | None = None) -> str:
    """Catalogue name of a GPU cell as published (see the module docstring); ``NotModelled``
    naming the GPU when the catalogue has none of its spellings.  ``cache``: a dict kept by the
    caller for one catalogue (a failed catalogue look-up computes suggestions, which is slow)."""
    cache = {} if cache is None else cache
    if cell not in cache:
        found: list[str] = []
        try:
            cache[cell] = (_resolve_gpu(cell, cats, found), found)
        except NotModelled as exc:
            cache[cell] = str(exc)
    cached = cache[cell]
    if isinstance(cached, str):
        raise NotModelled(cached)
    notes += cached[1]
    return cached[0]


def _resolve_gpu(cell: str, cats: Catalogues, notes: list[str]) -> str:
    text = cell.strip()
    head = re.split(r" \(| \[", text, maxsplit=1)[0].strip()
    memory = re.search(r"\((\d+)\s*GB\)", text)
    candidates = [text, head]
    if memory:
        candidates += [f"{head} {memory.group(1)}GB", f"{head}-{memory.group(1)}GB"]
    if "form factor not stated" in text:
        size = re.search(r"(\d+)GB", head)
        family = head.split("-")[0]
        if size and family in ("A100", "H100"):
            sxm = f"{family}-SXM{4 if family == 'A100' else 5}-{size.group(1)}GB"
            candidates.insert(0, sxm)
    for name in candidates:
        try:
            gpu = cats.gpus.resolve(name)
        except PaigridError:
            continue
        if "form factor not stated" in text:
            notes.append("GPU form factor not stated: read as the SXM part")
        return gpu
    raise NotModelled(f"GPU not in the catalogue: {head}")


def _fits(row: dict[str, str], gpu: str) -> bool:
    return gpu in [g.strip() for g in (row.get("fits_gpus") or "").split(";")]


def _pcie(cats: Catalogues, gpu: str) -> str:
    return f"pcie{int(cats.gpus.number(gpu, 'pcie_gen'))}"


def _fitting(cats: Catalogues, gpu: str, kinds: tuple[str, ...]) -> str | None:
    """The intra link of one of ``kinds`` whose ``fits_gpus`` names the GPU (None if none)."""
    for row in cats.links.rows:
        if row["scope"] == "intra" and row["kind"] in kinds and _fits(row, gpu):
            return row["name"]
    return None


def resolve_intra(cell: str, gpu: str, n_gpu: int, cats: Catalogues, notes: list[str]) -> str:
    """The intra-server link of an ``intra_link`` cell as published (see the module docstring)."""
    text = cell.strip().casefold()
    if n_gpu == 1 or text.startswith("n/a"):
        return "none"
    if text.startswith("pcie"):
        return _pcie(cats, gpu)
    if "dgx-2" in text:
        return "nvswitch-nvlink2"
    if text.startswith("nvswitch") or "dgx-1" in text:
        link = _fitting(cats, gpu, ("nvswitch", "nvlink-hcm", "nvlink"))
        if link is None:
            raise NotModelled(f"no NVLink/NVSwitch link of links.csv fits {gpu}")
        return link
    if "bridge" in text:
        link = _fitting(cats, gpu, ("nvlink-bridge",))
        if link is None:
            notes.append("NVLink bridge with no links.csv bridge link: PCIe of the GPU's generation")
            return _pcie(cats, gpu)
        return link
    if text.startswith("not stated"):
        link = _fitting(cats, gpu, ("nvswitch", "nvlink-hcm", "nvlink")) or _pcie(cats, gpu)
        notes.append("intra_link not stated: the GPU's usual server")
        return link
    raise NotModelled(f"intra_link text names no link: {cell.strip()}")


def resolve_network(cell: str, gpu: str, nodes: int, cats: Catalogues, notes: list[str]) -> tuple[str, int]:
    """(network, NICs per server) of a ``network`` cell as published; one server: ``none``, 0."""
    if nodes == 1:
        return "none", 0
    generation = (cats.gpus.row(gpu).get("generation") or "").strip()
    if generation not in USUAL_NETWORK:
        raise NotModelled(f"network not stated and no usual cluster network for {generation or gpu}")
    text = cell.strip()
    notes.append(
        "network not stated: the GPU generation's usual DGX cluster network"
        if text.casefold().startswith("not stated") or not text
        else "RoCE cluster text names no links.csv network: the usual DGX cluster network"
    )
    return USUAL_NETWORK[generation]


#: generations whose tensor cores run TF32, the default FP32 math of the frameworks below on them
TF32_GENERATIONS = ("Ampere", "Ada", "Hopper", "Blackwell")


def _tf32_default(framework: str) -> bool:
    """True for a framework whose default FP32 math on a TF32 GPU is TF32: NGC PyTorch containers
    (cuDNN convolutions with TF32 allowed by default, matmuls through NVIDIA_TF32_OVERRIDE unset)
    and every TensorFlow.  Upstream TensorFlow turns TF32 on by default from 2.4, the first
    release built for CUDA 11 and Ampere (TensorFlow 2.4.0 release notes); the TensorFlow 1.15
    and 2.2/2.3 of the Ampere rows are therefore NVIDIA's builds for Ampere (NGC TensorFlow
    containers, ``nvidia-tensorflow``), in which TF32 is on by default too (NVIDIA TensorFlow
    container release notes, 20.06 and later: "TF32 ... enabled by default",
    ``NVIDIA_TF32_OVERRIDE=0`` turns it off).  The rows agree: tf_cnn_benchmarks' AlexNet "fp32"
    on an A100 PCIe runs 10,187 images/s, about 51 TFLOP/s at the zoo's 5.0 GFLOP per training
    image, 2.6 times the A100's FP32 (non-tensor) peak of 19.5 TFLOP/s."""
    folded = framework.casefold()
    if "tensorflow" in folded:
        return True
    return "ngc" in folded and "pytorch" in folded


def resolve_precision(
    cell: str, cats: Catalogues, notes: list[str], gpu: str = "", framework: str = "", row_notes: str = ""
) -> str:
    """Catalogue precision of a ``precision`` cell as published; ``fp32`` on a TF32 GPU under a
    framework whose default FP32 math is TF32 (``_tf32_default``) is ``tf32``, an assumption; an
    AMP cell is the AMP of the row's framework (``amp_precision``)."""
    text = cell.strip().casefold()
    if (
        text == "fp32"
        and gpu
        and (cats.gpus.row(gpu).get("generation") or "").strip() in TF32_GENERATIONS
        and _tf32_default(framework)
    ):
        notes.append("fp32 on a TF32 GPU: the framework's default TF32 math")
        return cats.precisions.resolve("tf32")
    if text == "bf16":
        return cats.precisions.resolve("amp-bf16")
    if text.startswith("amp (fp16 or bf16 not stated"):
        notes.append("AMP dtype not stated: fp16 (torch.cuda.amp's default)")
        return cats.precisions.resolve(amp_precision("fp16", framework, row_notes, notes))
    if text in ("amp-fp16", "amp-bf16"):
        return cats.precisions.resolve(amp_precision(text.removeprefix("amp-"), framework, row_notes, notes))
    try:
        return cats.precisions.resolve(cell.strip())
    except PaigridError:
        raise NotModelled(f"precision not in precisions.csv: {cell.strip()}") from None


def amp_precision(dtype: str, framework: str, row_notes: str, notes: list[str]) -> str:
    """The catalogue AMP precision (``datasets/precisions.csv``) of an ``amp-fp16`` / ``amp-bf16``
    row, by what the row's framework keeps and sends per gradient element (bytes), each reading
    an assumption listed in ``notes``:

    * notes that say "apex opt_level O2" (the DLE NCF rows' run logs): ``amp-DTYPE``, FP16 model
      weights and gradients (2 bytes), all-reduced in FP16 (2);
    * TensorFlow tf_cnn_benchmarks (``--use_fp16``): ``amp-fp16-fp16wire``, FP32 variables and
      gradients (4), cast to FP16 for the all-reduce (2) by its default
      ``--compact_gradient_transfer=True`` (the rows' notes state no override);
    * every other framework: ``amp-DTYPE-autocast``, FP32 parameters and gradients (4) and an
      FP32 all-reduce (4): torch.cuda.amp / torch.autocast with DDP and no compression hook,
      TensorFlow's AMP graph rewrite under Horovod without ``hvd.Compression.fp16``; a PyTorch
      before 1.6 (which has no torch.cuda.amp) ran apex amp at an opt_level the row does not
      record, read as O1 (FP32 weights and gradients)."""
    if re.search(r"apex opt_level O2", row_notes, re.I):
        notes.append("AMP is apex opt_level O2 (the row's notes): FP16 weights and gradients, all-reduced in FP16")
        return f"amp-{dtype}"
    if "tf_cnn_benchmarks" in framework.casefold() and dtype == "fp16":
        notes.append(
            "tf_cnn_benchmarks --use_fp16: FP32 variables and gradients, all-reduced in FP16 "
            "(its default --compact_gradient_transfer=True; no override stated)"
        )
        return "amp-fp16-fp16wire"
    version = re.search(r"pytorch\s+(\d+)\.(\d+)", framework, re.I)
    if version and (int(version[1]), int(version[2])) < (1, 6):
        notes.append(
            "AMP on PyTorch before 1.6 (no torch.cuda.amp) is apex amp at an opt_level the row does not "
            "record: read as O1, FP32 weights and gradients, FP32 all-reduce"
        )
    else:
        notes.append("AMP as torch.cuda.amp / TensorFlow AMP: FP32 parameters and gradients, FP32 all-reduce")
    return f"amp-{dtype}-autocast"


def _gpu_count(cells: dict[str, str], column: str) -> int:
    """A GPU or node count of a row as published: a whole number from 1 to 2**31 - 1, else the
    row is not modelled (with the cell in its reason)."""
    try:
        value = float(cells[column])
    except (KeyError, TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value == int(value) and 1 <= value <= 2**31 - 1):
        raise NotModelled(f"{column} is not a whole number from 1 to 2147483647: {cells.get(column)!r}")
    return int(value)


def samples_per_second(cells: dict[str, str], workload: str, cats: Catalogues, notes: list[str]) -> float:
    """Measured samples/s of the whole job of a row as published (units and per-GPU values as
    the module docstring says)."""
    try:
        value = float(cells["throughput"])
    except ValueError:
        raise NotModelled(f"throughput is not a number: {cells['throughput']!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise NotModelled(f"throughput is not positive: {cells['throughput']!r}")
    unit = cells["throughput_unit"].strip()
    folded = unit.casefold()
    if folded.startswith("not stated (values consistent with"):
        notes.append("throughput unit not stated: the unit the values are consistent with")
        folded = folded.split("consistent with", 1)[1]
        folded = "msamples/s" if "millions" in folded else folded
    if "items vs tokens" in (cells.get("notes") or "") or ("items" in folded and "tokens" in folded):
        raise NotModelled("throughput unit ambiguous: items or tokens")
    head = folded.split("(")[0].strip()
    counts = _zoo_counts(workload)
    if "mel" in head:
        frames, column = counts.get("mel frames"), "the zoo's per_sample mel frames"
        if frames is None:
            frames, column = _count(cats, workload, "frames_per_sample"), "the workload's frames_per_sample"
        if frames is None and (_count(cats, workload, "tokens_per_sample") or 1.0) > 1.0:
            frames, column = _count(cats, workload, "tokens_per_sample"), "the workload's tokens_per_sample"
        if not frames or frames <= 0:
            raise NotModelled(
                "mel frames/s not convertible: the workload gives no mel frames per sample "
                "(zoo per_sample, frames_per_sample, or tokens_per_sample above 1)"
            )
        notes.append(f"mel frames/s converted with {column} as mel frames per sample")
        value /= frames
    elif head.startswith("audio samples"):
        segment = re.search(r"segment (\d+) samples", cells.get("seq_len_or_image_size") or "")
        if segment:
            notes.append("audio samples/s converted with the row's segment length")
            value /= float(segment.group(1))
        elif counts.get("audio samples"):
            notes.append("audio samples/s converted with the zoo's per_sample audio samples")
            value /= counts["audio samples"]
        else:
            raise NotModelled(
                "audio samples/s not convertible: no segment length in seq_len_or_image_size "
                "and no zoo per_sample audio samples"
            )
    elif "tokens" in head:
        # the zoo's per_sample tokens are the tokens the source's counter counts in one sample
        # (DLE GNMT's trainer counts source + target tokens of a sentence pair); else the
        # catalogue's tokens_per_sample
        tokens = counts.get("tokens") or cats.workloads.number(workload, "tokens_per_sample")
        if counts.get("tokens") and counts["tokens"] != cats.workloads.number(workload, "tokens_per_sample"):
            notes.append("tokens/s converted with the zoo's per_sample tokens (the tokens the source counts)")
        value /= tokens if tokens > 0 else 1.0
    elif head.startswith("msamples"):
        value *= 1e6
    elif head.endswith("/ms") and head.split("/")[0] in SAMPLE_WORDS:
        value *= 1000.0
    elif head.split("/")[0] not in SAMPLE_WORDS:
        raise NotModelled(f"throughput unit not convertible: {unit}")
    n_gpu = _gpu_count(cells, "gpus_per_node") * _gpu_count(cells, "nodes")
    if n_gpu > 1 and _says_per_gpu(cells.get("notes") or ""):
        value *= n_gpu
    if n_gpu == 1 and not re.search(r"\btotal\b|\bglobal\b|single[- ]GPU", cells.get("notes") or "", re.I):
        notes.append("throughput silent on total vs per GPU: one GPU, where they agree")
    return value


def _says_per_gpu(text: str) -> bool:
    """True when a row's notes say its value is per GPU (and nowhere that it is the total)."""
    return bool(re.search(r"throughput is per[- ]GPU|value is per[- ]GPU", text, re.I))


def _zoo_counts(workload: str) -> dict[str, float]:
    """The zoo's ``per_sample`` counts of a workload (mel frames, audio samples, tokens of one
    sample); empty when the zoo has no such entry or no zoo is installed."""
    try:
        from paigrid.inputs.zoo import builtin_models
    except ImportError:
        return {}
    for model in builtin_models():
        if workload in model.workloads:
            return dict(getattr(model, "per_sample", {}) or {})
    return {}


def _unknown_model(name: str, size: str) -> str:
    """Why a measured model name gives no catalogue workload: the zoo does not know it, or the
    zoo describes it but the workload catalogue has no row of that workload yet."""
    try:
        from paigrid.inputs.zoo import resolve_measured

        workload = resolve_measured(name, size)
    except (ImportError, PaigridError):
        return f"model not in the zoo: {name}"
    return f"zoo model not in the workload catalogue: {workload}"


def zoo_aliases() -> list[dict[str, str]]:
    """The zoo's measured-name aliases (``zoo.alias_rows``, the schema of
    ``measurement_aliases.csv``); empty without them."""
    try:
        from paigrid.inputs.zoo import alias_rows
    except ImportError:
        return []
    return alias_rows()


def _count(cats: Catalogues, workload: str, column: str) -> float | None:
    """A per-sample count column of the workload catalogue (None when absent or not positive)."""
    if column not in cats.workloads.columns:
        return None
    try:
        value = cats.workloads.number(workload, column)
    except PaigridError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _optimizer(cell: str, cats: Catalogues) -> str:
    """The optimizers.csv name of an optimizer cell as published ("SGD momentum 0.9 (lr=0 ...)",
    "LAMB (jitlamb; lr=0)"); empty (the workload's own) when it names none."""
    text = cell.strip().split("(")[0].strip()
    for candidate in (text, " ".join(text.split()[:2]), text.split(" ")[0] if text else ""):
        if candidate and not candidate.casefold().startswith("not stated"):
            try:
                return cats.optimizers.resolve(candidate)
            except PaigridError:
                continue
    return ""


def _legacy_cells(cells: dict[str, str], cats: Catalogues, aliases, notes: list[str], cache: dict) -> dict[str, str]:
    """The row in the strict schema of ``measurements.py``, every awkward value decided."""
    from paigrid.llm.rows import is_llm_family, public_llm_reason

    if is_llm_family(cells):  # the LLM model judges it; its reason carries that prediction
        raise NotModelled(public_llm_reason(cells, cats))
    if not (cells.get("batch_per_gpu") or "").strip():
        raise NotModelled("batch per GPU not stated")
    gpus_per_node, nodes = _gpu_count(cells, "gpus_per_node"), _gpu_count(cells, "nodes")
    n_gpu = gpus_per_node * nodes
    gpu = resolve_gpu(cells["gpu"], cats, notes, cache)
    from paigrid.accuracy.measurements import resolve_model

    size = _size(cells.get("seq_len_or_image_size") or "")
    try:
        workload = resolve_model(cells["model"], size, aliases, cats, "")
    except PaigridError:
        raise NotModelled(_unknown_model(cells["model"].strip(), cells.get("seq_len_or_image_size") or "")) from None
    intra = resolve_intra(cells["intra_link"], gpu, n_gpu, cats, notes)
    network, nics = resolve_network(cells.get("network") or "", gpu, nodes, cats, notes)
    accum = (cells.get("grad_accum_steps") or "").strip()
    if not accum:
        notes.append("grad_accum_steps empty: 1")
    settings = row_settings(cells)
    notes += settings.defaults_used
    optimizer = _optimizer(cells.get("optimizer") or "", cats)
    if not optimizer and (cats.workloads.row(workload).get("rule_source") or "").strip():
        notes.append("optimizer not stated: the zoo family rule's (datasets/zoo_workload_rules.csv)")
    out = {
        "id": cells["id"],
        "model": cells["model"],
        "gpu": gpu,
        "gpus_per_node": str(gpus_per_node),
        "nodes": str(nodes),
        "arch": cells["arch"].strip(),
        "intra_link": intra,
        "network": network,
        "nics_per_node": str(nics),
        "precision": resolve_precision(
            cells["precision"], cats, notes, gpu, cells.get("framework") or "", cells.get("notes") or ""
        ),
        "batch_per_gpu": cells["batch_per_gpu"],
        "grad_accum_steps": accum or "1",
        "seq_len_or_image_size": size,
        "throughput": "1",
        "throughput_unit": "samples/s",
        "framework": cells.get("framework", ""),
        "data_pipeline": settings.pipeline,
        "source": cells.get("source", ""),
        "optimizer": optimizer,
        "execution": settings.execution,
        "memory_format": settings.memory_format,
    }
    out["throughput"] = repr(samples_per_second(cells, workload, cats, notes))
    return out


def read_public(path: str | Path, cats: Catalogues | None = None, aliases=None) -> PublicReading:
    """Read a measurements file of the public-as-published schema: every row is modelled, kept
    apart as DOUBTFUL, or listed with its reason (``Refused``); the file is never aborted for one
    row.  Rows the model's kernel declares invalid (``predict.reason_text``) are listed too.
    The built-in workload catalogue of ``cats`` is extended with the zoo's workloads
    (``zoo.with_zoo_workloads``): ``PublicReading.cats`` are the catalogues to predict the rows
    with."""
    from paigrid.inputs.efficiency import defaults
    from paigrid.inputs.spec import Options
    from paigrid.inputs.zoo import with_zoo_workloads
    from paigrid.predict import predict_configs, reason_text

    path = Path(path)
    cats = with_zoo_workloads(cats or Catalogues.load())
    aliases = load_aliases() + zoo_aliases() if aliases is None else aliases
    _, table = csv_table(
        read_text(path, "the measurements file"),
        str(path),
        "a public measurements file",
        (*REQUIRED, "notes"),
    )
    reading = PublicReading([], total_rows=len(table), cats=cats)
    kept: list[tuple[Measurement, int, bool]] = []
    seen: set[str] = set()
    gpu_cache: dict = {}
    for line, cells in table:
        ident = (cells.get("id") or "").strip()
        notes: list[str] = []
        try:
            if not ident:
                raise NotModelled("id is empty")
            if ident in seen:
                raise NotModelled("id used twice")
            seen.add(ident)
            legacy = _legacy_cells(cells, cats, aliases, notes, gpu_cache)
            row = _measurement(legacy, aliases, cats, f"{path} line {line}")
        except NotModelled as exc:
            reading.refused.append(Refused(ident, line, str(exc)))
            continue
        except PaigridError as exc:
            reading.refused.append(Refused(ident, line, f"not readable: {str(exc).split(': ', 1)[-1]}"))
            continue
        row.cells = cells  # selections (--rows-where) match the cells as published
        reading.assumptions[ident] = notes
        kept.append((row, line, "DOUBTFUL" in (cells.get("notes") or "")))
    if kept:
        jobs = [r.job(Options()) for r, _, _ in kept]
        results = predict_configs(jobs, [r.config() for r, _, _ in kept], cats, defaults(), Options())
        for (row, line, doubtful), job, result in zip(kept, jobs, results):
            if not result["valid"]:
                reason = f"invalid configuration: {reason_text(result, job, cats)}"
                reading.refused.append(Refused(row.id, line, reason))
                reading.assumptions.pop(row.id, None)
            elif doubtful:
                reading.doubtful.append(row)
            else:
                reading.rows.append(row)
    reading.refused.sort(key=lambda r: r.line)
    return reading


def public_header(path: str | Path) -> list[str]:
    """The header of a measurements CSV (for ``is_public_schema``)."""
    header, _ = csv_table(read_text(Path(path), "the measurements file"), str(path), "a measurements file")
    return header
