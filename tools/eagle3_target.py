"""What training an EAGLE-3 head needs of its target, read from the GGUF with
the `gguf` package (dequantized to float32): shapes, RMSNorm epsilon, RoPE
base, the token embeddings (the head's frozen input table) and output_norm
plus the LM head (`output`, or the tied `token_embd`), which turn the stored
last hidden state into the target's next-token logits over the draft
vocabulary. Llama-style targets only (llama, qwen2, ...): no logit
soft-capping or embedding scale is applied."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

import gguf
from gguf.quants import dequantize

REPO = Path(__file__).resolve().parent.parent


def resolve_model(model: str) -> Path:
    p = Path(model)
    if p.suffix == ".gguf" and p.exists():
        return p
    man = json.loads((REPO / "models/manifest.json").read_text())
    if model not in man["models"]:
        raise SystemExit(f"error: '{model}' is neither a GGUF file nor a model in models/manifest.json")
    return REPO / "models" / man["models"][model]["file"]


@dataclass
class TargetInfo:
    path: Path
    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    eps: float
    rope_theta: float
    embed: torch.Tensor            # (n_vocab, n_embd)
    output_norm: torch.Tensor      # (n_embd,)
    output: torch.Tensor           # (n_vocab, n_embd); the same tensor as embed when tied
    draft_out: torch.Tensor = field(default=None)  # (draft_vocab, n_embd)

    def set_draft(self, ids: np.ndarray) -> None:
        self.draft_out = self.output[torch.from_numpy(np.asarray(ids, dtype=np.int64))].contiguous()

    def draft_logits(self, h: torch.Tensor) -> torch.Tensor:
        """The target's logits restricted to the draft vocabulary, from last-layer outputs h (n, E)."""
        hn = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * self.output_norm
        return hn @ self.draft_out.T


def _tensor(r: gguf.GGUFReader, name: str) -> np.ndarray | None:
    for t in r.tensors:
        if t.name == name:
            return np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)  # writable: torch shares it
    return None


def load_target(model: str) -> TargetInfo:
    path = resolve_model(model)
    r = gguf.GGUFReader(str(path))

    def field_(key, default=None):
        if key not in r.fields:
            if default is None:
                raise SystemExit(f"error: {path} has no '{key}'")
            return default
        f = r.fields[key]
        v = f.parts[f.data[0]]
        return v[0] if len(v) == 1 else v

    arch = bytes(field_("general.architecture")).decode()
    n_embd = int(field_(f"{arch}.embedding_length"))
    embed = _tensor(r, "token_embd.weight").reshape(-1, n_embd)
    out = _tensor(r, "output.weight")
    out = embed if out is None else out.reshape(-1, n_embd)
    emb_t = torch.from_numpy(embed)
    return TargetInfo(
        path=path, arch=arch,
        n_layer=int(field_(f"{arch}.block_count")), n_embd=n_embd,
        n_head=int(field_(f"{arch}.attention.head_count")),
        n_head_kv=int(field_(f"{arch}.attention.head_count_kv")),
        n_ff=int(field_(f"{arch}.feed_forward_length")),
        n_vocab=embed.shape[0],
        eps=float(field_(f"{arch}.attention.layer_norm_rms_epsilon")),
        rope_theta=float(field_(f"{arch}.rope.freq_base", 10000.0)),
        embed=emb_t,
        output_norm=torch.from_numpy(_tensor(r, "output_norm.weight").reshape(-1)),
        output=emb_t if out is embed else torch.from_numpy(out),
    )
