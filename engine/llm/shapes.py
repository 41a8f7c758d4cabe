"""Parameters, FLOPs and activation memory of a transformer, from its shape.

Notation: L layers, h hidden, a heads, g = kv_heads / heads, f FFN size, V vocabulary, s
sequence length, b micro-batch [sequences], t tensor-parallel degree.

* Parameters: attention ``2h^2 + 2h (g h)`` (Q and output h x h, K and V h x g h), FFN
  ``(3 if gated else 2) h f``, biases and norms where the model has them, embeddings ``V h``
  (twice when untied) and learned positions ``s h``.  A MoE layer holds ``experts +
  shared_experts`` FFNs of ``moe_ffn_hidden`` and a router ``h x experts``.
* FLOPs per token, forward: 2 per multiply-add of every weight matrix a token passes through
  (``2 x matmul parameters``; a MoE token passes its ``experts_per_token`` + shared experts), the
  attention scores and context ``4 s h`` per layer (the full s x s, Megatron's convention), and
  the logits ``2 h V``.  Model FLOPs = 3 x forward (backward = 2 x forward).  Hardware FLOPs add
  what recomputation runs again: a layer's forward (full) or the attention core ``4 s h``
  (selective).  For a GPT shape with full recomputation this is Megatron-LM's
  ``96 B s L h^2 (1 + s / 6h + V / 16 L h)`` per iteration exactly (Narayanan et al., SC 2021,
  eq. 3).
* Activation memory per layer: Korthikanti et al., 'Reducing Activation Recomputation in
  Large Transformer Models', MLSys 2023 (arXiv 2205.05198), Table 2, in bytes with 16-bit
  activations and 1-byte dropout masks: ``s b h (10 + 24/t + 5 a s / (h t))`` with tensor
  parallelism, ``34/t`` with sequence parallelism too, the ``5 a s / h`` term gone with
  selective recomputation and ``2 s b h`` (the layer input) with full recomputation.
  Generalised to grouped-query attention and gated FFNs term by term (``activation_terms``).
"""

from __future__ import annotations

from paigrid.kernels.llm_columns import RECOMPUTE_NAMES
from paigrid.llm.models import Transformer

#: the recomputation choices, in the order of the kernel's codes
RECOMPUTE = RECOMPUTE_NAMES


def _ffn_params(model: Transformer, ffn: int) -> int:
    """Weights (and biases) of one FFN of width ``ffn``."""
    weights = (3 if model.ffn_gated else 2) * model.hidden * ffn
    bias = ((2 if model.ffn_gated else 1) * ffn + model.hidden) if model.linear_bias else 0
    return weights + bias


def _attention_weights(model: Transformer) -> int:
    """Weight entries of one attention block's projections (no biases or norms) [count]:
    Q ``h x qk``, K and V ``h x kv`` each, output ``value x h``; with multi-head latent
    attention the query down/up projections (``h x q_lora``, ``q_lora x qk``; ``h x qk``
    without a query bottleneck), the joint key/value down projection with the rotary key
    ``h x (kv_lora + rope)`` and the up projection ``kv_lora x heads (head_dim + v_head_dim)``."""
    h = model.hidden
    if model.mla:
        query = h * model.q_lora_rank + model.q_lora_rank * model.qk_dim if model.q_lora_rank else h * model.qk_dim
        kv = h * (model.kv_lora_rank + model.rope_head_dim) + model.kv_lora_rank * model.heads * (
            model.head_dim + model.v_head_dim
        )
        return query + kv + model.value_dim * h
    kv = model.kv_heads * model.head_dim
    return h * model.qk_dim + 2 * h * kv + model.value_dim * h


def attention_params(model: Transformer) -> int:
    """Parameters of one attention block with its two norms [count] (multi-head latent
    attention adds the norms of its low-rank bottlenecks)."""
    h, kv = model.hidden, model.kv_heads * model.head_dim
    bias = (model.qk_dim + 2 * kv + h) if (model.linear_bias and not model.mla) else 0
    per_norm = 2 if model.norm == "layernorm" else 1
    norms = per_norm * (2 * h + (model.q_lora_rank + model.kv_lora_rank if model.mla else 0))
    return _attention_weights(model) + bias + norms


