"""Hand-built kernel tables for the kernel tests (no catalogues involved, so answers are worked by hand)."""

import numpy as np

from paigrid.kernels import dp_columns as L
from paigrid.kernels import model, reference
from paigrid.schema import DERIVED_VARIABLES, FACTOR_VARIABLES, derived_values, factor_for_cube

GB = 1e9


def job(
    flop=3e12,
    membound=2e9,
    input_bytes=1e7,
    params=25e6,
    activation=5e9,
    opt_state=4.0,
    batch=32,
    accum=1,
    gpus_per_node=8,
    nics=1,
    roots=2,
    ps_count=0,
    overlap=0.0,
    input_rate=np.inf,
    emb_params=0.0,
    emb_touched=0.0,
):
    """One job-table row (per micro-batch quantities, SI units)."""
    row = np.zeros(L.N_JOB_FIELDS)
    row[
        [
            L.J_FLOP,
            L.J_MEMBOUND,
            L.J_INPUT,
            L.J_PARAMS,
            L.J_ACTIVATION,
            L.J_OPT_STATE,
            L.J_BATCH,
            L.J_ACCUM,
            L.J_GPUS_PER_NODE,
            L.J_NICS_PER_NODE,
            L.J_PCIE_ROOTS,
            L.J_PS_COUNT,
            L.J_OVERLAP,
            L.J_INPUT_RATE,
        ]
    ] = [
        flop,
        membound,
        input_bytes,
        params,
        activation,
        opt_state,
        batch,
        accum,
        gpus_per_node,
        nics,
        roots,
        ps_count,
        overlap,
        input_rate,
    ]
    row[[L.J_EMB_PARAMS, L.J_EMB_TOUCHED]] = [emb_params, emb_touched]
    return row


def gpu(mem_bw=900 * GB, pcie_bw=10 * GB, memory=16 * GB, price=3.0, power=300.0):
    """One GPU-table row (achievable bandwidths)."""
    row = np.zeros(L.N_GPU_FIELDS)
    row[[L.G_MEM_BW, L.G_PCIE_BW, L.G_MEMORY, L.G_PRICE, L.G_POWER]] = [mem_bw, pcie_bw, memory, price, power]
    return row


FP32 = [1.0, 4.0, 4.0, 4.0, 0.0]  # activation ratio, weight, grad, comm bytes, tensor-core convolutions
AMP = [0.5, 6.0, 2.0, 2.0, 1.0]


def link(bw, latency, kind, tier1=np.inf, tier2=np.inf, oversub1=1.0, oversub2=1.0, hop=0.0, in_network=0):
    """One link-table row: a plain link (no switch tiers), or with ``tier1`` / ``tier2`` [GPUs],
    their oversubscriptions, ``hop`` [s per extra switch hop] and ``in_network`` reduction a
    fabric's row (option ``fabric_tiers``)."""
    return [bw, latency, kind, tier1, tier2, oversub1, oversub2, hop, in_network]


