"""Synthetic job populations shaped like the Alibaba-PAI cluster of Wang et al. (IISWC 2019).

A *population* is a list of training jobs, one dict per job, with exactly the keys of
:data:`POPULATION_COLUMNS` (the columns of a population CSV, in file order). Numeric fields
(``gpus_per_node``, ``current_n_gpu`` and a set ``batch``) are ``int``; an empty ``batch``
is ``""`` and means "the model's default batch".

How :func:`synthetic_population` draws a job (every table below is a module-level constant)
-----------------------------------------------------------------------------------------
The population is calibrated ONLY to descriptive statistics of the paper's trace (Dec 2018 -
Jan 2019): PS/Worker jobs are 29% of jobs but 81% of GPUs, and the PAI server has 8 GPUs in
two PCIe trees and one 25 GbE NIC. Nothing here is tuned to the paper's headline results
(62% communication, 60% of PS/Worker jobs faster with AllReduce-NVLink, 1.7x from 25 to
100 GbE) nor to the ~10% input-I/O share of 1w1g jobs: those are outputs of the model.

1. Architecture (:data:`ARCH_JOB_SHARE`): ps-worker 29% (paper); the remaining 71% is split
   1w1g 42%, 1wng 17%, allreduce-local 12% (our choice: single-GPU jobs are the largest group
   of a shared cluster, and in 2018 most multi-GPU single-server jobs still used the
   PCIe-based 1wng path rather than NCCL all-reduce). No allreduce-cluster jobs: the paper's
   cross-server jobs are PS/Worker. Job counts per architecture are exact quotas (largest
   remainder of ``n_jobs x share``), shuffled with the generator, so the job shares are exact
   up to rounding for any ``n_jobs``.
2. GPUs per job (:data:`ARCH_N_GPU`): 1w1g 1; 1wng {2, 4, 8} with p {0.5, 0.3, 0.2} (mean
   3.8); allreduce-local {2, 4, 8} with p {0.2, 0.4, 0.4} (mean 5.2); ps-worker {2, 4, ..., 128}
   with p {0.10, 0.15, 0.20, 0.22, 0.17, 0.11, 0.05} (mean 24.8 GPUs, a heavy tail). The
   ps-worker table is the one calibrated to the 81% GPU share: the non-PS jobs use
   0.42 x 1 + 0.17 x 3.8 + 0.12 x 5.2 = 1.69 GPUs per job of the population, PS/Worker jobs
   0.29 x 24.8 = 7.19, so the expected PS/Worker GPU share is 7.19 / (7.19 + 1.69) = 0.810.
   (:func:`expected_shares` does this arithmetic from the tables.)
3. GPU (:data:`GPU_MIX`, same for every architecture): P100-PCIe-16GB 40%, V100-PCIe-16GB 30%,
   V100-SXM2-16GB 10%, V100-SXM2-32GB 5%, K80 10%, T4 5% -- an era mix (P100 and V100 dominant;
   K80 as the older generation; T4 only launched in late 2018, so few).
4. Server: ``gpus_per_node`` 8 for every job (the paper's PAI server); ``current_network``
   eth-25g for every job (one 25 GbE NIC; single-server jobs carry it too, unused);
   ``current_intra`` from the GPU (:data:`INTRA_FOR_GPU`): pcie3 (two PCIe 3.0 trees) for all
   but the SXM2 V100s, which sit in DGX-1-style nvlink2-hcm servers. So 1/3 of V100 jobs
   (15% of all jobs) are on NVLink servers: a documented minority.
5. Model (:data:`MODEL_MIX`, same for every architecture): the six PAI case-study models
   (resnet50, nmt, bert, speech, multi-interests, gcn) 60% together, the other seven TBD
   models (inception-v3, seq2seq-nmt, transformer, faster-rcnn, deepspeech2, wgan, a3c) 40%.
6. Precision: fp32 for every job (mixed precision was not yet common on PAI in 2018-19).
7. Batch: empty (model default) for 70% of jobs; otherwise drawn uniformly from the model's
   menu in :data:`BATCH_MENU` (per-GPU samples, powers of two around common reference runs,
   our choice). Models with no menu always use the default.

Draw order (for reproducibility with ``numpy.random.default_rng(seed)``): architecture
permutation, then per-job vectors in this order: GPU count, GPU, model, batch-set flag,
batch choice.

Populations of 2026 (:func:`llm_jobs`, ``llm_share`` > 0)
--------------------------------------------------------
A share ``llm_share`` of the jobs (rounded to whole jobs) are LLM training jobs beside the
PAI-era ones; the PAI-era part is exactly ``synthetic_population(n - n_llm, seed)``, the LLM jobs
follow it, drawn from their own generator (``default_rng([seed, 2026])``).  The mix is an
assumption (no public trace gives it), every table a module constant:

1. Kind: pre-training for a share ``llm_pretrain_share`` (default 0.2) of the LLM jobs,
   fine-tuning for the rest (exact quotas, shuffled).
2. Model (:data:`LLM_PRETRAIN_MIX`, :data:`LLM_FINETUNE_MIX`): names of ``datasets/llm_models.csv``;
   fine-tuning favours the open 7-13B models, pre-training spreads up to 405B.
3. GPUs (:data:`LLM_N_GPU`): pre-training 64 to 1,024, fine-tuning 1 to 16.
4. GPU (:data:`LLM_GPU_MIX`): H100-SXM5-80GB 45%, H200 25%, A100-SXM4-80GB 20%, B200 10%; the
   NVLink of each (:data:`LLM_INTRA`), 8 GPUs per server, InfiniBand NDR 400 Gb/s
   (``ib-ndr-400g``), ``amp-bf16``, the model's default batch.
5. Architecture: data parallel as the population columns can say it: ``1w1g`` on one GPU,
   ``allreduce-local`` within a server, ``allreduce-cluster`` across servers.

Such a population is swept like any other once LLM names are sweep workloads (the model column
names them as it names any workload).
"""