def layer_params(model: Transformer, moe_layer: bool) -> dict[str, int]:
    """Parameters of one layer [count]: ``shared`` (attention, norms, router, shared experts:
    split only by tensor parallelism) and ``expert`` (the routed experts: split by tensor and
    expert parallelism)."""
    if not moe_layer:
        return {"shared": attention_params(model) + _ffn_params(model, model.ffn_hidden), "expert": 0}
    router = model.hidden * model.experts
    shared = attention_params(model) + router + model.shared_experts * _ffn_params(model, model.moe_ffn_hidden)
    return {"shared": shared, "expert": model.experts * _ffn_params(model, model.moe_ffn_hidden)}


def embedding_params(model: Transformer) -> int:
    """Input embedding, untied output layer, learned positions and the final norm [count]."""
    h = model.hidden
    out = model.vocab * h * (1 if model.tied_embeddings else 2)
    out += model.seq_len * h if model.learned_positions else 0
    return out + (2 * h if model.norm == "layernorm" else h)


def parameters(model: Transformer) -> int:
    """Total parameters [count]."""
    dense = layer_params(model, False)
    moe = layer_params(model, True) if model.moe else {"shared": 0, "expert": 0}
    dense_layers = model.layers - model.moe_layers
    return dense_layers * dense["shared"] + model.moe_layers * (moe["shared"] + moe["expert"]) + embedding_params(model)


def active_parameters(model: Transformer) -> int:
    """Parameters one token passes through [count]: a MoE layer counts its
    ``experts_per_token`` routed experts, not all of them."""
    if not model.moe:
        return parameters(model)
    moe = layer_params(model, True)
    per_expert = moe["expert"] // model.experts
    return parameters(model) - model.moe_layers * (model.experts - model.experts_per_token) * per_expert


def _matmul_weights_per_token(model: Transformer, moe_layer: bool) -> int:
    """Multiply-adds per token of one layer's weight matrices (no biases or norms)."""
    h = model.hidden
    attention = _attention_weights(model)
    width = 3 if model.ffn_gated else 2
    if not moe_layer:
        return attention + width * h * model.ffn_hidden
    routed = model.experts_per_token + model.shared_experts
    return attention + h * model.experts + routed * width * h * model.moe_ffn_hidden


def padded_expert_flops(model: Transformer) -> float:
    """Forward FLOPs per token that a MoE layer's capacity padding adds: (capacity_factor - 1)
    x the routed experts' GEMMs [FLOP/token] (executed, not counted as model FLOPs)."""
    width = 3 if model.ffn_gated else 2
    return 2.0 * (model.capacity_factor - 1.0) * model.experts_per_token * width * model.hidden * model.moe_ffn_hidden


def layer_forward_flops(model: Transformer, moe_layer: bool) -> dict[str, float]:
    """Forward FLOPs per token of one layer: ``gemm`` (2 x weight multiply-adds) and
    ``attention`` (scores and context, 4 s h with the full s x s) [FLOP/token]."""
    return {"gemm": 2.0 * _matmul_weights_per_token(model, moe_layer), "attention": attention_core_flops(model)}


def attention_core_flops(model: Transformer) -> float:
    """Forward FLOPs per token of the attention core over the full s x s (Megatron's
    convention): scores ``2 s qk`` and context ``2 s value`` [FLOP/token] (4 s h for GPT)."""
    return 2.0 * model.seq_len * (model.qk_dim + model.value_dim)


def logits_forward_flops(model: Transformer) -> float:
    """Forward FLOPs per token of the output layer (2 h V) [FLOP/token]."""
    return 2.0 * model.hidden * model.vocab


def forward_flops_per_token(model: Transformer) -> float:
    """Forward FLOPs per token of the whole model [FLOP/token]."""
    dense = layer_forward_flops(model, False)
    moe = layer_forward_flops(model, True) if model.moe else dense
    dense_layers = model.layers - model.moe_layers
    return dense_layers * sum(dense.values()) + model.moe_layers * sum(moe.values()) + logits_forward_flops(model)


def model_flops_per_token(model: Transformer, causal: bool = False) -> float:
    """Model FLOPs per token, forward + backward without recomputation (3 x forward: about
    6 x active parameters + 12 L s h) [FLOP/token]; the numerator of MFU.  ``causal`` counts
    the attention core at half (the causal half of s x s, Megatron-Bridge's convention; the
    twin rows of llm_public_v2.csv agree with it to 4%, NeMo's and torchtitan's with the full
    count)."""
    out = 3.0 * forward_flops_per_token(model)
    return out - 1.5 * model.layers * attention_core_flops(model) if causal else out


