"""Column layout of the small per-dimension tables that the kernels read, and the codes they use.

The engine builds these tables from the catalogues (all quantities in SI units: seconds, bytes,
bytes/s, FLOP/s, W, USD); the kernels loop over their Cartesian product themselves, so the grid
is never materialised as input arrays.  Each table column is declared once (``columns.Table``):
its index, unit, width and meaning; the indices are unique and dense by construction.
"""

from .columns import Table

# --- architectures (values of the ``arch`` codes array) -------------------------------------
ARCH_1W1G = 0  # one worker, one GPU
ARCH_1WNG = 1  # one worker, n GPUs of one server, parameters on the host CPU
ARCH_ALLREDUCE_LOCAL = 2  # ring all-reduce among the GPUs of one server
ARCH_PS_WORKER = 3  # workers and parameter servers on several servers
ARCH_ALLREDUCE_CLUSTER = 4  # hierarchical all-reduce across servers
ARCH_NAMES = ("1w1g", "1wng", "allreduce-local", "ps-worker", "allreduce-cluster")

# --- operator classes (pai-v2): the last axis of the ``class_peak`` table (G, P, N_CLASSES) ----
CLASS_GEMM_CONV = 0  # dense GEMMs and convolutions
CLASS_SMALL_CONV = 1  # depthwise / small-reduction convolutions
CLASS_RECURRENT = 2  # recurrent cells (cuDNN RNN GEMMs + pointwise)
CLASS_ATTENTION_EAGER = 3  # attention score/context batched GEMMs, unfused (a job has this or the next)
CLASS_ATTENTION_FUSED = 4  # one fused (flash) attention kernel
# the memory-bound classes come last: ``model.class_terms`` times every class >= CLASS_ELEMENTWISE by bytes
CLASS_ELEMENTWISE = 5  # norms and element-wise ops (memory-bound: class_peak unused)
CLASS_EMBEDDING = 6  # embedding lookups (memory-bound: class_peak unused)
N_CLASSES = 7
CLASS_NAMES = (
    "gemm_conv",
    "small_conv",
    "recurrent",
    "attention_eager",
    "attention_fused",
    "elementwise_norm",
    "embedding",
)

