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
  * Qwen3.5 (qwen35): three gated DeltaNet layers (causal convolution, L2-
    normalised q/k, a per-head matrix state updated by the delta rule, gated
    RMS norm) and a gated full-attention layer (query and gate per head,
    per-head q/k norms, partial rotation with M-RoPE sections); twice as many
    value heads as q/k heads. Qwen3.5-MoE (qwen35moe) adds routed experts and
    a shared expert under a sigmoid gate. Their speculation tests: prompt
    lookup's greedy output equals AR's, a recurrent draft model is refused.

Weight types and how the files are made: tools/random_gguf.py (the same writer
makes tools/bench_arch.py's realistic-size files).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools" / "reference"))
import llama_ref  # noqa: E402
from random_gguf import ArchSpec, byte_token_ids, write_model  # noqa: E402  (tools/ is on sys.path: conftest)

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
    # Three gated DeltaNet layers, then a gated full-attention layer, as
    # Qwen3.5 stacks them; twice the value heads of q/k heads (head h reads
    # q/k head h mod 2), a quarter of each attention head rotated, M-RoPE
    # sections that cover every rotated pair.
    "qwen35": ArchSpec("qwen35", pre="qwen35", add_bos=False, n_layer=4, n_rot=16, rope_sections=(3, 3, 2, 0),
                       ssm_state=64, ssm_k_heads=2, ssm_v_heads=4, tied=True),
    # Qwen3.5's MoE variant: the same layers with top-4 of 16 routed experts
    # and a shared expert under a sigmoid gate in every layer.
    "qwen35moe": ArchSpec("qwen35moe", pre="qwen35", add_bos=False, n_layer=4, n_rot=16, rope_sections=(3, 3, 2, 0),
                          ssm_state=64, ssm_k_heads=2, ssm_v_heads=4, n_expert=16, n_expert_used=4, n_ff_exp=256,
                          tied=True),
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
    "qwen35": ["F32", "F16", "BF16", "Q8_0", "Q6_K", "Q4_K_M"],
    "qwen35moe": ["F32", "BF16", "Q8_0", "Q4_K_M"],
}
CASES = [(a, m) for a, ms in MIXES.items() for m in ms]


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


@pytest.mark.parametrize("arch", ["phi3", "phi3-128k", "gemma2", "qwen3moe", "qwen35", "qwen35moe"])
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


def test_qwen35_speculation_is_lossless(tmp_path):
    """Qwen3.5's recurrent layers under speculation: prompt lookup (ngram)
    verifies chains whose accepted prefix keeps the recurrent state of its last
    row, and the greedy output is AR's token for token, with drafts accepted
    (a random model repeats itself, which lookup catches)."""
    path = tmp_path / "qwen35.gguf"
    write_model(path, ARCHS["qwen35"], "Q4_K_M")
    prompt = "The quick brown fox jumps over the lazy dog; the quick brown fox"
    runs = {m: json.loads(_specdec("generate", "-m", str(path), "-p", prompt, "-n", "64", "--ignore-eos", "--json",
                                   "-t", "2", "--method", m).stdout) for m in ("ar", "ngram")}
    assert runs["ngram"]["tokens"] == runs["ar"]["tokens"]
    assert runs["ngram"]["accepted"] > 0, runs["ngram"]


def test_qwen35_draft_model_is_refused(tmp_path):
    """A draft model steps back after every round, which a recurrent state
    cannot: a Qwen3.5 draft (or a shallow copy of a Qwen3.5 target) is refused
    with a clear error, not run wrongly."""
    path = tmp_path / "qwen35.gguf"
    write_model(path, ARCHS["qwen35"], "Q4_K_M")
    for extra in (["-d", str(path)], ["--draft-layers", "2"]):
        p = subprocess.run([str(SPECDEC_BIN), "generate", "-m", str(path), "-p", "hi", "-n", "4", "--method", "chain",
                            *extra], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "has recurrent layers" in p.stderr, p.stderr