def hardware_flops_per_token(model: Transformer, recompute: str) -> float:
    """FLOPs per token the GPUs execute with ``recompute`` (none, selective, full): model FLOPs
    plus the layers' forward again (full) or the attention core again (selective)
    [FLOP/token]."""
    out = model_flops_per_token(model)
    layers_forward = forward_flops_per_token(model) - logits_forward_flops(model)
    if recompute == "full":
        return out + layers_forward
    if recompute == "selective":
        return out + model.layers * attention_core_flops(model)
    return out


def megatron_flops_per_iteration(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. (SC 2021) eq. 3: FLOPs of one iteration of a GPT model with full
    activation recomputation, ``96 B s L h^2 (1 + s/6h + V/16 L h)`` [FLOP]."""
    return 96.0 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def activation_terms(model: Transformer, moe_layer: bool = False) -> dict[str, float]:
    """Activation bytes per token of one layer, by how tensor/sequence parallelism splits them
    (16-bit values, 1-byte dropout masks; Korthikanti et al. 2022, section 4.1, term by term):

    * ``replicated`` (split by t only with sequence parallelism): the two norm inputs 4h, the
      attention and FFN inputs 2h + 2h, the two dropout masks h + h: 10h;
    * ``split`` (split by t): Q and K 2h + 2 g h, V 2 g h, the output projection input 2h, the
      FFN activation input 2f (4f gated) and the second FFN input 2f: 24h for GPT;
    * ``core`` per token (split by t, removed by selective recomputation): the softmax output,
      its dropout mask and output, 5 a s.
    A MoE layer stores the FFN terms for each of the token's experts (routed, x the capacity
    factor, + shared)."""
    h, kv = model.hidden, model.kv_dim
    ffn = model.moe_ffn_hidden if moe_layer else model.ffn_hidden
    copies = (model.capacity_factor * model.experts_per_token + model.shared_experts) if moe_layer else 1
    ffn_bytes = copies * ((4 if model.ffn_gated else 2) * ffn + 2 * ffn)
    return {
        "replicated": 10.0 * h,
        "split": 2.0 * model.qk_dim + 2.0 * kv + 2.0 * kv + 2.0 * model.value_dim + ffn_bytes,
        "core": 5.0 * model.heads * model.seq_len,
    }


def ffn_activation_bytes(model: Transformer, moe_layer: bool = False) -> float:
    """Bytes per token of the FFN activation function's input (2f, 4f gated; for each of a MoE
    token's experts) [bytes/token]."""
    ffn = model.moe_ffn_hidden if moe_layer else model.ffn_hidden
    copies = (model.capacity_factor * model.experts_per_token + model.shared_experts) if moe_layer else 1
    return float(copies * (4 if model.ffn_gated else 2) * ffn)


#: bytes moved per routed token copy and hidden feature in a MoE layer's forward pass: the
#: token dispatcher of Megatron-Core (and torchtitan's) permutes the tokens by destination
#: rank, sorts the received chunks by local expert, and undoes both on the way back (four
#: gathers / scatters), each reading and writing 16-bit values: 4 x 2 x 2 bytes
MOE_PERMUTE_BYTES = 16.0


def moe_permute_bytes(model: Transformer, moe_layer: bool = False) -> float:
    """Bytes per token a MoE layer's token permutations read and write in the forward pass
    (``MOE_PERMUTE_BYTES`` x routed copies x hidden; 0 in a dense layer) [bytes/token]."""
    if not (moe_layer and model.moe):
        return 0.0
    return MOE_PERMUTE_BYTES * model.capacity_factor * model.experts_per_token * model.hidden


def activation_bytes_per_layer(
    model: Transformer,
    micro_batch: float,
    tensor: int,
    sequence_parallel: bool,
    recompute: str,
    context: int = 1,
    moe_layer: bool = False,
) -> float:
    """Activation memory of one layer for one micro-batch [bytes] on one GPU (Korthikanti et
    al. 2022, Table 2, generalised by ``activation_terms``; a context-parallel degree ``context``
    divides the tokens each GPU holds)."""
    tokens = micro_batch * model.seq_len / context
    if recompute == "full":
        return tokens * 2.0 * model.hidden / (tensor if sequence_parallel else 1)
    terms = activation_terms(model, moe_layer)
    replicated = terms["replicated"] / (tensor if sequence_parallel else 1)
    split = terms["split"] / tensor
    core = 0.0 if recompute == "selective" else terms["core"] / tensor  # s/cp queries x all s keys
    return tokens * (replicated + split + core)