class Tables:
    """A complete set of kernel inputs; ``run`` evaluates them with the kernel or the reference."""

    def __init__(
        self,
        jobs,
        n_gpu,
        arch,
        gpus,
        peak,
        prec,
        intra,
        fits,
        network,
        collective=L.COLLECTIVE_DEFAULT,
        topology=0,
        workspace=1 * GB,
        compute_model=L.MODEL_PAI_V1,
        class_peak=None,
        sync_latency=0,
        bucket_bytes=25 * 2**20,
        bucket_overlap=0,
        ps_local_reduce=0,
        ps_nic_per_worker=0,
        ps_colocated=0,
        ps_latency=0,
        ps_host_bw=0.0,
        ps_sparse=0,
        ps_memory=0,
        inter_volume=0,
        overlap_idle=0.0,
        coordination=0.0,
        coordination_growth=0,
        sparse_allgather=0,
    ):
        self.jobs = np.atleast_2d(np.asarray(jobs, dtype=np.float64))
        self.n_gpu = np.atleast_2d(np.asarray(n_gpu, dtype=np.float64))
        if self.n_gpu.shape[0] == 1 and self.jobs.shape[0] > 1:
            self.n_gpu = np.tile(self.n_gpu, (self.jobs.shape[0], 1))
        self.arch = np.asarray(arch, dtype=np.int64)
        self.gpus = np.atleast_2d(np.asarray(gpus, dtype=np.float64))
        self.peak = np.atleast_2d(np.asarray(peak, dtype=np.float64))
        self.prec = np.atleast_2d(np.asarray(prec, dtype=np.float64))
        self.intra = np.atleast_2d(np.asarray(intra, dtype=np.float64))
        self.fits = np.atleast_2d(np.asarray(fits, dtype=np.uint8))
        self.network = np.atleast_2d(np.asarray(network, dtype=np.float64))
        self.options = np.array(
            [
                collective,
                topology,
                workspace,
                compute_model,
                sync_latency,
                bucket_bytes,
                bucket_overlap,
                ps_local_reduce,
                ps_nic_per_worker,
                ps_colocated,
                ps_latency,
                ps_host_bw,
                ps_sparse,
                ps_memory,
                inter_volume,
                overlap_idle,
                coordination,
                coordination_growth,
                sparse_allgather,
            ],
            dtype=np.float64,
        )
        assert self.options.shape == (L.N_OPTIONS,)
        shape = (*self.peak.shape, L.N_CLASSES)
        self.class_peak = (
            np.full(shape, np.nan)
            if class_peak is None
            else np.broadcast_to(np.asarray(class_peak, dtype=np.float64), shape).copy()
        )

    @property
    def shape(self):
        return (
            self.jobs.shape[0],
            len(self.arch),
            self.gpus.shape[0],
            self.n_gpu.shape[1],
            self.intra.shape[0],
            self.network.shape[0],
            self.prec.shape[0],
        )

    def run(self, implementation="kernel", write_cube=True):
        """Outputs as a dict of arrays (the 11 outputs of ``evaluate_block``, and with ``write_cube``
        throughput, cost and energy derived from step_time and ``step_factors``); ``implementation``
        is "kernel" (parallel), "serial" (its serial compilation) or "reference" (numpy)."""
        j, a, g, n, i, w, p = self.shape
        full = (j, a, g, n, i, w, p) if write_cube else (1,) * 7
        out = {
            name: np.full(full, -7 if np.dtype(dtype).kind != "u" else 77, dtype)
            for name, dtype in (
                ("step_time", np.float32),
                ("t_comm", np.float32),
                ("bottleneck", np.uint8),
                ("invalid_reason", np.uint8),
            )
        }
        out.update(
            {
                name: np.full((j, g, p), -7 if np.dtype(dtype).kind != "u" else 77, dtype)
                for name, dtype in (
                    ("t_data", np.float64),
                    ("t_flop", np.float64),
                    ("t_mem", np.float64),
                    ("fits_memory", np.uint8),
                )
            }
        )
        out.update(
            {
                "best_step": np.full((j, g, n, p), -7.0),
                "best_index": np.full((j, g, n, p), -7, np.int32),
                "best_bottleneck": np.full((j, g, n, p), 7, np.uint8),
            }
        )
        fn = {
            "kernel": model.evaluate_block,
            "serial": model.evaluate_block_serial,
            "reference": reference.evaluate_block,
        }[implementation]
        # the compute model fills the per-(job, gpu, precision) terms the block kernel reads:
        # the kernels' compute_terms, or the reference's (independent) one for the reference
        compute = reference.compute_terms if implementation == "reference" else model.compute_terms
        compute(
            self.jobs,
            self.gpus,
            self.peak,
            self.class_peak,
            self.prec,
            self.options,
            out["t_data"],
            out["t_flop"],
            out["t_mem"],
            out["fits_memory"],
        )
        fn(
            self.jobs,
            self.n_gpu,
            self.arch,
            self.gpus,
            self.peak,
            self.prec,
            self.intra,
            self.fits,
            self.network,
            self.options,
            write_cube,
            *out.values(),
        )
        if write_cube:  # throughput, cost and energy as readers derive them, from this implementation's factors
            factors = (reference if implementation == "reference" else model).step_factors(
                self.jobs, self.n_gpu, self.gpus
            )
            factors = dict(zip(FACTOR_VARIABLES, factors))
            out.update(
                {
                    name: derived_values(name, out["step_time"], factor_for_cube(factor, factors[factor]))
                    for name, (factor, *_) in DERIVED_VARIABLES.items()
                }
            )
        return out


def one(arch, n, intra_row=None, net_row=None, fits=1, job_row=None, gpu_row=None, peak=10e12, prec=FP32, **opts):
    """Tables of exactly one configuration."""
    job_row = job() if job_row is None else job_row
    gpu_row = gpu() if gpu_row is None else gpu_row
    return Tables(
        [job_row],
        [[n]],
        [arch],
        [gpu_row],
        [[peak]],
        [prec],
        [intra_row or link(100 * GB, 5e-6, L.LINK_NVSWITCH)],
        [[fits]],
        [net_row or link(3 * GB, 20e-6, L.LINK_NETWORK)],
        **opts,
    )