from __future__ import annotations

import numpy as np

from paigrid.kernels.dp_columns import ARCH_NAMES

POPULATION_COLUMNS = (
    "job",
    "model",
    "batch",
    "gpus_per_node",
    "current_arch",
    "current_gpu",
    "current_n_gpu",
    "current_intra",
    "current_network",
    "current_precision",
    "source",
)
"""Columns of a population CSV, in file order."""

ARCHS = ARCH_NAMES
"""Training architectures a population row may name (the kernel's)."""

ARCH_JOB_SHARE = {"1w1g": 0.42, "1wng": 0.17, "allreduce-local": 0.12, "ps-worker": 0.29}
"""Share of jobs per architecture (ps-worker 0.29 from the paper; the split of the rest is ours)."""

ARCH_N_GPU = {
    "1w1g": ((1,), (1.0,)),
    "1wng": ((2, 4, 8), (0.5, 0.3, 0.2)),
    "allreduce-local": ((2, 4, 8), (0.2, 0.4, 0.4)),
    "ps-worker": ((2, 4, 8, 16, 32, 64, 128), (0.10, 0.15, 0.20, 0.22, 0.17, 0.11, 0.05)),
}
"""GPUs per job: (values, probabilities) per architecture; ps-worker calibrated to 81% of GPUs."""

GPU_MIX = {
    "P100-PCIe-16GB": 0.40,
    "V100-PCIe-16GB": 0.30,
    "V100-SXM2-16GB": 0.10,
    "V100-SXM2-32GB": 0.05,
    "K80": 0.10,
    "T4": 0.05,
}
"""Share of jobs per GPU catalogue name (2018-19 era mix, our choice)."""

INTRA_FOR_GPU = {"V100-SXM2-16GB": "nvlink2-hcm", "V100-SXM2-32GB": "nvlink2-hcm"}
"""Intra-server link for GPUs in NVLink servers; every other GPU gets :data:`DEFAULT_INTRA`."""

DEFAULT_INTRA = "pcie3"
GPUS_PER_NODE = 8
NETWORK = "eth-25g"
PRECISION = "fp32"

MODEL_MIX = {
    # PAI case-study models (Wang et al.): 0.60 together
    "resnet50": 0.14,
    "nmt": 0.10,
    "bert": 0.10,
    "speech": 0.08,
    "multi-interests": 0.12,
    "gcn": 0.06,
    # the other TBD models (Zhu et al.): 0.40 together
    "inception-v3": 0.06,
    "seq2seq-nmt": 0.05,
    "transformer": 0.07,
    "faster-rcnn": 0.06,
    "deepspeech2": 0.06,
    "wgan": 0.05,
    "a3c": 0.05,
}
"""Share of jobs per workload name."""

BATCH_SET_SHARE = 0.30
"""Share of jobs with an explicit per-GPU batch; the rest use the model default."""

BATCH_MENU = {
    "resnet50": (32, 64, 128, 256),
    "inception-v3": (32, 64, 128),
    "faster-rcnn": (1, 2, 4),
    "seq2seq-nmt": (64, 128, 256),
    "nmt": (64, 128, 256),
    "transformer": (32, 64, 128),
    "bert": (16, 32, 64),
    "speech": (16, 32, 64),
    "deepspeech2": (16, 32, 64),
    "multi-interests": (256, 512, 1024, 2048),
    "wgan": (32, 64, 128),
    "a3c": (16, 32, 64),
}
"""Per-GPU batch menu (samples) per model; a model missing here (gcn) always uses its default."""


LLM_PRETRAIN_SHARE = 0.2
"""Share of the LLM jobs that pre-train (the rest fine-tune): an assumption."""

