"""llama.cpp's own EAGLE-3 as the reference for specdec's head.

1. convert: an EAGLE-3 head in the Hugging Face layout (config.json +
   model.safetensors) -> llama.cpp's `eagle3` GGUF, the way llama.cpp's
   convert_hf_to_gguf.py does it (its conversion/llama.py: midlayer.* ->
   blk.0.*, hidden_norm -> attn_norm_2, q/k rows permuted for llama.cpp's
   interleaved RoPE, d2t written as absolute target ids, t2d dropped,
   eagle3.target_layers / eagle3.target_hidden_size, the target's tokenizer).
   That script needs torch; this does the same with numpy and the gguf package.
2. run: the installed llama_cpp library (llama-cpp-python's) loads the target
   and the head (the head's context with ctx_other = the target's), captures
   the target's layer inputs (llama_set_embeddings_layer_inp), runs the head's
   encoder (fc) and decoder on (token p + 1, g p) rows and on self-fed draft
   rows, and saves features, draft logits (over the draft vocabulary) and
   prenorm states as .npy files.

The llama-ext functions (layer inputs, nextn/prenorm embeddings) are exported
with C++ linkage only; they are called by their mangled names.

Usage (run as a subprocess: an assertion inside ggml aborts the process):
  python eagle3_llama_ref.py TARGET.gguf HEAD_DIR REQUEST.json OUT_DIR
REQUEST.json: {"tokens": [...], "draft_tokens": [...], "threads": 2}
OUT_DIR/features_in.npy, when present before the run, is what the head reads
instead of llama.cpp's own features (to compare the head alone). Writes
head.gguf, features.npy (llama.cpp's layer inputs), logits.npy, prenorm.npy.
"""
from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import load_file


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    # convert_hf_to_gguf's LlamaModel.permute: HF rotate_half pairs (i, i + d/2) -> llama.cpp's (2i, 2i + 1).
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def convert(head_dir: Path, target: Path, out: Path, f16: bool = False) -> dict:
    """f16: the matrices in float16 (the norms stay float32), else all float32."""
    cfg = json.loads((head_dir / "config.json").read_text())
    layer = cfg.get("transformer_layer_config", cfg)
    t = {k: v for k, v in load_file(str(head_dir / "model.safetensors")).items()}
    pre = "midlayer." if "midlayer.hidden_norm.weight" in t else "layers.0."
    r = gguf.GGUFReader(str(target))
    arch = bytes(r.fields["general.architecture"].parts[r.fields["general.architecture"].data[0]]).decode()
    n_layer_t = int(r.fields[f"{arch}.block_count"].parts[r.fields[f"{arch}.block_count"].data[0]][0])
    n_embd_t = int(r.fields[f"{arch}.embedding_length"].parts[r.fields[f"{arch}.embedding_length"].data[0]][0])
    layers = cfg.get("eagle_aux_hidden_state_layer_ids") or [2, n_layer_t // 2, n_layer_t - 3]
    H = layer["hidden_size"]
    nh = layer["num_attention_heads"]
    nkv = layer.get("num_key_value_heads", nh)
    w = gguf.GGUFWriter(str(out), "eagle3")
    w.add_block_count(1)
    w.add_context_length(4096)
    w.add_embedding_length(H)
    w.add_feed_forward_length(layer["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_layer_norm_rms_eps(float(layer.get("rms_norm_eps", 1e-6)))
    w.add_rope_freq_base(float(layer.get("rope_theta", 10000.0)))
    w.add_rope_dimension_count(H // nh)
    w.add_array("eagle3.target_layers", [int(x) for x in layers])
    w.add_uint32("eagle3.target_hidden_size", int(cfg.get("target_hidden_size") or n_embd_t))
    for name, f in r.fields.items():
        if name.startswith("tokenizer."):
            vt = f.types[0]
            w.add_key_value(name, f.contents(), vt, f.types[1] if vt == gguf.GGUFValueType.ARRAY else None)
    f32 = lambda x: np.ascontiguousarray(x, dtype=np.float32)  # noqa: E731
    mat = (lambda x: np.ascontiguousarray(x, dtype=np.float16)) if f16 else f32  # noqa: E731
    names = {
        "fc.weight": mat(t["fc.weight"]),
        "blk.0.attn_norm.weight": f32(t[pre + "input_layernorm.weight"]),
        "blk.0.attn_norm_2.weight": f32(t[pre + "hidden_norm.weight"]),
        "blk.0.attn_q.weight": mat(permute(t[pre + "self_attn.q_proj.weight"], nh)),
        "blk.0.attn_k.weight": mat(permute(t[pre + "self_attn.k_proj.weight"], nkv)),
        "blk.0.attn_v.weight": mat(t[pre + "self_attn.v_proj.weight"]),
        "blk.0.attn_output.weight": mat(t[pre + "self_attn.o_proj.weight"]),
        "blk.0.ffn_norm.weight": f32(t[pre + "post_attention_layernorm.weight"]),
        "blk.0.ffn_gate.weight": mat(t[pre + "mlp.gate_proj.weight"]),
        "blk.0.ffn_up.weight": mat(t[pre + "mlp.up_proj.weight"]),
        "blk.0.ffn_down.weight": mat(t[pre + "mlp.down_proj.weight"]),
        "output_norm.weight": f32(t["norm.weight"]),
        "output.weight": mat(t["lm_head.weight"]),
    }
    for k, v in names.items():
        w.add_tensor(k, v)
    d2t = t["d2t"].astype(np.int64)
    w.add_tensor("d2t", np.ascontiguousarray(d2t + np.arange(d2t.size, dtype=np.int64)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"layers": layers, "hidden": H, "d2t": d2t + np.arange(d2t.size)}


def run(target: Path, head_gguf: Path, meta: dict, req: dict, out_dir: Path) -> None:
    import llama_cpp as L

    lib = L.llama_cpp._lib
    c_float_p = ctypes.POINTER(ctypes.c_float)

    def ext(name, argtypes, restype):
        f = getattr(lib, name)
        f.argtypes = argtypes
        f.restype = restype
        return f

    set_layer_inp = ext("_Z30llama_set_embeddings_layer_inpP13llama_contextjb",
                        [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_bool], None)
    get_layer_inp = ext("_Z30llama_get_embeddings_layer_inpP13llama_contextj",
                        [ctypes.c_void_p, ctypes.c_uint32], c_float_p)
    set_nextn = ext("_Z26llama_set_embeddings_nextnP13llama_contextbb",
                    [ctypes.c_void_p, ctypes.c_bool, ctypes.c_bool], None)
    get_nextn = ext("_Z26llama_get_embeddings_nextnP13llama_context", [ctypes.c_void_p], c_float_p)
    get_nextn_ith = ext("_Z30llama_get_embeddings_nextn_ithP13llama_contexti",
                        [ctypes.c_void_p, ctypes.c_int32], c_float_p)

    tokens = [int(x) for x in req["tokens"]]
    drafts = [int(x) for x in req.get("draft_tokens", [])]
    threads = int(req.get("threads", 2))
    n = len(tokens)
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    tgt = L.llama_model_load_from_file(str(target).encode(), mp)
    assert tgt, "cannot load the target"
    cp = L.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512
    cp.n_threads = cp.n_threads_batch = threads
    # specdec mirrors ggml's non-flash attention (kernels/attention.h).
    cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx_t = L.llama_init_from_model(tgt, cp)
    assert ctx_t, "cannot create the target context"
    E = L.llama_model_n_embd(tgt)
    for l in meta["layers"]:
        set_layer_inp(ctx_t, l, True)
    # One token per decode: llama.cpp then sums as in single-token decode,
    # the order specdec uses for every row (model/transformer.cpp).
    rows = []
    for tok in tokens:
        arr = (ctypes.c_int32 * 1)(tok)
        assert L.llama_decode(ctx_t, L.llama_batch_get_one(arr, 1)) == 0, "target decode failed"
        rows.append(np.concatenate(
            [np.ctypeslib.as_array(get_layer_inp(ctx_t, l), shape=(1, E)).copy() for l in meta["layers"]], axis=1))
    feats = np.concatenate(rows, axis=0)
    np.save(out_dir / "features.npy", feats)

    dm = L.llama_model_load_from_file(str(head_gguf).encode(), mp)
    assert dm, "cannot load the eagle3 GGUF"
    dp = L.llama_context_default_params()
    dp.n_ctx = dp.n_batch = dp.n_ubatch = 512
    dp.n_threads = dp.n_threads_batch = threads
    dp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    dp.ctx_other = ctx_t
    ctx_d = L.llama_init_from_model(dm, dp)
    assert ctx_d, "cannot create the eagle3 context"
    set_nextn(ctx_d, True, True)
    H = meta["hidden"]
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(dm))
    d2t = np.asarray(meta["d2t"], dtype=np.int64)

    # Encoder: g = fc(features) for rows 0..n-2 (the features given: the target's own, from above).
    fin = np.ascontiguousarray(np.load(out_dir / "features_in.npy") if (out_dir / "features_in.npy").exists()
                               else feats, dtype=np.float32)
    b = L.llama_batch_ext_init(ctx_d)
    for p in range(n - 1):
        row = fin[p]
        idx = L.llama_batch_ext_add_embd(b, 0, L.llama_embd(row.ctypes.data_as(c_float_p), 1, row.size))
        assert idx >= 0, idx
        pos = ctypes.c_int32(p)
        L.llama_batch_ext_set_pos(b, idx, ctypes.byref(pos))
    assert L.llama_process(ctx_d, L.LLAMA_PROCESS_TYPE_ENCODE, b) == 0, "encode failed"
    g = np.ctypeslib.as_array(get_nextn(ctx_d), shape=(n - 1, H)).copy()

    logits, pre = [], []

    def decode(rows):  # rows: (token, g_row, pos)
        L.llama_batch_ext_clear(b)
        keep = []
        for tok, grow, p in rows:
            grow = np.ascontiguousarray(grow, dtype=np.float32)
            keep.append(grow)
            idx = L.llama_batch_ext_add_token(b, 0, tok)
            assert idx >= 0, idx
            pos = ctypes.c_int32(p)
            L.llama_batch_ext_set_pos(b, idx, ctypes.byref(pos))
            assert L.llama_batch_ext_set_embd_token(b, idx, L.llama_embd(grow.ctypes.data_as(c_float_p), 1, H))
            L.llama_batch_ext_set_output_logits(b, idx, True)
        assert L.llama_process(ctx_d, L.LLAMA_PROCESS_TYPE_DECODE, b) == 0, "decode failed"
        for i in range(len(rows)):
            full = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx_d, i), shape=(n_vocab,))
            logits.append(full[d2t].copy())
            pre.append(np.ctypeslib.as_array(get_nextn_ith(ctx_d, i), shape=(H,)).copy())

    decode([(tokens[p + 1], g[p], p) for p in range(n - 1)])
    for s, tok in enumerate(drafts):
        decode([(tok, pre[-1], n - 1 + s)])
    np.save(out_dir / "logits.npy", np.array(logits))
    np.save(out_dir / "prenorm.npy", np.array(pre))
    L.llama_batch_ext_free(b)


def main() -> None:
    target, head_dir, req_path, out_dir = map(Path, sys.argv[1:5])
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = convert(head_dir, target, out_dir / "head.gguf")
    run(target, out_dir / "head.gguf", meta, json.loads(req_path.read_text()), out_dir)


if __name__ == "__main__":
    main()