# --- job table: one row per job, per-step quantities of ONE micro-batch on one GPU ----------
JOB = Table("job")
J_FLOP = JOB.column("flop", "FLOP", "FLOPs of compute-bound ops per micro-batch (3 x forward x batch)")
J_MEMBOUND = JOB.column("membound", "bytes", "bytes of memory-bound traffic per micro-batch at FP32")
J_INPUT = JOB.column("input", "bytes", "input bytes copied host -> GPU per micro-batch")
J_PARAMS = JOB.column("params", "count", "trainable parameters")
J_ACTIVATION = JOB.column("activation", "bytes", "activation bytes per micro-batch at FP32")
J_OPT_STATE = JOB.column("opt_state", "bytes/parameter", "optimizer state bytes per parameter")
J_BATCH = JOB.column("batch", "samples", "samples per micro-batch per GPU")
J_ACCUM = JOB.column("accum", "count", "micro-batches per optimizer step (gradient accumulation), >= 1")
J_GPUS_PER_NODE = JOB.column("gpus_per_node", "GPUs", "k, GPUs per server")
J_NICS_PER_NODE = JOB.column("nics_per_node", "NICs", "m, NICs per server")
J_PCIE_ROOTS = JOB.column("pcie_roots", "count", "r, PCIe root links per server (1wng)")
J_PS_COUNT = JOB.column("ps_count", "count", "p, parameter servers; 0 = one per worker server")
J_OVERLAP = JOB.column("overlap", "fraction", "fraction of communication that may hide behind the backward pass")
J_INPUT_RATE = JOB.column(
    "input_rate", "samples/s", "samples/s one server's input pipeline can deliver; inf = unbounded"
)
# the operator classes of compute model pai-v2 (read only by ``model.compute_terms`` under
# MODEL_PAI_V2).  Per micro-batch on one GPU, forward + backward:
J_CLASS_FLOP = JOB.column("class_flop", "FLOP", "FLOPs of each operator class (CLASS_* order)", width=N_CLASSES)
J_CLASS_BYTES = JOB.column("class_bytes", "bytes", "HBM bytes of each operator class at FP32", width=N_CLASSES)
J_LAUNCHES = JOB.column("launches", "count", "kernel launches per micro-batch (forward + backward)")
J_UPDATE_BYTES = JOB.column(
    "update_bytes", "bytes/parameter", "optimizer-update bytes per parameter that do not depend on the precision"
)
J_ACTIVATION_V2 = JOB.column(
    "activation_v2", "bytes", "activation bytes kept for backward per micro-batch at FP32 (eager or fused attention)"
)
J_GRAPHS = JOB.column("graphs", "flag", "1: CUDA graphs / compiled execution (short launch overhead), 0: eager")
J_AMP_FP32_BYTES = JOB.column(
    "amp_fp32_bytes",
    "bytes",
    "part of the element-wise/norm and embedding class bytes whose tensors stay FP32 under mixed precision",
)
J_NCHW_BYTES = JOB.column(
    "nchw_bytes",
    "bytes",
    "FP32 bytes per micro-batch of the NCHW <-> NHWC transposes around tensor-core convolutions "
    "(moved at a tensor-core precision only, P_TENSOR_CONV; 0 for a channels-last job)",
)
J_AMP_CASTS = JOB.column(
    "amp_casts",
    "count",
    "cast kernels per micro-batch (forward + backward) that mixed precision adds where an FP32 activation meets "
    "an op autocast runs in half precision, or the reverse (launched at half precision only)",
)
# sparse traffic (read only under O_PS_SPARSE): the embedding tables a workload declares
J_EMB_PARAMS = JOB.column("emb_params", "count", "parameters in embedding tables (part of J_PARAMS); 0 when none")
J_EMB_TOUCHED = JOB.column(
    "emb_touched", "count", "embedding parameters one micro-batch touches (rows x dim, at most batch x per sample)"
)
N_JOB_FIELDS = JOB.width

# --- GPU table ------------------------------------------------------------------------------
GPU = Table("gpu")
G_MEM_BW = GPU.column("mem_bw", "bytes/s", "achievable memory bandwidth (eta_mem x HBM bandwidth)")
G_PCIE_BW = GPU.column("pcie_bw", "bytes/s", "achievable host PCIe bandwidth (eta_pcie x nominal)")
G_MEMORY = GPU.column("memory", "bytes", "device memory")
G_PRICE = GPU.column("price", "USD/GPU-hour", "price per GPU-hour")
G_POWER = GPU.column("power", "W", "power drawn while training (TDP)")
G_CLASS_MEM_BW = GPU.column(
    "class_mem_bw", "bytes/s", "pai-v2: achievable HBM bandwidth (eta_mem of the GPU's generation x HBM)"
)
G_LAUNCH_EAGER = GPU.column("launch_eager", "s", "pai-v2: seconds per kernel launch in eager execution")
G_LAUNCH_GRAPHS = GPU.column(
    "launch_graphs", "s", "pai-v2: seconds per kernel launch with CUDA graphs / compiled execution"
)
N_GPU_FIELDS = GPU.width

# --- precision table ------------------------------------------------------------------------
PRECISION = Table("precision")
P_ACT_RATIO = PRECISION.column("act_ratio", "fraction", "activation / memory-bound bytes relative to FP32")
P_WEIGHT_BYTES = PRECISION.column(
    "weight_bytes", "bytes/parameter", "weight bytes kept per parameter (master copy included)"
)
P_GRAD_BYTES = PRECISION.column("grad_bytes", "bytes/parameter", "gradient bytes kept per parameter")
P_COMM_BYTES = PRECISION.column("comm_bytes", "bytes/parameter", "bytes per gradient element on the wire")
P_TENSOR_CONV = PRECISION.column(
    "tensor_conv",
    "flag",
    "pai-v2: 1 where the precision's convolutions run on tensor cores (NHWC kernels), else 0",
)
N_PREC_FIELDS = PRECISION.width