LLM_PRETRAIN_MIX = {
    "llama3-8b": 0.20,
    "llama2-7b": 0.10,
    "llama2-13b": 0.10,
    "mixtral-8x7b": 0.10,
    "deepseek-moe-16b": 0.10,
    "llama3-70b": 0.15,
    "llama2-70b": 0.10,
    "gpt3-175b": 0.10,
    "llama3-405b": 0.05,
}
"""Share of pre-training jobs per LLM (names of datasets/llm_models.csv; our choice)."""

LLM_FINETUNE_MIX = {
    "llama3-8b": 0.30,
    "llama2-7b": 0.25,
    "llama2-13b": 0.15,
    "mixtral-8x7b": 0.10,
    "deepseek-moe-16b": 0.05,
    "llama3-70b": 0.10,
    "llama2-70b": 0.05,
}
"""Share of fine-tuning jobs per LLM (open 7-70B models; our choice)."""

LLM_N_GPU = {
    "pretrain": ((64, 128, 256, 512, 1024), (0.25, 0.30, 0.25, 0.15, 0.05)),
    "finetune": ((1, 2, 4, 8, 16), (0.20, 0.15, 0.20, 0.35, 0.10)),
}
"""GPUs per LLM job: (values, probabilities) per kind (our choice)."""

LLM_GPU_MIX = {"H100-SXM5-80GB": 0.45, "H200": 0.25, "A100-SXM4-80GB": 0.20, "B200": 0.10}
"""Share of LLM jobs per GPU (a 2026 training fleet; our choice)."""

LLM_INTRA = {
    "H100-SXM5-80GB": "nvswitch-nvlink4",
    "H200": "nvswitch-nvlink4",
    "A100-SXM4-80GB": "nvswitch-nvlink3",
    "B200": "nvlink5",
}
"""The intra-server link of each LLM GPU's server."""

LLM_NETWORK = "ib-ndr-400g"
LLM_PRECISION = "amp-bf16"


def _quotas(n: int, shares: dict[str, float]) -> dict[str, int]:
    """Split ``n`` jobs over ``shares`` by largest remainder (counts sum to ``n``)."""
    raw = {k: n * v for k, v in shares.items()}
    counts = {k: int(np.floor(v)) for k, v in raw.items()}
    left = n - sum(counts.values())
    for k in sorted(raw, key=lambda k: counts[k] - raw[k])[:left]:
        counts[k] += 1
    return counts


