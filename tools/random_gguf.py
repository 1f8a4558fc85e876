"""Small GGUF files with random weights for any architecture specdec runs,
written with the `gguf` package (the writer llama.cpp's own converter uses):
the test files of tests/python/test_arch_random.py and the realistic-size
files of tools/bench_arch.py.

Float weights are drawn from a normal distribution and written as F32, F16,
BF16, Q8_0 or Q5_0 (gguf quantizes these). The gguf package cannot quantize
K-quants, so Q4_K, Q5_K and Q6_K tensors are written as random blocks (random
quants, scales and minima chosen for a zero-mean weight of the intended
spread): engines that read the same bits can be compared, which is all a
parity test or a speed test needs. The mixes follow llama.cpp's quantize
rules for the file types people download (Q4_K_M: attn_v and ffn_down of
some layers and the LM head in Q6_K).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class ArchSpec:
    arch: str                  # general.architecture
    vocab: str = "bpe"         # "bpe": GPT-2 byte-level tokens; "spm": SentencePiece with byte fallback
    pre: str = "qwen2"         # tokenizer.ggml.pre (bpe only)
    add_bos: bool = True
    n_embd: int = 256          # K-quants need rows that are a multiple of 256
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_ff: int = 512
    n_layer: int = 2
    rope_base: float = 1e6
    qk_norm: str = ""          # "head": per head (qwen3); "full": over all heads (olmo2)
    pre_norms: bool = True     # attn_norm / ffn_norm before each block
    post_norms: bool = False   # post_attention_norm / post_ffw_norm after each block
    tied: bool = False         # no output.weight: the LM head is token_embd
    name: str = ""             # general.name's model part (default: arch); llama.cpp reads it
    n_rot: int = 0             # rotated dims per head (0: head_dim)
    ctx_len: int = 512         # context_length
    fused: bool = False        # phi3: attn_qkv and a double-width ffn_up
    long_rope: int = 0         # phi3 LongRoPE: rope.scaling.original_context_length (0: no factors)
    attn_softcap: float = 0.0  # gemma2 soft-capping (0: key not written)
    final_softcap: float = 0.0
    sliding_window: int = 0    # written when > 0
    swa_pattern: int | tuple[bool, ...] = 0  # attention.sliding_window_pattern, written when set
    n_expert: int = 0          # MoE: experts per layer, used per token, expert FFN width
    n_expert_used: int = 0
    n_ff_exp: int = 0
    extra_vocab: int = 0       # plain tokens appended to the byte vocabulary (a realistic LM-head size)
    # qwen35: gated DeltaNet layers (all but every full_attn_interval-th) with
    # q/k heads of ssm_state, ssm_v_heads value heads, a causal convolution of
    # width ssm_conv; gated full-attention layers (query and gate per head).
    ssm_state: int = 0         # 0: no recurrent layers
    ssm_k_heads: int = 0
    ssm_v_heads: int = 0
    ssm_conv: int = 4
    full_attn_interval: int = 4
    rope_sections: tuple[int, ...] = ()  # rope.dimension_sections, written when set

    @property
    def q_dim(self) -> int:
        return self.n_head * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_head_kv * self.head_dim

    @property
    def ssm_conv_dim(self) -> int:
        return (2 * self.ssm_k_heads + self.ssm_v_heads) * self.ssm_state

    def is_recurrent(self, layer: int) -> bool:
        return self.ssm_state > 0 and (layer + 1) % self.full_attn_interval != 0

    @property
    def rot(self) -> int:
        return self.n_rot or self.head_dim



def byte_tokens() -> list[str]:
    """The 256 byte-level tokens of GPT-2-style BPE (bytes shown as printable code points)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def byte_token_ids(spec: ArchSpec) -> range:
    """Ids of the 256 byte tokens (positions are random over these)."""
    return range(3, 259) if spec.vocab == "spm" else range(0, 256)


def _use_more_bits(i_layer: int, n_layer: int) -> bool:
    # llama.cpp's rule (llama-quant.cpp) for the layers whose attn_v and
    # ffn_down a *_K_M file keeps in Q6_K.
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


