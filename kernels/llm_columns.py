"""Column layout of the tables the LLM kernel reads (``kernels.llm``) and the codes it writes.

All quantities are SI: seconds, bytes, bytes/s, FLOP/s, W, USD.  One row of the layout table is
one parallel layout (its degrees), one row of the hardware table one cluster design (GPU at a
precision, NVLink domain, links, NICs); the kernel evaluates their Cartesian product.  Each
table column is declared once (``columns.Table``, as in ``dp_columns``): its index, unit, width
and meaning; the indices are unique and dense by construction.
"""

from .columns import Table

# --- layout table: one row per parallel layout ----------------------------------------------
LAYOUT = Table("layout")
LA_TP = LAYOUT.column("tp", "GPUs", "tensor-parallel degree t")
LA_PP = LAYOUT.column("pp", "GPUs", "pipeline-parallel degree p")
LA_DP = LAYOUT.column("dp", "GPUs", "data-parallel degree d")
LA_CP = LAYOUT.column("cp", "GPUs", "context-parallel degree c (ring attention over the sequence)")
LA_EP = LAYOUT.column("ep", "GPUs", "expert-parallel degree e (taken from the d x c ranks)")
LA_VPP = LAYOUT.column("vpp", "count", "virtual stages per pipeline rank v (1: 1F1B, >1: interleaved 1F1B)")
LA_MB = LAYOUT.column("mb", "sequences", "micro-batch")
LA_ZERO = LAYOUT.column("zero", "code", "ZeRO stage 0-3 (3 = FSDP)")
LA_RECOMPUTE = LAYOUT.column("recompute", "code", "activation recomputation, the index in RECOMPUTE_NAMES")
LA_SP = LAYOUT.column("sp", "flag", "1: sequence parallelism inside the tensor group")
LA_TP_INDEX = LAYOUT.column("tp_index", "index", "index of t on the compute table's tensor axis")
N_LAYOUT_FIELDS = LAYOUT.width
#: the recomputation codes' names, by code (``LA_RECOMPUTE``)
RECOMPUTE_NAMES = ("none", "selective", "full")
#: a layout's degrees by name, in the order of its columns here, of the cube's coordinate
#: variables over ``layout`` and of ``paigrid.llm.parallelism.Layout``
LAYOUT_DEGREES = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "zero", "recompute", "sp")

# --- hardware table: one row per cluster design -------------------------------------------
HARDWARE = Table("hardware")
HW_CT = HARDWARE.column("ct", "index", "row of the compute table (a GPU at a precision)")
HW_DOMAIN = HARDWARE.column("domain", "GPUs", "GPUs in one NVLink domain (8: HGX server, 72: NVL72 rack)")
HW_INTRA_BW = HARDWARE.column("intra_bw", "bytes/s", "achievable bandwidth per GPU inside the domain, one direction")
HW_INTRA_LAT = HARDWARE.column("intra_lat", "s", "seconds per message inside the domain")
HW_NET_BW = HARDWARE.column("net_bw", "bytes/s", "achievable bandwidth per NIC, one direction (0: no network)")
HW_NET_LAT = HARDWARE.column("net_lat", "s", "seconds per message across the network")
HW_NICS_PER_GPU = HARDWARE.column("nics_per_gpu", "NICs/GPU", "NICs per GPU (8 NICs / 8 GPUs = 1)")
HW_MEMORY = HARDWARE.column("memory", "bytes", "device memory")
HW_PRICE = HARDWARE.column("price", "USD/GPU-hour", "price per GPU-hour")
HW_POWER = HARDWARE.column("power", "W", "power per GPU while training")
HW_PEAK = HARDWARE.column("peak", "FLOP/s", "dense peak at the precision (the MFU denominator)")
HW_HBM = HARDWARE.column("hbm", "bytes/s", "achievable HBM bandwidth (the optimizer update)")
# the scale-out fabric (``paigrid.llm.fabrics``): a group spanning G NVLink domains crosses
# tier 1 when G <= HW_TIER1, tier 2 when G <= HW_TIER2, else tier 3
HW_TIER1 = HARDWARE.column(
    "tier1", "domains", "NVLink domains whose rail-aligned traffic stays below one tier-1 switch group"
)
HW_TIER2 = HARDWARE.column("tier2", "domains", "NVLink domains below one tier-2 switch group (a pod)")
HW_TIERS = HARDWARE.column(
    "tiers", "count", "switch tiers of the fabric (1-3): the most domains it connects is HW_TIER1, HW_TIER2, unlimited"
)
HW_OVERSUB1 = HARDWARE.column("oversub1", "ratio", "oversubscription of the tier-1 uplinks (down:up, >= 1)")
HW_OVERSUB2 = HARDWARE.column("oversub2", "ratio", "oversubscription of the tier-2 uplinks (down:up, >= 1)")
HW_HOP_LAT = HARDWARE.column("hop_lat", "s", "seconds per extra switch hop (two per tier above the first)")
HW_SHARP = HARDWARE.column("sharp", "flag", "1: in-network all-reduce on the fabric (InfiniBand SHARP)")
HW_NVLS = HARDWARE.column("nvls", "flag", "1: in-switch all-reduce inside the NVLink domain (NVLink SHARP)")
N_HW_FIELDS = HARDWARE.width