# --- link tables (intra-server links and networks) ------------------------------------------
LINK = Table("link")
L_BW = LINK.column("bw", "bytes/s", "achievable bandwidth, one direction (per GPU / per NIC)")
L_LATENCY = LINK.column("latency", "s", "per-message latency")
L_KIND = LINK.column("kind", "code", "one of the LINK_* codes below")
# the switch tiers of a fabric of llm_fabrics.csv in the network axis (option fabric_tiers);
# a plain link has none: L_TIER1 = L_TIER2 = inf, oversubscription 1, no hop latency, no reduction
L_TIER1 = LINK.column("tier1", "GPUs", "GPUs below one tier-1 switch group; a job of more crosses the tier-1 uplinks")
L_TIER2 = LINK.column(
    "tier2", "GPUs", "GPUs below one tier-2 switch group; a job of more crosses the tier-2 uplinks too"
)
L_OVERSUB1 = LINK.column("oversub1", "ratio", "oversubscription of the tier-1 uplinks (down:up, >= 1)")
L_OVERSUB2 = LINK.column("oversub2", "ratio", "oversubscription of the tier-2 uplinks (down:up, >= 1)")
L_HOP_LATENCY = LINK.column("hop_latency", "s", "seconds per extra switch hop (two per tier crossed)")
L_IN_NETWORK = LINK.column(
    "in_network", "flag", "1: the switches reduce (SHARP): the inter-server all-reduce sends S once per NIC"
)
N_LINK_FIELDS = LINK.width

LINK_PCIE = 0
LINK_NVLINK_HCM = 1
LINK_NVSWITCH = 2
LINK_NONE = 3  # the "none" network: single server only
LINK_NETWORK = 4  # any real network

# --- model options (global; ``paigrid.inputs.options`` declares the option that sets each) ------
OPTIONS = Table("options")
O_COLLECTIVE = OPTIONS.column("collective", "code", "COLLECTIVE_* code for the all-reduce algorithm")
O_TOPOLOGY = OPTIONS.column(
    "topology", "flag", "0: every intra link gives full bandwidth (version 1); 1: topology-aware"
)
O_WORKSPACE = OPTIONS.column("workspace", "bytes", "framework workspace per GPU (memory feasibility)")
O_MODEL = OPTIONS.column("model", "code", "MODEL_* code of the compute model (``model.compute_terms``)")
# communication v2 (each 0 in version 1): gradients travel in buckets of O_BUCKET_BYTES
# (ceil(S / bucket) all-reduces per step, at least 1)
O_SYNC_LATENCY = OPTIONS.column(
    "sync_latency", "flag", "1: the latency hops of the exchange are paid once per gradient bucket (0: once per step)"
)
O_BUCKET_BYTES = OPTIONS.column(
    "bucket_bytes", "bytes", "gradient bucket size (read only when O_SYNC_LATENCY or O_BUCKET_OVERLAP is 1)"
)
O_BUCKET_OVERLAP = OPTIONS.column(
    "bucket_overlap", "flag", "1: all but the last bucket may hide behind the backward pass (replaces J_OVERLAP)"
)
# parameter server done properly (``kernels.ps``; each 0 in version 1)
O_PS_LOCAL_REDUCE = OPTIONS.column(
    "ps_local_reduce", "flag", "1: each server all-reduces its GPUs' gradients before one push per server"
)
O_PS_NIC_PER_WORKER = OPTIONS.column(
    "ps_nic_per_worker",
    "flag",
    "1: every pushing worker and parameter server has a NIC share of its own (0: shared NIC)",
)
O_PS_COLOCATED = OPTIONS.column(
    "ps_colocated", "flag", "1: parameter servers on the worker servers, one NIC carries both (sum, not max)"
)
O_PS_LATENCY = OPTIONS.column("ps_latency", "flag", "1: per-message latency, 2 max(p, W) alpha_net per step")
O_PS_HOST_BW = OPTIONS.column(
    "ps_host_bw", "bytes/s", "parameter server host's achievable memory bandwidth; 0: no update time"
)
O_PS_SPARSE = OPTIONS.column(
    "ps_sparse", "flag", "1: a PS moves (and a PS GPU holds) only the embedding rows a step touches"
)
O_PS_MEMORY = OPTIONS.column(
    "ps_memory", "flag", "1: a PS GPU holds no optimizer state (memory check per architecture)"
)
O_INTER_VOLUME = OPTIONS.column(
    "inter_volume",
    "flag",
    "1: the inter-server phase of an all-reduce moves 2(n-1)/n S per NIC (NCCL's rings cross every server), "
    "0: 2(s-1)/s S (an ideal hierarchical all-reduce, version 1)",
)
# scaling losses of data-parallel all-reduce (communication v2; each 0 in version 1)
O_OVERLAP_IDLE = OPTIONS.column(
    "overlap_idle",
    "fraction",
    "fraction of the backward pass during which the exchange cannot proceed, 1 - option overlap_efficiency",
)
O_COORDINATION = OPTIONS.column("coordination", "s", "coordination seconds per all-reduce and participant step")
O_COORDINATION_GROWTH = OPTIONS.column(
    "coordination_growth", "code", "participant steps of n GPUs: 0 ceil(log2 n) (tree-like), 1 n - 1 (linear)"
)
O_SPARSE_ALLGATHER = OPTIONS.column(
    "sparse_allgather", "flag", "1: all-reduce architectures all-gather the touched embedding rows (dense: all-reduce)"
)
N_OPTIONS = OPTIONS.width

