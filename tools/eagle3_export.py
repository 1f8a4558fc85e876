#!/usr/bin/env python3
"""Writes a trained head (tools/eagle3_train.py's checkpoint) in the released
Hugging Face layout that `specdec --eagle3 DIR` loads, the same loader a
downloaded head goes through: DIR/config.json (LlamaForCausalLMEagle3,
draft_vocab_size, target_hidden_size) and DIR/model.safetensors (fc.weight,
midlayer.*, norm.weight, lm_head.weight, d2t int64 offsets with target id =
i + d2t[i], t2d bool mask over the target vocabulary). Matrices are stored
as float16 (half the file, and the engine's F16 kernels), norms float32.

    .venv-train/bin/python tools/eagle3_export.py CHECKPOINT DIR [--f32]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eagle3_head_torch import Eagle3Head  # noqa: E402


def head_tensors(state: dict, cfg: dict, draft_ids: np.ndarray, n_vocab: int, f16: bool) -> dict:
    names = Eagle3Head.hf_names()
    out = {}
    for k, hf in names.items():
        a = state[k].detach().float().numpy()
        out[hf] = a.astype(np.float16) if (f16 and a.ndim == 2) else a.astype(np.float32)
    ids = np.asarray(draft_ids, dtype=np.int64)
    out["d2t"] = ids - np.arange(len(ids), dtype=np.int64)
    t2d = np.zeros(n_vocab, dtype=bool)
    t2d[ids] = True
    out["t2d"] = t2d
    return out


def hf_config(cfg: dict, n_vocab: int) -> dict:
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": cfg["hidden"],
        "target_hidden_size": cfg["target_hidden"],
        "num_attention_heads": cfg["n_head"],
        "num_key_value_heads": cfg["n_head_kv"],
        "intermediate_size": cfg["n_ff"],
        "vocab_size": n_vocab,
        "draft_vocab_size": cfg["draft_vocab"],
        "rms_norm_eps": cfg["eps"],
        "rope_theta": cfg["rope_theta"],
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        # Provenance (not read by loaders): what it was trained for and on.
        "specdec_training": {"target": cfg.get("model"), "feature_layers": cfg.get("feature_layers"),
                             "ttt": cfg.get("ttt")},
    }


def write_head(state: dict, cfg: dict, draft_ids: np.ndarray, n_vocab: int, out_dir: Path, f16: bool = True):
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = head_tensors(state, cfg, draft_ids, n_vocab, f16)
    # Written beside, then renamed: a loader never sees half a file.
    tmp = out_dir / "model.safetensors.tmp"
    save_file(tensors, str(tmp))
    os.chmod(tmp, 0o644)  # safetensors creates it owner-only; a head is meant to be shared
    os.replace(tmp, out_dir / "model.safetensors")
    (out_dir / "config.json").write_text(json.dumps(hf_config(cfg, n_vocab), indent=1))


def export(ckpt_path: Path, out_dir: Path, f16: bool = True) -> None:
    ck = torch.load(ckpt_path)
    from eagle3_target import load_target
    n_vocab = load_target(ck["config"]["model"]).n_vocab
    write_head(ck["head"], ck["config"], ck["draft_ids"].numpy(), n_vocab, out_dir, f16)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--f32", action="store_true", help="store matrices as float32")
    args = ap.parse_args(argv)
    export(args.checkpoint, args.out, f16=not args.f32)
    print(f"[export] {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