# --- model vector ---------------------------------------------------------------------------
MODEL = Table("model")
M_LAYERS = MODEL.column("layers", "count", "transformer layers")
M_HIDDEN = MODEL.column("hidden", "features", "hidden size")
M_HEADS = MODEL.column("heads", "count", "attention heads")
M_KV_DIM = MODEL.column("kv_dim", "features", "key/value features (kv_heads x head_dim)")
M_FFN = MODEL.column("ffn", "features", "FFN size of the dense layers")
M_MOE_FFN = MODEL.column("moe_ffn", "features", "FFN size of one expert (0: dense model)")
M_SEQ = MODEL.column("seq", "tokens", "sequence length")
M_EXPERTS = MODEL.column("experts", "count", "routed experts (0: dense)")
M_TOPK = MODEL.column("topk", "count", "experts per token")
M_GLOBAL_BATCH = MODEL.column("global_batch", "sequences", "sequences per optimizer step")
M_SHARED_PARAMS = MODEL.column(
    "shared_params", "count", "mean per-layer parameters split only by t (attention, norms, router, shared experts)"
)
M_EXPERT_PARAMS = MODEL.column("expert_params", "count", "mean per-layer routed-expert parameters (split by t and e)")
M_EMBED_PARAMS = MODEL.column(
    "embed_params", "count", "embedding, output layer, positions (split by t, on the first/last stage)"
)
M_ACT_REPLICATED = MODEL.column(
    "act_replicated", "bytes/token", "mean activation bytes per token per layer split by t only with SP (10h)"
)
M_ACT_SPLIT = MODEL.column(
    "act_split", "bytes/token", "mean activation bytes per token per layer split by t (24h for GPT)"
)
M_ACT_CORE = MODEL.column(
    "act_core",
    "bytes/token",
    "mean activation bytes per token per layer of the attention core (5 a s), gone with selective recomputation",
)
M_MODEL_FLOPS = MODEL.column(
    "model_flops", "FLOP/token", "model FLOPs per token (forward + backward, no recomputation)"
)
M_HW_FLOPS = MODEL.column(
    "hw_flops", "FLOP/token", "FLOPs per token executed with recompute none / selective / full", width=3
)
M_MOE_FRACTION = MODEL.column("moe_fraction", "fraction", "fraction of layers that are MoE layers")
M_VOCAB = MODEL.column("vocab", "count", "vocabulary size")
M_KV_HEADS = MODEL.column(
    "kv_heads", "count", "key/value heads (the tensor degree must divide them or be a multiple of them)"
)
N_MODEL_FIELDS = MODEL.width