def layer_gemms(
    model: Transformer, moe_layer: bool, tensor: int, tokens: float, expert: int = 1
) -> list[tuple[float, float, float, float]]:
    """The forward GEMMs of one layer on one GPU of a tensor group of ``tensor`` for ``tokens``
    tokens: ``(m, n, k, copies)`` of an m x k by k x n product done ``copies`` times (2 m n k
    copies FLOPs): ``plain_gemms`` then, in a MoE layer, ``routed_expert_gemms``.  Their FLOPs
    add up to ``layer_forward_flops``'s gemm term (with ``padded_expert_flops``) / t."""
    out = plain_gemms(model, moe_layer, tensor, tokens)
    return out + (routed_expert_gemms(model, tensor, tokens, expert) if moe_layer else [])


def routed_expert_tokens(model: Transformer, tokens: float, expert: int = 1) -> float:
    """Tokens one routed expert multiplies per micro-batch [tokens]: the ``tokens`` of each of
    the ``expert`` ranks of its expert group x top-k x capacity factor, spread over the E
    routed experts (balanced routing): tokens x top-k x capacity x ep / E."""
    return tokens * model.experts_per_token * model.capacity_factor * expert / float(model.experts)


def routed_expert_gemms(
    model: Transformer, tensor: int, tokens: float, expert: int = 1
) -> list[tuple[float, float, float, float]]:
    """The routed experts' forward GEMMs of one MoE layer on one GPU (``layer_gemms``' tuples):
    E / ep grouped GEMMs of ``routed_expert_tokens`` rows each, the up (gated: two) and the down
    projection, split by the tensor degree as the dense FFN's."""
    h, t, f, e = model.hidden, float(tensor), model.moe_ffn_hidden, float(model.experts)
    width_in = 2 if model.ffn_gated else 1
    routed = routed_expert_tokens(model, tokens, expert)
    return [(routed, width_in * f / t, h, e / expert), (routed, h, f / t, e / expert)]


def plain_gemms(
    model: Transformer, moe_layer: bool, tensor: int, tokens: float
) -> list[tuple[float, float, float, float]]:
    """The forward GEMMs of one layer on one GPU but the routed experts' (``layer_gemms``'
    tuples): column-parallel GEMMs split n by t, row-parallel ones k; in a MoE layer the router,
    one GEMM counted 1 / t a GPU, and the shared experts."""
    h, t = model.hidden, float(tensor)
    width_in = 2 if model.ffn_gated else 1
    out: list[tuple[float, float, float, float]]
    if model.mla:
        out = [
            (tokens, model.kv_lora_rank + model.rope_head_dim, h, 1.0 / t),
            (tokens, model.heads * (model.head_dim + model.v_head_dim) / t, model.kv_lora_rank, 1.0),
        ]
        if model.q_lora_rank:
            out += [(tokens, model.q_lora_rank, h, 1.0 / t), (tokens, model.qk_dim / t, model.q_lora_rank, 1.0)]
        else:
            out.append((tokens, model.qk_dim / t, h, 1.0))
    else:
        out = [(tokens, (model.qk_dim + 2 * model.kv_heads * model.head_dim) / t, h, 1.0)]
    out.append((tokens, h, model.value_dim / t, 1.0))
    if not moe_layer:
        f = model.ffn_hidden
        return out + [(tokens, width_in * f / t, h, 1.0), (tokens, h, f / t, 1.0)]
    f, e = model.moe_ffn_hidden, float(model.experts)
    out.append((tokens, e, h, 1.0 / t))
    if model.shared_experts:
        out += [
            (tokens, width_in * f / t, h, float(model.shared_experts)),
            (tokens, h, f / t, float(model.shared_experts)),
        ]
    return out


def quantized_elements(model: Transformer, moe_layer: bool, tensor: int, tokens: float, expert: int = 1) -> float:
    """Elements per token that a low-precision recipe casts for one layer's Linear GEMMs on one
    GPU of a tensor group of ``tensor`` over a step: each GEMM's input (k) in the forward pass
    and its output gradient (n) in the backward pass, summed over ``layer_gemms`` [elements/token]."""
    return (
        sum((k + n) * m * copies for m, n, k, copies in layer_gemms(model, moe_layer, tensor, tokens, expert)) / tokens
    )