def tensor_type(mix: str, name: str, layer: int, spec: ArchSpec):
    """The type llama.cpp's quantize gives tensor `name` in a file of type `mix`."""
    from gguf import GGMLQuantizationType as T

    # IQ3_S: a type specdec has no kernel for (tests of `models inspect`).
    plain = {"F32": T.F32, "F16": T.F16, "BF16": T.BF16, "Q8_0": T.Q8_0, "Q6_K": T.Q6_K, "IQ3_S": T.IQ3_S}
    if name.endswith("ffn_gate_inp.weight"):
        return T.F32  # llama.cpp's quantizer never quantizes the router
    if mix in plain:
        return plain[mix]
    if mix == "MXFP4_MOE":  # llama.cpp's rule: 3-D expert tensors MXFP4, every other matrix Q8_0
        return T.MXFP4 if "_exps." in name else T.Q8_0
    lm_head = name == "output.weight" or (spec.tied and name == "token_embd.weight")
    if lm_head:
        return T.Q6_K
    if mix == "Q5_0":
        return T.Q5_0
    base = {"Q4_K_M": T.Q4_K, "Q5_K_M": T.Q5_K}[mix]
    if name.endswith("attn_qkv.weight"):
        return {"Q4_K_M": T.Q5_K, "Q5_K_M": T.Q6_K}[mix]
    more_bits = ("attn_v.weight", "ffn_down.weight", "ffn_down_exps.weight")
    if name.endswith(more_bits) and _use_more_bits(layer, spec.n_layer):
        return T.Q6_K
    return base


