"""Architectures without packaged weights, on small random-weight GGUF files
written here with the `gguf` package (the writer llama.cpp's converter uses),
checked against llama.cpp (llama-cpp-python) on the same file.

For every architecture and every weight type its family ships, three checks:
  * logits at 96 positions (one batched forward) against llama.cpp's: mean
    |difference| over the spread of llama.cpp's logits, and top-1 agreement;
  * the same logits computed one row per forward (--chunk 1) are bit-identical
    to the batched ones (batch invariance: verification must see what plain
    decoding sees, or speculation stops being lossless);
  * a 32-token greedy continuation of a text prompt is identical to
    llama.cpp's, or parts from it only at a near-tie of llama.cpp's top-2
    logits (the rule of test_model_parity.py).

Architecture by architecture, what the files exercise:
  * Llama 3.x: the "llama3" RoPE scaling, stored as per-pair frequency factors
    in rope_freqs.weight, and the llama-bpe pre-tokenizer. A file whose factors
    were ignored would load and run with every position past the first rotated
    wrongly, so a separate test checks that the factors change the logits.
  * Qwen3: per-head RMS norms of q and k before RoPE, no q/k/v biases, a head
    size (128) that is not n_embd / n_head, tied embeddings (as the small
    Qwen3 models that serve as drafts), NeoX RoPE.
  * Mistral 7B (v0.1-v0.3): the llama architecture with a SentencePiece
    vocabulary and 4:1 grouped-query attention. (Mistral Nemo and Ministral
    use the "tekken" pre-tokenizer, which specdec does not support.)
  * SmolLM3: llama with no RoPE on every fourth layer (llama.cpp's
    n_no_rope_layer_step = 4), tied embeddings.
  * OLMo 2: no norm before attention or FFN, norms after both instead, and
    q/k RMS norms over all heads at once (not per head); NeoX RoPE.
  * Phi-3 (phi3-mini-4k): one fused attn_qkv tensor and one ffn_up tensor of
    twice the FFN width (gate rows first), q scaled before the product,
    NeoX RoPE, a SentencePiece vocabulary. Phi-3 128k / Phi-3.5 (phi3-128k):
    LongRoPE, two sets of per-pair frequency factors (rope_factors_long/short,
    the long ones used when the context exceeds the original 4k) and an
    attention factor on cos/sin. Phi-4-mini (phi4-mini): partial rotation
    (3/4 of each head), tied embeddings, a GPT-2-style vocabulary. The
    sliding_window key of Phi-3 files is ignored by llama.cpp ("Phi SWA is
    currently disabled") and so by specdec.
  * Gemma 2: tanh soft-capping of the attention scores and of the logits, a
    sliding window on every other layer (a short one here, so that it cuts),
    norms before and after attention and FFN, GELU, embeddings scaled by
    sqrt(n_embd), q scaled by 1/sqrt(head_dim) (head_dim != n_embd / n_head
    here, as in Gemma 2 9B), tied embeddings.
  * Qwen3-MoE: Qwen3's attention with a mixture-of-experts FFN in every
    layer: router (ffn_gate_inp, F32 in every file type as llama.cpp's
    quantizer leaves it), 3-D expert tensors ffn_{gate,up,down}_exps, top-4 of
    16 experts per token with renormalised weights.

Weight types: float weights are drawn from a normal distribution and written
as F32, F16, BF16, Q8_0 or Q5_0 (gguf quantizes these). The gguf package
cannot quantize K-quants, so Q4_K, Q5_K and Q6_K tensors are written as random
blocks (random quants, scales and minima chosen for a zero-mean weight of the
intended spread): both engines read the same bits, which is all a parity test
needs. The mixes follow llama.cpp's quantize rules for the file types people
download (Q4_K_M: attn_v and ffn_down of some layers and the LM head in Q6_K).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools" / "reference"))
import llama_ref  # noqa: E402

SPECDEC_BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))
REPORT = REPO_ROOT / "build" / "parity_report.json"

# F32 weights: neither engine quantizes the activations, so the two agree to
# float rounding (summation order). Other types: the tolerance of the
# real-model parity tests (test_model_parity.py), whose files are quantized.
MAX_REL_MEAN_DIFF_F32 = 1e-3
MIN_TOP1_F32 = 0.98
MAX_REL_MEAN_DIFF = 0.08
MIN_TOP1 = 0.90
NEAR_TIE = 0.5
N_GREEDY = 32
GREEDY_PROMPT = "The quick brown fox jumps over the lazy dog; 12345 + 678 = ?"


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

    @property
    def q_dim(self) -> int:
        return self.n_head * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_head_kv * self.head_dim

    @property
    def rot(self) -> int:
        return self.n_rot or self.head_dim


ARCHS = {
    "llama3": ArchSpec("llama", pre="llama-bpe", rope_base=500000.0),
    "qwen3": ArchSpec("qwen3", add_bos=False, head_dim=128, qk_norm="head", tied=True),
    "mistral": ArchSpec("llama", vocab="spm", n_head_kv=1),
    "smollm3": ArchSpec("smollm3", pre="llama-bpe", n_layer=4, tied=True, rope_base=5e6),
    "olmo2": ArchSpec("olmo2", pre="dbrx", rope_base=500000.0, qk_norm="full", pre_norms=False, post_norms=True),
    # sliding_window as Phi-3-mini-4k has it (2047), short enough here to cut if it were applied.
    "phi3": ArchSpec("phi3", vocab="spm", n_head_kv=4, rope_base=10000.0, fused=True, ctx_len=4096, sliding_window=24),
    # The original context below the 512 both engines run with: the long factors apply.
    "phi3-128k": ArchSpec("phi3", vocab="spm", n_head_kv=4, rope_base=10000.0, fused=True, long_rope=256),
    # Phi-4-mini's shape; its vocabulary's pre-tokenizer ("gpt-4o") is not
    # one specdec has, so the file says "gpt-2".
    "phi4-mini": ArchSpec("phi3", name="phi4-mini", pre="gpt-2", n_rot=48, rope_base=10000.0, fused=True, tied=True,
                          long_rope=4096),
    "gemma2": ArchSpec("gemma2", vocab="spm", head_dim=128, n_layer=4, rope_base=10000.0, pre_norms=True,
                       post_norms=True, tied=True, attn_softcap=4.0, final_softcap=10.0, sliding_window=24),
    "qwen3moe": ArchSpec("qwen3moe", add_bos=False, head_dim=128, qk_norm="head", n_expert=16, n_expert_used=4,
                         n_ff_exp=256),
}

# The file types each family is published in (Qwen publishes Qwen3 in BF16,
# Q8_0, Q6_K, Q5_K_M, Q5_0 and Q4_K_M; F32 is the exactness check).
MIXES = {
    "qwen3": ["F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_0", "Q4_K_M"],
    "llama3": ["F32", "F16", "Q8_0", "Q4_K_M"],
    "mistral": ["F32", "F16", "Q8_0", "Q4_K_M"],
    "smollm3": ["F32", "F16", "Q8_0", "Q4_K_M"],
    "olmo2": ["F32", "F16", "Q8_0", "Q4_K_M"],
    "phi3": ["F32", "F16", "Q8_0", "Q4_K_M"],
    "phi3-128k": ["F32", "Q4_K_M"],
    "phi4-mini": ["F32", "Q8_0", "Q4_K_M"],
    "gemma2": ["F32", "F16", "Q8_0", "Q4_K_M"],
    # MXFP4_MOE: llama.cpp's file type of the gpt-oss releases (experts MXFP4).
    "qwen3moe": ["F32", "BF16", "Q8_0", "Q4_K_M", "MXFP4_MOE"],
}
CASES = [(a, m) for a, ms in MIXES.items() for m in ms]


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
    if spec.n_expert:
        w.add_expert_count(spec.n_expert)
        w.add_expert_used_count(spec.n_expert_used)
        w.add_expert_feed_forward_length(spec.n_ff_exp)
    if spec.vocab == "spm":
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁", "▁▁"]
        scores, types = [0.0] * 259 + [-1.0, -2.0], [2, 3, 3] + [6] * 256 + [1, 1]
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
        tokens = byte_tokens() + ["ĠĠ", "<|bos|>", "<|eos|>"]
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


def _specdec(*args: str) -> subprocess.CompletedProcess:
    if not SPECDEC_BIN.exists():
        pytest.fail(f"{SPECDEC_BIN} is not built (scripts/build.sh release)")
    p = subprocess.run([str(SPECDEC_BIN), *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def specdec_logits(path: Path, ids: list[int], out: Path, chunk: int = 0) -> np.ndarray:
    _specdec("logits", "-m", str(path), "--tokens", *map(str, ids), "-o", str(out), "-t", "2", "--chunk", str(chunk))
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)


def _report(key: str, data: dict) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    rep = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    rep.setdefault("random_arch", {})[key] = data
    REPORT.write_text(json.dumps(rep, indent=2))


def llama3_factors(spec: ArchSpec) -> np.ndarray:
    """As Llama 3.1's: high-frequency pairs unchanged, low-frequency ones slowed
    down 8x, a smooth ramp between."""
    n_pairs = spec.head_dim // 2
    return np.interp(np.arange(n_pairs), [0, n_pairs // 3, n_pairs - 4], [1, 1, 8]).astype(np.float32)


@pytest.fixture(scope="module", params=CASES, ids=[f"{a}-{m}" for a, m in CASES])
def case(request, tmp_path_factory):
    arch, mix = request.param
    spec = ARCHS[arch]
    path = tmp_path_factory.mktemp(f"{arch}-{mix}") / f"{arch}-{mix}.gguf"
    write_model(path, spec, mix, rope_freqs=llama3_factors(spec) if arch == "llama3" else None)
    llm = llama_ref.load_model(path, n_ctx=512)
    rng = np.random.default_rng(7)
    ids = [int(x) for x in rng.choice(byte_token_ids(spec), size=96)]  # 96 positions: the angles matter
    yield arch, mix, spec, path, llm, ids
    del llm


def test_logits_match_llama_cpp(case, tmp_path):
    arch, mix, spec, path, llm, ids = case
    ref = llama_ref.prompt_logits(llm, ids)
    ours = specdec_logits(path, ids, tmp_path / "logits.bin")
    assert ours.shape == ref.shape
    d = np.abs(ours - ref)
    rel = float(d.mean() / ref.std())
    top1 = float((ours.argmax(1) == ref.argmax(1)).mean())
    _report(f"{arch}-{mix}", {"positions": len(ids), "rel_mean_abs_diff": rel, "max_abs_diff": float(d.max()),
                              "logit_std": float(ref.std()), "top1_agreement": top1})
    print(f"{arch} {mix}: mean|d|/std {rel:.2e}, max|d| {d.max():.2e} (logit std {ref.std():.2f}), top-1 {top1:.3f}")
    max_rel, min_top1 = (MAX_REL_MEAN_DIFF_F32, MIN_TOP1_F32) if mix == "F32" else (MAX_REL_MEAN_DIFF, MIN_TOP1)
    assert rel <= max_rel, f"{arch} {mix}: logits drift from llama.cpp: mean|d|/std {rel:.2e}"
    assert top1 >= min_top1, f"{arch} {mix}: top-1 agreement {top1:.3f}"


def test_batch_invariant(case, tmp_path):
    arch, mix, spec, path, llm, ids = case
    batched = specdec_logits(path, ids, tmp_path / "a.bin")
    single = specdec_logits(path, ids, tmp_path / "b.bin", chunk=1)
    assert np.array_equal(batched, single), (
        f"{arch} {mix}: a row's logits depend on its batch (max|d| {np.abs(batched - single).max():.2e})")


def test_greedy_matches_llama_cpp(case):
    arch, mix, spec, path, llm, ids = case
    prompt_ids = llama_ref.tokenize(llm, GREEDY_PROMPT)
    ref = llama_ref.greedy(llm, prompt_ids, N_GREEDY, stop_at_eos=False)
    ours = json.loads(_specdec("generate", "-m", str(path), "-p", GREEDY_PROMPT, "-n", str(N_GREEDY),
                               "--ignore-eos", "--json", "-t", "2").stdout)
    assert ours["n_prompt"] == len(prompt_ids), "prompt tokenization differs from llama.cpp"
    parted = llama_ref.greedy_split(ours["tokens"], ref)
    if parted is None:
        return
    split, margin = parted
    print(f"{arch} {mix}: greedy parts from llama.cpp at step {split}, llama.cpp top-2 margin {margin:.3f}")
    assert margin < NEAR_TIE, (f"{arch} {mix}: greedy output parts from llama.cpp at step {split} where its "
                               f"top-2 margin is {margin:.3f} (not a near-tie): ours {ours['tokens'][split:split + 1]} "
                               f"vs {ref['tokens'][split:split + 1]}")


def test_llama3_rope_freqs_matter(tmp_path):
    """The factors change the logits by far more than the tolerance: the parity
    check above would catch a loader that ignored rope_freqs."""
    spec = ARCHS["llama3"]
    factors = llama3_factors(spec)
    with_f, without_f = tmp_path / "llama3.gguf", tmp_path / "llama3-nofreqs.gguf"
    write_model(with_f, spec, rope_freqs=factors)
    write_model(without_f, spec)
    rng = np.random.default_rng(7)
    ids = [int(x) for x in rng.integers(0, 256, size=96)]
    ours = specdec_logits(with_f, ids, tmp_path / "a.bin")
    llm = llama_ref.load_model(with_f, n_ctx=512)
    ref = llama_ref.prompt_logits(llm, ids)
    del llm
    rel = float(np.abs(ours - ref).mean() / ref.std())
    assert rel <= MAX_REL_MEAN_DIFF_F32, f"Llama 3 logits drift from llama.cpp: mean|d|/std {rel:.2e}"
    plain = specdec_logits(without_f, ids, tmp_path / "b.bin")
    assert np.allclose(plain[0], ours[0], rtol=1e-4, atol=1e-4)  # position 0: no rotation at all
    moved = float(np.abs(plain[1:] - ours[1:]).mean() / ref.std())
    print(f"specdec vs llama.cpp: mean|d|/std {rel:.2e}; with vs without rope_freqs: {moved:.2e}")
    assert moved > 10 * MAX_REL_MEAN_DIFF_F32 and moved > 100 * rel, f"rope_freqs changed the logits by only {moved:.2e}"


def test_smollm3_nope_layers_matter(tmp_path):
    """The same weights as a llama file (RoPE in every layer) give other logits:
    the parity check above would catch a loader that rotated the NoPE layers."""
    import dataclasses

    spec = ARCHS["smollm3"]
    smol, llama = tmp_path / "smollm3.gguf", tmp_path / "as-llama.gguf"
    write_model(smol, spec)
    write_model(llama, dataclasses.replace(spec, arch="llama"))
    rng = np.random.default_rng(7)
    ids = [int(x) for x in rng.integers(0, 256, size=96)]
    ours = specdec_logits(smol, ids, tmp_path / "a.bin")
    roped = specdec_logits(llama, ids, tmp_path / "b.bin")
    moved = float(np.abs(ours[1:] - roped[1:]).mean() / ours.std())
    print(f"smollm3 vs the same weights with RoPE in every layer: mean|d|/std {moved:.2e}")
    assert moved > 10 * MAX_REL_MEAN_DIFF_F32, f"the NoPE layers changed the logits by only {moved:.2e}"


def _vs_llama(path: Path, ids: list[int], out: Path) -> tuple[np.ndarray, float]:
    """specdec's logits of `ids` on `path`, and their mean|d|/std against llama.cpp's."""
    ours = specdec_logits(path, ids, out)
    llm = llama_ref.load_model(path, n_ctx=512)
    ref = llama_ref.prompt_logits(llm, ids)
    del llm
    return ours, float(np.abs(ours - ref).mean() / ref.std())


def _random_ids(spec: ArchSpec) -> list[int]:
    rng = np.random.default_rng(7)
    return [int(x) for x in rng.choice(byte_token_ids(spec), size=96)]


def test_phi3_longrope_factor_choice_matters(tmp_path):
    """The same weights with the original context above and below the 512 both
    engines run with: short and long factors give different logits, and each
    file matches llama.cpp, so the choice is made as llama.cpp makes it."""
    import dataclasses

    spec = ARCHS["phi3-128k"]
    long_f, short_f = tmp_path / "long.gguf", tmp_path / "short.gguf"
    write_model(long_f, spec)
    write_model(short_f, dataclasses.replace(spec, long_rope=4096))
    ids = _random_ids(spec)
    a, rel_a = _vs_llama(long_f, ids, tmp_path / "a.bin")
    b, rel_b = _vs_llama(short_f, ids, tmp_path / "b.bin")
    moved = float(np.abs(a[1:] - b[1:]).mean() / a.std())
    print(f"long factors vs llama.cpp {rel_a:.2e}, short {rel_b:.2e}; long vs short {moved:.2e}")
    assert rel_a <= MAX_REL_MEAN_DIFF_F32 and rel_b <= MAX_REL_MEAN_DIFF_F32
    assert moved > 10 * MAX_REL_MEAN_DIFF_F32, f"the factor sets changed the logits by only {moved:.2e}"


def test_gemma2_softcaps_and_window_matter(tmp_path):
    """Gemma 2's soft-capping and sliding window change the logits by far more
    than the tolerance (so the parity check above would catch a loader that
    ignored them), and the logits stay inside the final cap."""
    import dataclasses

    spec = ARCHS["gemma2"]
    ids = _random_ids(spec)
    path = tmp_path / "gemma2.gguf"
    write_model(path, spec)
    base = specdec_logits(path, ids, tmp_path / "base.bin")
    assert np.abs(base).max() <= spec.final_softcap
    for what, variant in [("attention soft-cap", dataclasses.replace(spec, attn_softcap=1e4)),
                          ("final soft-cap", dataclasses.replace(spec, final_softcap=1e4)),
                          ("sliding window", dataclasses.replace(spec, sliding_window=4096))]:
        other = tmp_path / f"{what}.gguf"
        write_model(other, variant)
        ours, rel = _vs_llama(other, ids, tmp_path / "o.bin")
        moved = float(np.abs(ours - base).mean() / base.std())
        print(f"gemma2 without the {what}: vs llama.cpp {rel:.2e}; vs with it {moved:.2e}")
        assert rel <= MAX_REL_MEAN_DIFF_F32
        assert moved > 10 * MAX_REL_MEAN_DIFF_F32, f"the {what} changed the logits by only {moved:.2e}"


def test_qwen3moe_expert_count_matters(tmp_path):
    """Routing to 2 instead of 4 experts per token (same weights) moves the
    logits far beyond the tolerance, and both files match llama.cpp: the
    top-k choice and the renormalised weights are llama.cpp's."""
    import dataclasses

    spec = ARCHS["qwen3moe"]
    ids = _random_ids(spec)
    four, two = tmp_path / "four.gguf", tmp_path / "two.gguf"
    write_model(four, spec)
    write_model(two, dataclasses.replace(spec, n_expert_used=2))
    a, rel_a = _vs_llama(four, ids, tmp_path / "a.bin")
    b, rel_b = _vs_llama(two, ids, tmp_path / "b.bin")
    moved = float(np.abs(a - b).mean() / a.std())
    print(f"top-4 vs llama.cpp {rel_a:.2e}, top-2 {rel_b:.2e}; top-4 vs top-2 {moved:.2e}")
    assert rel_a <= MAX_REL_MEAN_DIFF_F32 and rel_b <= MAX_REL_MEAN_DIFF_F32
    assert moved > 10 * MAX_REL_MEAN_DIFF_F32, f"the expert count changed the logits by only {moved:.2e}"