#: every kernel table of the data-parallel model, by name
TABLES = {t.name: t for t in (JOB, GPU, PRECISION, LINK, OPTIONS)}

# --- compute models (per-(job, gpu, precision) terms t_data, t_flop, t_mem, fits_memory) ------
MODEL_PAI_V1 = 0  # the PAI additive model: whole-step FLOPs and memory-bound bytes
MODEL_PAI_V2 = 1  # operator-class roofline + launches + optimizer update
MODEL_NAMES = ("pai-v1", "pai-v2")

COLLECTIVE_DEFAULT = 0  # version 1: ring inside a server, hierarchical ring across servers
COLLECTIVE_RING = 1  # one flat ring over all n GPUs
COLLECTIVE_TREE = 2  # double binary tree: latency grows with log2 n
COLLECTIVE_HIERARCHICAL = 3  # same as the default across servers; ring inside one
COLLECTIVE_PIPELINED = 4  # hierarchical with its intra- and inter-server phases pipelined (NCCL):
#                              the slower phase's volume time, not the sum; the default within one server
COLLECTIVE_NAMES = ("default", "ring", "tree", "hierarchical", "pipelined")

# --- bottleneck flag ------------------------------------------------------------------------
BOTTLENECK_INPUT = 0
BOTTLENECK_FLOP = 1
BOTTLENECK_MEM = 2
BOTTLENECK_COMM = 3
BOTTLENECK_NAMES = ("input_io", "compute_flop", "memory_bound", "communication")
FLAG_FILL = 255  # flag value of an invalid configuration

# --- invalid-reason codes (the ``invalid_reason`` output) ------------------------------------
# Why a configuration cannot exist.  The rules are checked in this order and the first one that
# applies is the code, so each configuration has exactly one; 0 means it can exist.
REASON_VALID = 0
REASON_SINGLE_GPU_ARCH = 1  # 1w1g with n != 1
REASON_LOCAL_ARCH_EXCEEDS_SERVER = 2  # 1wng or allreduce-local with n > k (GPUs per server)
REASON_CLUSTER_ARCH_NEEDS_NETWORK = 3  # ps-worker or allreduce-cluster on a LINK_NONE network
REASON_INTRA_LINK_NOT_ON_GPU = 4  # intra_fits[gpu, intra] == 0
REASON_PRECISION_NOT_ON_GPU = 5  # the GPU's achievable peak for the precision is NaN
REASON_MISSING_INPUT = 6  # any other NaN in an output: an input number is missing
#: names of the codes, by code (CF flag_meanings of ``invalid_reason``)
INVALID_REASONS = (
    "valid",
    "single_gpu_arch_needs_one_gpu",
    "local_arch_exceeds_server",
    "cluster_arch_needs_network",
    "intra_link_not_on_gpu",
    "precision_not_on_gpu",
    "missing_input_number",
)
