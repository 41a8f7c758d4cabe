"""Column layout of the small per-dimension tables that the kernels read, and the codes they use.

The engine builds these tables from the catalogues (all quantities in SI units: seconds, bytes,
bytes/s, FLOP/s, W, USD); the kernels loop over their Cartesian product themselves, so the grid
is never materialised as input arrays.
"""

# --- architectures (values of the ``arch`` codes array) -------------------------------------
ARCH_1W1G = 0             # one worker, one GPU
ARCH_1WNG = 1             # one worker, n GPUs of one server, parameters on the host CPU
ARCH_ALLREDUCE_LOCAL = 2  # ring all-reduce among the GPUs of one server
ARCH_PS_WORKER = 3        # workers and parameter servers on several servers
ARCH_ALLREDUCE_CLUSTER = 4  # hierarchical all-reduce across servers
ARCH_NAMES = ("1w1g", "1wng", "allreduce-local", "ps-worker", "allreduce-cluster")

# --- job table: one row per job, per-step quantities of ONE micro-batch on one GPU ----------
J_FLOP = 0          # FLOPs of compute-bound ops per micro-batch (3 x forward x batch)
J_MEMBOUND = 1      # bytes of memory-bound traffic per micro-batch at FP32
J_INPUT = 2         # input bytes copied host -> GPU per micro-batch
J_PARAMS = 3        # trainable parameters
J_ACTIVATION = 4    # activation bytes per micro-batch at FP32
J_OPT_STATE = 5     # optimizer state bytes per parameter
J_BATCH = 6         # samples per micro-batch per GPU
J_ACCUM = 7         # micro-batches per optimizer step (gradient accumulation), >= 1
J_GPUS_PER_NODE = 8  # k, GPUs per server
J_NICS_PER_NODE = 9  # m, NICs per server
J_PCIE_ROOTS = 10   # r, PCIe root links per server (1wng)
J_PS_COUNT = 11     # p, parameter servers; 0 = one per worker server
J_OVERLAP = 12      # fraction of communication that may hide behind the backward pass, [0, 1]
J_INPUT_RATE = 13   # samples/s one server's input pipeline can deliver; inf = unbounded
N_JOB_FIELDS = 14

# --- GPU table ------------------------------------------------------------------------------
G_MEM_BW = 0        # achievable memory bandwidth, bytes/s (eta_mem x HBM bandwidth)
G_PCIE_BW = 1       # achievable host PCIe bandwidth, bytes/s (eta_pcie x nominal)
G_MEMORY = 2        # device memory, bytes
G_PRICE = 3         # USD per GPU-hour
G_POWER = 4         # W drawn while training (TDP)
N_GPU_FIELDS = 5

# --- precision table ------------------------------------------------------------------------
P_ACT_RATIO = 0     # activation / memory-bound bytes relative to FP32
P_WEIGHT_BYTES = 1  # weight bytes kept per parameter (master copy included)
P_GRAD_BYTES = 2    # gradient bytes kept per parameter
P_COMM_BYTES = 3    # bytes per gradient element on the wire
N_PREC_FIELDS = 4

# --- link tables (intra-server links and networks) ------------------------------------------
L_BW = 0            # achievable bandwidth, bytes/s, one direction (per GPU / per NIC)
L_LATENCY = 1       # per-message latency, s
L_KIND = 2          # one of the LINK_* codes below
N_LINK_FIELDS = 3

LINK_PCIE = 0
LINK_NVLINK_HCM = 1
LINK_NVSWITCH = 2
LINK_NONE = 3       # the "none" network: single server only
LINK_NETWORK = 4    # any real network

# --- model options (global) -----------------------------------------------------------------
O_COLLECTIVE = 0    # COLLECTIVE_* code for the all-reduce algorithm
O_TOPOLOGY = 1      # 0: every intra link gives full bandwidth (version 1); 1: topology-aware
O_WORKSPACE = 2     # framework workspace per GPU, bytes (memory feasibility)
N_OPTIONS = 3

COLLECTIVE_DEFAULT = 0       # version 1: ring inside a server, hierarchical ring across servers
COLLECTIVE_RING = 1          # one flat ring over all n GPUs
COLLECTIVE_TREE = 2          # double binary tree: latency grows with log2 n
COLLECTIVE_HIERARCHICAL = 3  # same as the default across servers; ring inside one
COLLECTIVE_NAMES = ("default", "ring", "tree", "hierarchical")

# --- bottleneck flag ------------------------------------------------------------------------
BOTTLENECK_INPUT = 0
BOTTLENECK_FLOP = 1
BOTTLENECK_MEM = 2
BOTTLENECK_COMM = 3
BOTTLENECK_NAMES = ("input_io", "compute_flop", "memory_bound", "communication")
FLAG_FILL = 255     # flag value of an invalid configuration
