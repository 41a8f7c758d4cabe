"""Column layout of the tables the LLM kernel reads (``kernels.llm``) and the codes it writes.

All quantities are SI: seconds, bytes, bytes/s, FLOP/s, W, USD.  One row of the layout table is
one parallel layout (its degrees), one row of the hardware table one cluster design (GPU at a
precision, NVLink domain, links, NICs); the kernel evaluates their Cartesian product.
"""

# --- layout table: one row per parallel layout ----------------------------------------------
LA_TP = 0  # tensor-parallel degree t
LA_PP = 1  # pipeline-parallel degree p
LA_DP = 2  # data-parallel degree d
LA_CP = 3  # context-parallel degree c (ring attention over the sequence)
LA_EP = 4  # expert-parallel degree e (taken from the d x c ranks)
LA_VPP = 5  # virtual stages per pipeline rank v (1: 1F1B, >1: interleaved 1F1B)
LA_MB = 6  # micro-batch [sequences]
LA_ZERO = 7  # ZeRO stage 0-3 (3 = FSDP)
LA_RECOMPUTE = 8  # 0 none, 1 selective, 2 full
LA_SP = 9  # 1: sequence parallelism inside the tensor group
LA_TP_INDEX = 10  # index of t on the compute table's tensor axis
N_LAYOUT_FIELDS = 11
RECOMPUTE_NAMES = ("none", "selective", "full")

# --- hardware table: one row per cluster design -------------------------------------------
HW_CT = 0  # row of the compute table (a GPU at a precision)
HW_DOMAIN = 1  # GPUs in one NVLink domain (8: HGX server, 72: NVL72 rack)
HW_INTRA_BW = 2  # achievable bytes/s per GPU inside the domain, one direction
HW_INTRA_LAT = 3  # s per message inside the domain
HW_NET_BW = 4  # achievable bytes/s per NIC, one direction (0: no network)
HW_NET_LAT = 5  # s per message across the network
HW_NICS_PER_GPU = 6  # NICs per GPU (8 NICs / 8 GPUs = 1)
HW_MEMORY = 7  # device memory, bytes
HW_PRICE = 8  # USD per GPU-hour
HW_POWER = 9  # W per GPU while training
HW_PEAK = 10  # dense peak FLOP/s at the precision (the MFU denominator)
HW_HBM = 11  # achievable HBM bytes/s (the optimizer update)
# the scale-out fabric (``paigrid.llm.fabrics``): a group spanning G NVLink domains crosses
# tier 1 when G <= HW_TIER1, tier 2 when G <= HW_TIER2, else tier 3
HW_TIER1 = 12  # NVLink domains whose rail-aligned traffic stays below one tier-1 switch group
HW_TIER2 = 13  # NVLink domains below one tier-2 switch group (a pod)
HW_TIERS = 14  # switch tiers of the fabric (1-3): the most domains it connects is HW_TIER1, HW_TIER2, unlimited
HW_OVERSUB1 = 15  # oversubscription of the tier-1 uplinks (down:up bandwidth ratio, >= 1)
HW_OVERSUB2 = 16  # oversubscription of the tier-2 uplinks (>= 1)
HW_HOP_LAT = 17  # s per extra switch hop (two per tier above the first)
HW_SHARP = 18  # 1: in-network all-reduce on the fabric (InfiniBand SHARP)
HW_NVLS = 19  # 1: in-switch all-reduce inside the NVLink domain (NVLink SHARP)
N_HW_FIELDS = 20

# --- model vector ---------------------------------------------------------------------------
M_LAYERS = 0
M_HIDDEN = 1
M_HEADS = 2
M_KV_DIM = 3  # key/value features (kv_heads x head_dim)
M_FFN = 4  # FFN size of the dense layers
M_MOE_FFN = 5  # FFN size of one expert (0: dense model)
M_SEQ = 6  # sequence length [tokens]
M_EXPERTS = 7  # routed experts (0: dense)
M_TOPK = 8  # experts per token
M_GLOBAL_BATCH = 9  # sequences per optimizer step
M_SHARED_PARAMS = 10  # mean per-layer parameters split only by t (attention, norms, router, shared experts)
M_EXPERT_PARAMS = 11  # mean per-layer routed-expert parameters (split by t and e)
M_EMBED_PARAMS = 12  # embedding, output layer, positions (split by t, on the first/last stage)
M_ACT_REPLICATED = 13  # mean activation bytes per token per layer split by t only with SP (10h)
M_ACT_SPLIT = 14  # ... split by t (24h for GPT)
M_ACT_CORE = 15  # ... of the attention core (5 a s), gone with selective recomputation
M_MODEL_FLOPS = 16  # model FLOPs per token (forward + backward, no recomputation)
M_HW_FLOPS = 17  # first of 3: FLOPs per token executed with recompute none / selective / full
M_MOE_FRACTION = 20  # fraction of layers that are MoE layers
M_VOCAB = 21
M_KV_HEADS = 22  # key/value heads (the tensor degree must divide them or be a multiple of them)
N_MODEL_FIELDS = 23

