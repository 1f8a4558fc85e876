"""Architectures without packaged weights, on small random-weight GGUF files
written here with the `gguf` package (the writer llama.cpp's converter uses),
checked against llama.cpp (llama-cpp-python) on the same file.

Llama 3.x: the "llama3" RoPE scaling, stored as per-pair frequency factors in
the tensor rope_freqs.weight, and the llama-bpe pre-tokenizer. A Llama 3 file
whose factors were ignored would load and run, but every position past the
first would be rotated wrongly: a silent wrong answer. So the test also
checks that the factors change the logits (the same weights without them
differ by far more than the tolerance).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT

SPECDEC_BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))

# F32 weights: neither engine quantizes the activations, so the two agree to
# float rounding (summation order); the real-model parity tests, on quantized
# files, allow 0.08 of the logits' spread.
MAX_REL_MEAN_DIFF = 1e-3


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


def write_llama3(path: Path, rope_freqs: np.ndarray | None, seed: int = 0) -> None:
    import gguf

    rng = np.random.default_rng(seed)
    n_embd, n_head, n_head_kv, n_ff, n_layer = 64, 4, 2, 128, 2
    head_dim = n_embd // n_head
    tokens = byte_tokens() + ["ĠĠ", "<|begin_of_text|>", "<|end_of_text|>"]
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(512)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types([1] * (n_vocab - 2) + [3, 3])
    w.add_token_merges(["Ġ Ġ"])
    w.add_bos_token_id(n_vocab - 2)
    w.add_eos_token_id(n_vocab - 1)

    def t(name: str, *shape: int, scale: float = 0.08) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    t("token_embd.weight", n_vocab, n_embd, scale=0.5)
    w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(n_embd)).astype(np.float32))
    t("output.weight", n_vocab, n_embd, scale=0.3)
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", rope_freqs.astype(np.float32))
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", (1 + 0.1 * rng.standard_normal(n_embd)).astype(np.float32))
        t(f"blk.{i}.attn_q.weight", n_head * head_dim, n_embd, scale=0.3)
        t(f"blk.{i}.attn_k.weight", n_head_kv * head_dim, n_embd, scale=0.3)
        t(f"blk.{i}.attn_v.weight", n_head_kv * head_dim, n_embd)
        t(f"blk.{i}.attn_output.weight", n_embd, n_head * head_dim)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", (1 + 0.1 * rng.standard_normal(n_embd)).astype(np.float32))
        t(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        t(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        t(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def specdec_logits(path: Path, ids: list[int], out: Path) -> np.ndarray:
    p = subprocess.run([str(SPECDEC_BIN), "logits", "-m", str(path), "--tokens", *map(str, ids), "-o", str(out),
                        "-t", "2"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)


def llama_cpp_logits(path: Path, ids: list[int]) -> np.ndarray:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, n_batch=512, logits_all=True, verbose=False)
    llm.eval(ids)
    out = np.array(llm.scores[: len(ids)], dtype=np.float32)
    del llm
    return out


@pytest.fixture(scope="module")
def ids():
    rng = np.random.default_rng(7)
    return [int(x) for x in rng.integers(0, 256, size=96)]  # byte tokens; 96 positions: the angles matter


def test_llama3_rope_freqs_match_llama_cpp(tmp_path, ids):
    if not SPECDEC_BIN.exists():
        pytest.fail(f"{SPECDEC_BIN} is not built (scripts/build.sh release)")
    # As Llama 3.1's: high-frequency pairs unchanged, low-frequency ones slowed
    # down 8x, a smooth ramp between.
    factors = np.array([1, 1, 1, 1.5, 2.5, 4, 6, 8], dtype=np.float32)
    with_f, without_f = tmp_path / "llama3.gguf", tmp_path / "llama3-nofreqs.gguf"
    write_llama3(with_f, factors)
    write_llama3(without_f, None)
    ours = specdec_logits(with_f, ids, tmp_path / "a.bin")
    ref = llama_cpp_logits(with_f, ids)
    assert ours.shape == ref.shape
    rel = float(np.abs(ours - ref).mean() / ref.std())
    assert rel <= MAX_REL_MEAN_DIFF, f"Llama 3 logits drift from llama.cpp: mean|d|/std {rel:.2e}"
    assert (ours.argmax(1) == ref.argmax(1)).mean() >= 0.98
    # Without the factors the same weights give other logits (past position 0):
    # the check above would catch a loader that ignored rope_freqs.
    plain = specdec_logits(without_f, ids, tmp_path / "b.bin")
    assert np.allclose(plain[0], ours[0], rtol=1e-4, atol=1e-4)  # position 0: no rotation at all
    moved = float(np.abs(plain[1:] - ours[1:]).mean() / ref.std())
    print(f"specdec vs llama.cpp: mean|d|/std {rel:.2e}; with vs without rope_freqs: {moved:.2e}")
    assert moved > 10 * MAX_REL_MEAN_DIFF and moved > 100 * rel, f"rope_freqs changed the logits by only {moved:.2e}"
