"""The EAGLE-3 draft head in PyTorch, as specdec's C++ forward computes it
(src/model/eagle3_forward.h) and as the released Hugging Face layout stores
it, with the training-time unroll (EAGLE-3's "training-time test").

One row: token t at position pos with hidden input g (H):
    x   = [input_layernorm(embed(t)) ; hidden_norm(g)]              (2H)
    h   = o_proj(attention(rope(q_proj x), rope(k_proj x), v_proj x)) + g
    out = h + down(silu(gate(post_norm(h))) * up(post_norm(h)))     "prenorm"
    logits = lm_head(norm(out))                          (draft vocabulary)
g = fc(features) for a row backed by the target, else the previous draft
row's prenorm output.

Unroll, by lanes: lane s starts at a real row (position s, features of s,
token s + 1); its step j >= 1 row sits at position s + j with token s + j + 1
and g = the lane's step j - 1 output, and sees the real rows 0..s plus its
own lane's rows 1..j, exactly what drafting j tokens after a verified prefix
ending at s + 1 sees. All lanes of a step run as one batch: a causal block
over the step-0 keys plus one "diagonal" key per earlier step.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, pos, theta: float):
    """Hugging Face llama's rotate_half RoPE. x (T, heads, d), pos (T,)."""
    d = x.shape[-1]
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = (pos.to(torch.float64)[:, None] * inv[None, :]).to(x.dtype)
    c, s = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


class Eagle3Head(nn.Module):
    def __init__(self, *, hidden: int, target_hidden: int, n_head: int, n_head_kv: int, n_ff: int,
                 draft_vocab: int, eps: float, rope_theta: float, embed: torch.Tensor):
        super().__init__()
        self.H, self.n_head, self.n_head_kv = hidden, n_head, n_head_kv
        self.hd = hidden // n_head
        self.rope_theta = rope_theta
        self.fc = nn.Linear(3 * target_hidden, hidden, bias=False)
        self.hidden_norm = RMSNorm(hidden, eps)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.q_proj = nn.Linear(2 * hidden, n_head * self.hd, bias=False)
        self.k_proj = nn.Linear(2 * hidden, n_head_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(2 * hidden, n_head_kv * self.hd, bias=False)
        self.o_proj = nn.Linear(n_head * self.hd, hidden, bias=False)
        self.gate_proj = nn.Linear(hidden, n_ff, bias=False)
        self.up_proj = nn.Linear(hidden, n_ff, bias=False)
        self.down_proj = nn.Linear(n_ff, hidden, bias=False)
        self.norm = RMSNorm(hidden, eps)
        self.lm_head = nn.Linear(hidden, draft_vocab, bias=False)
        # The target's token embeddings: frozen, not saved with the head.
        self.register_buffer("embed", embed, persistent=False)

    # The names of the released layout (model.safetensors), per parameter.
    @staticmethod
    def hf_names() -> dict[str, str]:
        m = {"fc.weight": "fc.weight", "norm.weight": "norm.weight", "lm_head.weight": "lm_head.weight"}
        for n in ("hidden_norm", "input_layernorm", "post_attention_layernorm"):
            m[f"{n}.weight"] = f"midlayer.{n}.weight"
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            m[f"{n}.weight"] = f"midlayer.self_attn.{n}.weight"
        for n in ("gate_proj", "up_proj", "down_proj"):
            m[f"{n}.weight"] = f"midlayer.mlp.{n}.weight"
        return m

    def load_hf(self, tensors: dict) -> None:
        """Loads released-layout tensors (numpy arrays by Hugging Face name)."""
        names = {hf: k for k, hf in self.hf_names().items()}
        state = {names[k]: torch.from_numpy(v.astype("float32")) for k, v in tensors.items() if k in names}
        self.load_state_dict(state, strict=True)

    def _qkv(self, tokens, g, pos):
        T = tokens.shape[0]
        x = torch.cat([self.input_layernorm(self.embed[tokens]), self.hidden_norm(g)], dim=-1)
        q = rope(self.q_proj(x).view(T, self.n_head, self.hd), pos, self.rope_theta)
        k = rope(self.k_proj(x).view(T, self.n_head_kv, self.hd), pos, self.rope_theta)
        v = self.v_proj(x).view(T, self.n_head_kv, self.hd)
        return q, k, v

    def _rest(self, att, g):
        h = self.o_proj(att.reshape(att.shape[0], -1)) + g
        hn = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(hn)) * self.up_proj(hn))

    def logits(self, prenorm):
        return self.lm_head(self.norm(prenorm))

    def unroll(self, feats, tokens, pos, seg, steps: int):
        """feats (T, 3Ht), tokens (T + steps) with tokens[i + 1] the token of the
        step-0 row i, pos/seg (T) position and sequence id of each row (packed
        sequences never see each other). Returns the prenorm outputs of each
        step, (steps + 1) tensors of (T, H): step j row of lane s predicts the
        target's distribution at position s + j + 1."""
        T = feats.shape[0]
        group = self.n_head // self.n_head_kv
        scale = 1.0 / math.sqrt(self.hd)
        idx = torch.arange(T)
        allowed = (idx[None, :] <= idx[:, None]) & (seg[None, :] == seg[:, None])  # (T, T) query, key
        g = self.fc(feats)
        keys, vals, outs = [], [], []
        for j in range(steps + 1):
            q, k, v = self._qkv(tokens[1 + j:1 + j + T], g, pos + j)
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            keys.append(k)
            vals.append(v)
            # Causal block over the real rows (step 0), then the lane's own rows 1..j.
            s0 = torch.einsum("qhd,khd->hqk", q, keys[0]) * scale
            s0 = s0.masked_fill(~allowed[None], float("-inf"))
            diag = [torch.einsum("thd,thd->ht", q, keys[i]) * scale for i in range(1, j + 1)]
            s = torch.cat([s0] + [d[:, :, None] for d in diag], dim=-1)
            p = torch.softmax(s, dim=-1)
            att = torch.einsum("hqk,khd->qhd", p[:, :, :T], vals[0])
            for i in range(1, j + 1):
                att = att + p[:, :, T + i - 1].transpose(0, 1)[:, :, None] * vals[i]
            out = self._rest(att, g)
            outs.append(out)
            # The next step's row of lane s is fed this step's output of lane s.
            g = out
        return outs