def _check_share(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be a fraction from 0 to 1, got {value!r}.")
    return float(value)


def synthetic_population(
    n_jobs: int, seed: int, llm_share: float = 0.0, llm_pretrain_share: float = LLM_PRETRAIN_SHARE
) -> list[dict]:
    """Draw ``n_jobs`` PAI-like training jobs, reproducibly from ``seed``; a share ``llm_share``
    of them (a fraction) are 2026 LLM jobs (:func:`llm_jobs`), of which ``llm_pretrain_share``
    pre-train.

    Returns a list of rows (dicts keyed by :data:`POPULATION_COLUMNS`); ``current_n_gpu`` and
    ``gpus_per_node`` are GPU counts, ``batch`` is a per-GPU batch in samples or ``""`` for the
    model default. The same ``(n_jobs, seed)`` always gives the same rows. Distributions are in
    the module docstring. Raises ValueError if ``n_jobs`` or ``seed`` is not a non-negative
    integer.
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 0:
        raise ValueError(f"n_jobs must be a non-negative integer, got {n_jobs!r}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}.")
    llm_share = _check_share("llm_share", llm_share)
    llm_pretrain_share = _check_share("llm_pretrain_share", llm_pretrain_share)
    n_llm = int(round(int(n_jobs) * llm_share))
    rows = _pai_jobs(int(n_jobs) - n_llm, int(seed))
    return rows + llm_jobs(n_llm, int(seed), llm_pretrain_share) if n_llm else rows


def _pai_jobs(n: int, seed: int) -> list[dict]:
    """The PAI-era jobs of :func:`synthetic_population`."""
    rng = np.random.default_rng(seed)
    arch_counts = _quotas(n, ARCH_JOB_SHARE)
    archs = np.array([a for a, c in arch_counts.items() for _ in range(c)], dtype=object)
    archs = archs[rng.permutation(n)] if n else archs

    n_gpu = np.ones(n, dtype=np.int64)
    for arch, (values, probs) in ARCH_N_GPU.items():
        mask = archs == arch
        n_gpu[mask] = rng.choice(values, size=int(mask.sum()), p=probs)
    gpus = rng.choice(list(GPU_MIX), size=n, p=list(GPU_MIX.values()))
    models = rng.choice(list(MODEL_MIX), size=n, p=list(MODEL_MIX.values()))
    batch_set = rng.random(n) < BATCH_SET_SHARE
    batch_pick = rng.random(n)

    rows = []
    for i in range(n):
        model = str(models[i])
        menu = BATCH_MENU.get(model)
        batch = menu[int(batch_pick[i] * len(menu))] if (menu and batch_set[i]) else ""
        gpu = str(gpus[i])
        rows.append(
            {
                "job": f"syn-{seed}-{i:06d}",
                "model": model,
                "batch": batch,
                "gpus_per_node": GPUS_PER_NODE,
                "current_arch": str(archs[i]),
                "current_gpu": gpu,
                "current_n_gpu": int(n_gpu[i]),
                "current_intra": INTRA_FOR_GPU.get(gpu, DEFAULT_INTRA),
                "current_network": NETWORK,
                "current_precision": PRECISION,
                "source": f"synthetic-seed-{seed}",
            }
        )
    return rows


def llm_jobs(n: int, seed: int, pretrain_share: float = LLM_PRETRAIN_SHARE) -> list[dict]:
    """``n`` LLM training jobs of 2026 (the tables of the module docstring), from
    ``default_rng([seed, 2026])``; rows of :data:`POPULATION_COLUMNS`, named ``llm-S-i``, source
    ``synthetic-llm-seed-S``."""
    rng = np.random.default_rng([seed, 2026])
    kinds = np.array(
        [
            k
            for k, c in _quotas(n, {"pretrain": pretrain_share, "finetune": 1 - pretrain_share}).items()
            for _ in range(c)
        ],
        dtype=object,
    )
    kinds = kinds[rng.permutation(n)] if n else kinds
    n_gpu = np.ones(n, dtype=np.int64)
    models = np.empty(n, dtype=object)
    for kind, mix in (("pretrain", LLM_PRETRAIN_MIX), ("finetune", LLM_FINETUNE_MIX)):
        mask = kinds == kind
        values, probs = LLM_N_GPU[kind]
        n_gpu[mask] = rng.choice(values, size=int(mask.sum()), p=probs)
        models[mask] = rng.choice(list(mix), size=int(mask.sum()), p=list(mix.values()))
    gpus = rng.choice(list(LLM_GPU_MIX), size=n, p=list(LLM_GPU_MIX.values()))
    rows = []
    for i in range(n):
        count, gpu = int(n_gpu[i]), str(gpus[i])
        arch = "1w1g" if count == 1 else "allreduce-local" if count <= GPUS_PER_NODE else "allreduce-cluster"
        rows.append(
            {
                "job": f"llm-{seed}-{i:06d}",
                "model": str(models[i]),
                "batch": "",
                "gpus_per_node": GPUS_PER_NODE,
                "current_arch": arch,
                "current_gpu": gpu,
                "current_n_gpu": count,
                "current_intra": LLM_INTRA[gpu],
                "current_network": LLM_NETWORK,
                "current_precision": LLM_PRECISION,
                "source": f"synthetic-llm-seed-{seed}",
            }
        )
    return rows


def expected_shares() -> dict:
    """Expected share of jobs and of GPUs per architecture implied by the module tables.

    Returns ``{"job_share": {arch: fraction}, "gpu_share": {arch: fraction}}`` (fractions of
    all jobs and of all GPUs, each summing to 1).
    """
    mean_gpus = {a: float(np.dot(v, p)) for a, (v, p) in ARCH_N_GPU.items()}
    gpu_mass = {a: ARCH_JOB_SHARE[a] * mean_gpus[a] for a in ARCH_JOB_SHARE}
    total = sum(gpu_mass.values())
    return {"job_share": dict(ARCH_JOB_SHARE), "gpu_share": {a: m / total for a, m in gpu_mass.items()}}


def population_summary(rows) -> dict:
    """Share of jobs and of GPUs per architecture in a population.

    ``rows`` are population rows (``current_n_gpu`` may be an int or a numeric string, as read
    back from CSV). Returns ``{"n_jobs": int, "n_gpus": int, "job_share": {arch: fraction},
    "gpu_share": {arch: fraction}}`` with every architecture of :data:`ARCHS` present
    (fractions of jobs and of GPUs, 0.0 for an empty population).
    """
    jobs = dict.fromkeys(ARCHS, 0)
    gpus = dict.fromkeys(ARCHS, 0)
    for row in rows:
        arch = row["current_arch"]
        jobs[arch] = jobs.get(arch, 0) + 1
        gpus[arch] = gpus.get(arch, 0) + int(row["current_n_gpu"])
    n_jobs, n_gpus = sum(jobs.values()), sum(gpus.values())
    return {
        "n_jobs": n_jobs,
        "n_gpus": n_gpus,
        "job_share": {a: (c / n_jobs if n_jobs else 0.0) for a, c in jobs.items()},
        "gpu_share": {a: (c / n_gpus if n_gpus else 0.0) for a, c in gpus.items()},
    }