# --- options vector ---------------------------------------------------------------------------
OPTIONS = Table("options")
OP_WEIGHT_BYTES = OPTIONS.column("weight_bytes", "bytes/parameter", "working weights (bf16: 2)")
OP_GRAD_BYTES = OPTIONS.column("grad_bytes", "bytes/parameter", "gradient buffer (Megatron: fp32 main grads, 4)")
OP_OPT_BYTES = OPTIONS.column("opt_bytes", "bytes/parameter", "optimizer state (fp32 master + Adam m, v: 12)")
OP_GRAD_COMM_BYTES = OPTIONS.column(
    "grad_comm_bytes", "bytes/parameter", "the gradient reduction and parameter gather (2)"
)
OP_ACT_BYTES = OPTIONS.column("act_bytes", "bytes/value", "bytes per activation value sent between GPUs (2)")
OP_DP_OVERLAP = OPTIONS.column(
    "dp_overlap", "flag", "1: data-parallel communication overlaps compute (Megatron --overlap-grad-reduce)"
)
OP_WORKSPACE = OPTIONS.column(
    "workspace", "bytes", "bytes per GPU beyond states and activations (framework, allocator)"
)
OP_UPDATE_BYTES = OPTIONS.column("update_bytes", "bytes/parameter", "HBM bytes moved by the optimizer update")
OP_LOGIT_BYTES = OPTIONS.column("logit_bytes", "bytes/value", "bytes per logit kept for the loss (fp32: 4)")
OP_IN_NETWORK = OPTIONS.column(
    "in_network", "flag", "1: all-reduces use the design's SHARP / NVLS when it has them (0: rings only)"
)
OP_TP_HIDE = OPTIONS.column(
    "tp_hide", "fraction", "fraction of the tensor-parallel collectives hidden behind the GEMMs (async TP; 0: none)"
)
OP_OVERLAP_EFF = OPTIONS.column(
    "overlap_eff",
    "fraction",
    "fraction of the overlap window that hides data-parallel traffic (1: all of it; less: the overlapped "
    "collectives contend with compute and TP/CP/EP traffic for SMs and links)",
)
OP_MEMORY_MARGIN = OPTIONS.column(
    "memory_margin",
    "fraction",
    "a layout is refused only above (1 + margin) x the GPU's memory (what the estimate misses)",
)
OP_FRAGMENTATION = OPTIONS.column(
    "fragmentation", "fraction", "allocator fragmentation: fraction added to the activations"
)
OP_ACT_STORE = OPTIONS.column(
    "act_store", "ratio", "stored activations relative to 16-bit ones (FP8 GEMM inputs kept in FP8: 0.75)"
)
OP_GATHERED_INPUTS = OPTIONS.column(
    "gathered_inputs",
    "flag",
    "1: the column-parallel GEMMs keep their all-gathered (full-sequence) inputs for the backward "
    "(PyTorch DTensor tensor parallelism; 0: Megatron re-gathers them)",
)
OP_RS_BUFFER = OPTIONS.column(
    "rs_buffer",
    "flag",
    "1: below ZeRO-3 the gradients are still reduce-scattered layer by layer through one layer's "
    "buffer at the gradient bytes (FSDP2 under torchtitan's pipeline parallelism)",
)
N_OPTION_FIELDS = OPTIONS.width

# --- compute table (C, T, 3 recompute, 2 sp, N_CT_FIELDS) -------------------------------------
COMPUTE = Table("compute")
CT_LAYER = COMPUTE.column("layer", "s/token", "one (mean) layer, forward + backward + recomputation, one GPU of t")
CT_ATTENTION = COMPUTE.column("attention", "s/token", "the attention core alone (what ring attention hides behind)")
CT_LOGITS = COMPUTE.column("logits", "s/token", "the output layer and loss, forward + backward")
N_CT_FIELDS = COMPUTE.width

# --- outputs (one row per layout x hardware) -----------------------------------------------
RESULT = Table("result")
R_STEP = RESULT.column("step", "s", "seconds per optimizer step")
R_TOKENS = RESULT.column("tokens", "tokens/s", "tokens per second of the whole job")
R_MFU = RESULT.column("mfu", "fraction", "model FLOPs utilisation, fraction of the dense peak")
R_MODEL_TFLOPS = RESULT.column("model_tflops", "TFLOP/s", "model TFLOP/s per GPU")
R_HW_TFLOPS = RESULT.column("hw_tflops", "TFLOP/s", "hardware TFLOP/s per GPU (recomputation counted)")
R_MEMORY = RESULT.column("memory", "bytes", "bytes per GPU at the peak (the busiest pipeline stage)")
R_COMPUTE = RESULT.column("compute", "s", "per step: compute on the busiest stage (micro-batches x stage compute)")
R_BUBBLE = RESULT.column("bubble", "s", "per step: pipeline bubble")
R_TP = RESULT.column("tp", "s", "per step: tensor-parallel collectives (exposed: Megatron does not overlap them)")
R_CP = RESULT.column("cp", "s", "per step: context-parallel exchange left exposed after the attention compute")
R_EP = RESULT.column("ep", "s", "per step: expert all-to-all (exposed)")
R_PP = RESULT.column("pp", "s", "per step: pipeline point-to-point (exposed)")
R_DP = RESULT.column("dp", "s", "per step: data-parallel reduce-scatter / all-gather (total)")
R_DP_EXPOSED = RESULT.column("dp_exposed", "s", "per step: data-parallel traffic left after overlap")
R_OPTIMIZER = RESULT.column("optimizer", "s", "per step: the optimizer update")
R_COST = RESULT.column("cost", "USD", "per step of the whole job")
R_ENERGY = RESULT.column("energy", "J", "per step of the whole job")
R_MICROBATCHES = RESULT.column("microbatches", "count", "micro-batches per step per pipeline (gradient accumulation)")
R_REASON = RESULT.column("reason", "code", "0 valid, else the REASON_* code")
N_RESULT_FIELDS = RESULT.width

#: every kernel table of the LLM model, by name
TABLES = {t.name: t for t in (LAYOUT, HARDWARE, MODEL, OPTIONS, COMPUTE, RESULT)}

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