def _f16_bytes(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def _pack_scales_k4(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The 12 bytes of Q4_K/Q5_K scales: eight 6-bit scales and eight 6-bit minima
    (the inverse of ggml's get_scale_min_k4)."""
    q = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    for j in range(4):
        q[:, j] = (sc[:, j] & 63) | ((sc[:, j + 4] >> 4) << 6)
        q[:, j + 4] = (m[:, j] & 63) | ((m[:, j + 4] >> 4) << 6)
        q[:, j + 8] = (sc[:, j + 4] & 15) | ((m[:, j + 4] & 15) << 4)
    return q


def random_k_blocks(rng: np.random.Generator, qtype, n_out: int, n_in: int, std: float) -> np.ndarray:
    """Random Q4_K / Q5_K / Q6_K rows (uint8, one row of blocks per output) whose
    weights have mean 0 and standard deviation about `std`."""
    from gguf import GGMLQuantizationType as T

    nb = n_out * n_in // 256
    byte = lambda k: rng.integers(0, 256, size=(nb, k), dtype=np.uint8)  # noqa: E731
    if qtype == T.Q6_K:
        # w = d * scale * (q - 32), q uniform in [0, 64): spread 18.5 * d * |scale|.
        sc = (rng.integers(8, 32, size=(nb, 16)) * rng.choice([-1, 1], size=(nb, 16))).astype(np.int8)
        d = np.full(nb, std / (18.47 * np.sqrt(np.mean(sc.astype(np.float64) ** 2))))
        blocks = np.concatenate([byte(128), byte(64), sc.view(np.uint8), _f16_bytes(d)], axis=1)
    else:
        # w = d * sc * q - dmin * m with m = sc and dmin = d * mean(q): zero mean.
        levels = 16 if qtype == T.Q4_K else 32
        sc = rng.integers(32, 64, size=(nb, 8), dtype=np.uint8)
        q_std = np.sqrt((levels ** 2 - 1) / 12)
        d = np.full(nb, std / (q_std * np.sqrt(np.mean(sc.astype(np.float64) ** 2))))
        dmin = d * (levels - 1) / 2
        parts = [_f16_bytes(d), _f16_bytes(dmin), _pack_scales_k4(sc, sc)]
        if qtype == T.Q5_K:
            parts.append(byte(32))  # qh: the fifth bit of each quant
        parts.append(byte(128))
        blocks = np.concatenate(parts, axis=1)
    return blocks.reshape(n_out, -1)


def write_model(path: Path, spec: ArchSpec, mix: str = "F32", rope_freqs: np.ndarray | None = None,
                seed: int = 0, drop_keys: tuple[str, ...] = ()) -> None:
    import gguf
    from gguf import GGMLQuantizationType as T

    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), spec.arch)
    w.add_name(f"random-{spec.name or spec.arch}-{mix}")
    w.add_context_length(spec.ctx_len)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.n_ff)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_head_kv)
    w.add_key_length(spec.head_dim)
    w.add_value_length(spec.head_dim)
    w.add_rope_dimension_count(spec.rot)
    w.add_rope_freq_base(spec.rope_base)
    w.add_layer_norm_rms_eps(1e-6)
    if spec.long_rope:
        w.add_rope_scaling_orig_ctx_len(spec.long_rope)
        # What the converter writes: sqrt(1 + ln(scale) / ln(orig)), scale = context / orig.
        scale = 131072 / spec.long_rope
        w.add_rope_scaling_attn_factors(float(np.sqrt(1 + np.log(scale) / np.log(spec.long_rope))))
    if spec.sliding_window:
        w.add_sliding_window(spec.sliding_window)
    if spec.swa_pattern:
        w.add_sliding_window_pattern(spec.swa_pattern)
    if spec.attn_softcap:
        w.add_attn_logit_softcapping(spec.attn_softcap)
        w.add_final_logit_softcapping(spec.final_softcap)
    if spec.ssm_state:
        w.add_ssm_conv_kernel(spec.ssm_conv)
        w.add_ssm_inner_size(spec.ssm_v_heads * spec.ssm_state)
        w.add_ssm_state_size(spec.ssm_state)
        w.add_ssm_time_step_rank(spec.ssm_v_heads)
        w.add_ssm_group_count(spec.ssm_k_heads)
        w.add_full_attention_interval(spec.full_attn_interval)
    if spec.rope_sections:
        w.add_rope_dimension_sections(list(spec.rope_sections))
    if spec.n_expert:
        w.add_expert_count(spec.n_expert)
        w.add_expert_used_count(spec.n_expert_used)
        w.add_expert_feed_forward_length(spec.n_ff_exp)
        if spec.ssm_state:  # qwen35moe: a shared expert of n_ff
            w.add_expert_shared_feed_forward_length(spec.n_ff)
    if spec.vocab == "spm":
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁", "▁▁"]
        scores, types = [0.0] * 259 + [-1.0, -2.0], [2, 3, 3] + [6] * 256 + [1, 1]
        extra = [f"▁w{i}" for i in range(spec.extra_vocab)]
        tokens, scores, types = tokens + extra, scores + [-10.0] * len(extra), types + [1] * len(extra)
        if spec.arch == "phi3":
            # Phi-3's vocabulary has it, and llama.cpp looks it up in a model named phi3.
            tokens, scores, types = tokens + ["<|endoftext|>"], scores + [0.0], types + [3]
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_unk_token_id(0)
        bos, eos = 1, 2
    else:
        # Extra tokens (no merge makes them) come before bos/eos, which stay last.
        tokens = byte_tokens() + ["ĠĠ"] + [f"w{i}" for i in range(spec.extra_vocab)] + ["<|bos|>", "<|eos|>"]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(spec.pre)
        w.add_token_list(tokens)
        w.add_token_types([1] * (len(tokens) - 2) + [3, 3])
        w.add_token_merges(["Ġ Ġ"])
        bos, eos = len(tokens) - 2, len(tokens) - 1
    n_vocab = len(tokens)
    w.add_vocab_size(n_vocab)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(spec.add_bos)

    def vec(name: str, n: int) -> None:
        # Norm weights stay F32 in every file type (llama.cpp never quantizes 1-D tensors).
        w.add_tensor(name, (1 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    def mat(name: str, n_out: int, n_in: int, std: float, layer: int = -1, n_exp: int = 0) -> None:
        # n_exp > 0: a 3-D expert tensor, n_exp matrices of (n_out, n_in).
        t = tensor_type(mix, name, layer, spec)
        lead = (n_exp,) if n_exp else ()
        if t in (T.Q4_K, T.Q5_K, T.Q6_K):
            blocks = random_k_blocks(rng, t, max(n_exp, 1) * n_out, n_in, std)
            w.add_tensor(name, blocks.reshape(*lead, n_out, -1), raw_dtype=t)
            return
        if t == T.IQ3_S:  # only read, never run: any bytes will do
            block, size = gguf.GGML_QUANT_SIZES[t]
            w.add_tensor(name, rng.integers(0, 256, size=(*lead, n_out, n_in // block * size), dtype=np.uint8),
                         raw_dtype=t)
            return
        x = (rng.standard_normal((*lead, n_out, n_in)) * std).astype(np.float32)
        if t == T.F32:
            w.add_tensor(name, x)
        elif t == T.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, t), raw_dtype=t)

    def qwen35_layer(p: str, i: int) -> None:
        vec(p + "attn_norm.weight", E)
        if spec.is_recurrent(i):
            conv, value, nv = spec.ssm_conv_dim, spec.ssm_v_heads * spec.ssm_state, spec.ssm_v_heads
            mat(p + "attn_qkv.weight", conv, E, 1.5 / np.sqrt(E), i)
            mat(p + "attn_gate.weight", value, E, 1 / np.sqrt(E), i)
            mat(p + "ssm_beta.weight", nv, E, 1 / np.sqrt(E), i)
            mat(p + "ssm_alpha.weight", nv, E, 1 / np.sqrt(E), i)
            mat(p + "ssm_out.weight", E, value, 1 / np.sqrt(value), i)
            # Never quantized (llama.cpp's quantizer leaves ssm_conv1d alone).
            w.add_tensor(p + "ssm_conv1d.weight", (0.5 * rng.standard_normal((conv, spec.ssm_conv))).astype(np.float32))
            w.add_tensor(p + "ssm_dt.bias", rng.standard_normal(nv).astype(np.float32))
            # -exp(A_log): decays between exp(-4) and exp(-0.05) per token.
            w.add_tensor(p + "ssm_a", -np.exp(rng.uniform(-1.5, 0.5, nv)).astype(np.float32))
            vec(p + "ssm_norm.weight", spec.ssm_state)
        else:
            mat(p + "attn_q.weight", 2 * spec.q_dim, E, 1.5 / np.sqrt(E), i)  # query, then gate, per head
            mat(p + "attn_k.weight", spec.kv_dim, E, 1.5 / np.sqrt(E), i)
            mat(p + "attn_v.weight", spec.kv_dim, E, 1 / np.sqrt(E), i)
            mat(p + "attn_output.weight", E, spec.q_dim, 1 / np.sqrt(spec.q_dim), i)
            vec(p + "attn_q_norm.weight", spec.head_dim)
            vec(p + "attn_k_norm.weight", spec.head_dim)
        vec(p + "post_attention_norm.weight", E)  # the FFN's pre-norm
        if spec.n_expert:
            mat(p + "ffn_gate_inp.weight", spec.n_expert, E, 2 / np.sqrt(E), i)
            mat(p + "ffn_gate_exps.weight", spec.n_ff_exp, E, 1 / np.sqrt(E), i, spec.n_expert)
            mat(p + "ffn_up_exps.weight", spec.n_ff_exp, E, 1 / np.sqrt(E), i, spec.n_expert)
            mat(p + "ffn_down_exps.weight", E, spec.n_ff_exp, 2 / np.sqrt(spec.n_ff_exp), i, spec.n_expert)
            # The shared expert's gate: one weight row (1-D, never quantized).
            w.add_tensor(p + "ffn_gate_inp_shexp.weight", (rng.standard_normal(E) / np.sqrt(E)).astype(np.float32))
            mat(p + "ffn_gate_shexp.weight", spec.n_ff, E, 1 / np.sqrt(E), i)
            mat(p + "ffn_up_shexp.weight", spec.n_ff, E, 1 / np.sqrt(E), i)
            mat(p + "ffn_down_shexp.weight", E, spec.n_ff, 1 / np.sqrt(spec.n_ff), i)
            return
        mat(p + "ffn_gate.weight", spec.n_ff, E, 1 / np.sqrt(E), i)
        mat(p + "ffn_up.weight", spec.n_ff, E, 1 / np.sqrt(E), i)
        mat(p + "ffn_down.weight", E, spec.n_ff, 1 / np.sqrt(spec.n_ff), i)

    E = spec.n_embd
    # Logits of a spread of about 3: large enough for clear greedy choices.
    mat("token_embd.weight", n_vocab, E, 3 / np.sqrt(E) if spec.tied else 0.5)
    vec("output_norm.weight", E)
    if not spec.tied:
        mat("output.weight", n_vocab, E, 3 / np.sqrt(E))
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", rope_freqs.astype(np.float32))
    if spec.long_rope:
        # Shaped as Phi-3.5's: short factors near 1, long ones rising to ~40
        # over the low-frequency pairs.
        pairs = np.arange(spec.rot // 2)
        w.add_tensor("rope_factors_long.weight", np.interp(pairs, [0, spec.rot // 8, spec.rot // 2 - 1], [1, 1.2, 40]).astype(np.float32))
        w.add_tensor("rope_factors_short.weight", np.interp(pairs, [0, spec.rot // 2 - 1], [1, 2.5]).astype(np.float32))
    for i in range(spec.n_layer):
        p = f"blk.{i}."
        if spec.ssm_state:
            qwen35_layer(p, i)
            continue
        if spec.pre_norms:
            vec(p + "attn_norm.weight", E)
        # q and k larger than the rest: attention that is neither uniform nor one-hot.
        if spec.fused:
            mat(p + "attn_qkv.weight", spec.q_dim + 2 * spec.kv_dim, E, 1.5 / np.sqrt(E), i)
        else:
            mat(p + "attn_q.weight", spec.q_dim, E, 1.5 / np.sqrt(E), i)
            mat(p + "attn_k.weight", spec.kv_dim, E, 1.5 / np.sqrt(E), i)
            mat(p + "attn_v.weight", spec.kv_dim, E, 1 / np.sqrt(E), i)
        mat(p + "attn_output.weight", E, spec.q_dim, 1 / np.sqrt(spec.q_dim), i)
        if spec.qk_norm == "head":
            vec(p + "attn_q_norm.weight", spec.head_dim)
            vec(p + "attn_k_norm.weight", spec.head_dim)
        elif spec.qk_norm == "full":
            vec(p + "attn_q_norm.weight", spec.q_dim)
            vec(p + "attn_k_norm.weight", spec.kv_dim)
        if spec.post_norms:
            vec(p + "post_attention_norm.weight", E)
        if spec.pre_norms:
            vec(p + "ffn_norm.weight", E)
        if spec.n_expert:
            # Router logits of a spread of ~2: routing that varies from token to token.
            mat(p + "ffn_gate_inp.weight", spec.n_expert, E, 2 / np.sqrt(E), i)
            mat(p + "ffn_gate_exps.weight", spec.n_ff_exp, E, 1 / np.sqrt(E), i, spec.n_expert)
            mat(p + "ffn_up_exps.weight", spec.n_ff_exp, E, 1 / np.sqrt(E), i, spec.n_expert)
            mat(p + "ffn_down_exps.weight", E, spec.n_ff_exp, 2 / np.sqrt(spec.n_ff_exp), i, spec.n_expert)
        elif spec.fused:
            mat(p + "ffn_up.weight", 2 * spec.n_ff, E, 1 / np.sqrt(E), i)  # gate rows, then up rows
            mat(p + "ffn_down.weight", E, spec.n_ff, 1 / np.sqrt(spec.n_ff), i)
        else:
            mat(p + "ffn_gate.weight", spec.n_ff, E, 1 / np.sqrt(E), i)
            mat(p + "ffn_up.weight", spec.n_ff, E, 1 / np.sqrt(E), i)
            mat(p + "ffn_down.weight", E, spec.n_ff, 1 / np.sqrt(spec.n_ff), i)
        if spec.post_norms:
            vec(p + "post_ffw_norm.weight", E)
    for key in drop_keys:  # a file that lacks a key its architecture needs
        del w.kv_data[0][key]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