@pytest.mark.parametrize("arch", ["phi3", "phi3-128k", "gemma2", "qwen3moe"])
def test_models_inspect_new_architectures(arch, tmp_path):
    """`specdec models inspect` on each architecture: what it is, and that it runs."""
    spec = ARCHS[arch]
    path = tmp_path / f"{arch}.gguf"
    write_model(path, spec, "Q4_K_M")
    r = json.loads(_specdec("models", "inspect", str(path), "--json").stdout)
    assert r["architecture"] == spec.arch and r["runnable"], r["problems"]
    h = r["hyperparameters"]
    assert h["block_count"] == spec.n_layer and h["embedding_length"] == spec.n_embd
    if spec.sliding_window:
        assert h["attention.sliding_window"] == spec.sliding_window
    if spec.n_expert:
        assert h["expert_count"] == spec.n_expert and h["expert_used_count"] == spec.n_expert_used
    text = _specdec("models", "inspect", str(path)).stdout
    assert f"architecture  {spec.arch}" in text and "runs          yes" in text, text


def test_missing_moe_keys_are_named(tmp_path):
    """A qwen3moe file without its expert counts is refused with the key named."""
    for key in ("qwen3moe.expert_count", "qwen3moe.expert_used_count"):
        path = tmp_path / "moe.gguf"
        write_model(path, ARCHS["qwen3moe"], drop_keys=(key,))
        p = subprocess.run([str(SPECDEC_BIN), "generate", "-m", str(path), "-p", "hi", "-n", "1"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and f"missing metadata '{key}'" in p.stderr, p.stderr


@pytest.mark.parametrize("pattern", [3, (False, True, True, False)], ids=["period-3", "per-layer"])
def test_gemma2_sliding_window_pattern_key(pattern, tmp_path):
    """A gemma2 file that says which layers slide (llama.cpp's optional
    sliding_window_pattern: a period or one bool per layer) is read as
    llama.cpp reads it, and the pattern changes the logits."""
    import dataclasses

    spec = ARCHS["gemma2"]
    ids = _random_ids(spec)
    default, patterned = tmp_path / "default.gguf", tmp_path / "pattern.gguf"
    write_model(default, spec)
    write_model(patterned, dataclasses.replace(spec, swa_pattern=pattern))
    base = specdec_logits(default, ids, tmp_path / "a.bin")
    ours, rel = _vs_llama(patterned, ids, tmp_path / "b.bin")
    moved = float(np.abs(ours - base).mean() / base.std())
    print(f"gemma2 with sliding_window_pattern {pattern}: vs llama.cpp {rel:.2e}; vs the default {moved:.2e}")
    assert rel <= MAX_REL_MEAN_DIFF_F32
    assert moved > 10 * MAX_REL_MEAN_DIFF_F32