# --- options vector ---------------------------------------------------------------------------
OP_WEIGHT_BYTES = 0  # bytes per parameter of the working weights (bf16: 2)
OP_GRAD_BYTES = 1  # bytes per parameter of the gradient buffer (Megatron: fp32 main grads, 4)
OP_OPT_BYTES = 2  # bytes per parameter of the optimizer state (fp32 master + Adam m, v: 12)
OP_GRAD_COMM_BYTES = 3  # bytes per parameter of the gradient reduction and parameter gather (2)
OP_ACT_BYTES = 4  # bytes per activation value sent between GPUs (2)
OP_DP_OVERLAP = 5  # 1: data-parallel communication overlaps compute (Megatron --overlap-grad-reduce)
OP_WORKSPACE = 6  # bytes per GPU beyond states and activations (framework, allocator)
OP_UPDATE_BYTES = 7  # HBM bytes moved per parameter by the optimizer update
OP_LOGIT_BYTES = 8  # bytes per logit kept for the loss (fp32: 4)
OP_IN_NETWORK = 9  # 1: all-reduces use the design's SHARP / NVLS when it has them (0: rings only)
OP_TP_HIDE = 10  # fraction of the tensor-parallel collectives hidden behind the GEMMs (async TP; 0: none)
OP_OVERLAP_EFF = 11  # fraction of the overlap window that hides data-parallel traffic (1: all of it; less:
# the overlapped collectives contend with compute and TP/CP/EP traffic for SMs and links)
OP_MEMORY_MARGIN = 12  # a layout is refused only above (1 + margin) x the GPU's memory (what the estimate misses)
OP_FRAGMENTATION = 13  # allocator fragmentation: fraction added to the activations
OP_ACT_STORE = 14  # stored activations relative to 16-bit ones (FP8 GEMM inputs kept in FP8: 0.75)
N_OPTION_FIELDS = 15

# --- compute table (C, T, 3 recompute, 2 sp, N_CT_FIELDS) -------------------------------------
CT_LAYER = 0  # s per token of one (mean) layer, forward + backward + recomputation, one GPU of t
CT_ATTENTION = 1  # s per token of the attention core alone (what ring attention hides behind)
CT_LOGITS = 2  # s per token of the output layer and loss, forward + backward
N_CT_FIELDS = 3

# --- outputs (one row per layout x hardware) -----------------------------------------------
R_STEP = 0  # s per optimizer step
R_TOKENS = 1  # tokens/s of the whole job
R_MFU = 2  # model FLOPs utilisation, fraction of the dense peak
R_MODEL_TFLOPS = 3  # model TFLOP/s per GPU
R_HW_TFLOPS = 4  # hardware TFLOP/s per GPU (recomputation counted)
R_MEMORY = 5  # bytes per GPU at the peak (the busiest pipeline stage)
R_COMPUTE = 6  # s per step of compute on the busiest stage (micro-batches x stage compute)
R_BUBBLE = 7  # s per step of pipeline bubble
R_TP = 8  # s per step of tensor-parallel collectives (exposed: Megatron does not overlap them)
R_CP = 9  # s per step of context-parallel exchange left exposed after the attention compute
R_EP = 10  # s per step of expert all-to-all (exposed)
R_PP = 11  # s per step of pipeline point-to-point (exposed)
R_DP = 12  # s per step of data-parallel reduce-scatter / all-gather (total)
R_DP_EXPOSED = 13  # s per step of it left after overlap
R_OPTIMIZER = 14  # s per step of the optimizer update
R_COST = 15  # USD per step of the whole job
R_ENERGY = 16  # J per step of the whole job
R_MICROBATCHES = 17  # micro-batches per step per pipeline (gradient accumulation)
R_REASON = 18  # 0 valid, else the REASON_* code
N_RESULT_FIELDS = 19

# --- invalid-layout reasons ------------------------------------------------------------------
REASON_VALID = 0
REASON_PRECISION = 1  # the GPU has no peak at the precision
REASON_TP_HEADS = 2  # t does not divide the attention heads (or the key/value heads below them)
REASON_TP_FFN = 3  # t does not divide the FFN size
REASON_TP_DOMAIN = 4  # t exceeds the NVLink domain
REASON_CP_SEQ = 5  # c does not divide the sequence
REASON_EP_EXPERTS = 6  # e does not divide the experts (or e > 1 on a dense model)
REASON_EP_GROUP = 7  # e does not divide d x c
REASON_BATCH = 8  # the global batch is not a multiple of d x micro-batch
REASON_PP_LAYERS = 9  # p x v exceeds the layers
REASON_INTERLEAVE = 10  # v > 1 needs p > 1
REASON_NO_NETWORK = 11  # the job spans several NVLink domains but the network is none
REASON_FABRIC = 12  # the job spans more NVLink domains than the fabric's tiers connect
REASON_MEMORY = 13  # the busiest stage does not fit in the GPU's memory
N_REASONS = 14

# --- stem table of the search (``kernels.llm_search``): one row per (tp, pp, dp, cp, ep, mb) ---
ST_TP = 0
ST_PP = 1
ST_DP = 2
ST_CP = 3
ST_EP = 4
ST_MB = 5
ST_SHAPE = 6  # the stem's row on the compute table's second axis (its GEMM shape)
N_STEM_FIELDS = 7

# --- choices vector: what each stem is crossed with ---------------------------------------------
# [CH_EVERY_VPP, n_vpp, vpp values..., n_zero, zero stages..., n_rc, recompute codes..., n_sp, sp flags...]
CH_EVERY_VPP = 0  # 1: every interleave factor that fits (the space's empty vpp)

# --- counts per (stem, hardware row) ------------------------------------------------------------
C_LAYOUTS = 0  # layouts enumerated
C_MEMORY = 1  # pruned: the busiest stage does not fit in memory
C_BOUND = 2  # pruned: the lower bound is not below the best step so far
C_EVALUATED = 3  # evaluated by the step-time model
C_VALID = 4  # of those, valid
N_COUNTS = 5
