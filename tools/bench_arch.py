#!/usr/bin/env python3
"""Decode and prefill speed of every architecture specdec runs, next to llama.cpp's,
on random-weight GGUF files of a realistic size (0.3-1.5 B parameters, shaped
like a released model of the family, in the family's common Q4_K_M mix).

No packaged weights exist for most of these families, so the files are
written by tools/random_gguf.py (the writer of the architecture parity tests)
into OUT/files and kept there for the next run. Each file then goes through
`specdec bench --method ar --llamacpp` (AR micro-mode: prefill, decode, the
machine's read-bandwidth probe and llama.cpp on the same file and threads,
measured in the same run), and the figures are gathered into one table
(OUT/bench_arch.md, and OUT/bench_arch.json with every run's bench.json).

    .venv/bin/python tools/bench_arch.py [--arch qwen3,qwen3moe] [-t 2] [--out build/bench_arch]

Random weights read the same bytes and do the same arithmetic as trained
ones; only the generated tokens differ (which AR micro-mode does not use).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
from random_gguf import ArchSpec, write_model  # noqa: E402

# Shapes of released models, some trimmed in depth or vocabulary to keep
# files near 0.5-1 GB (noted per entry); the attention and FFN shapes are the
# released ones.
SPECS = {
    # Llama 3.2 1B (vocabulary 128256 -> 32000: the LM head stays the largest matrix)
    "llama3": ArchSpec("llama", pre="llama-bpe", n_embd=2048, n_head=32, n_head_kv=8, head_dim=64, n_ff=8192,
                       n_layer=16, rope_base=500000.0, tied=True, extra_vocab=32000 - 259, ctx_len=4096),
    # Qwen3 0.6B
    "qwen3": ArchSpec("qwen3", add_bos=False, n_embd=1024, n_head=16, n_head_kv=8, head_dim=128, n_ff=3072,
                      n_layer=28, qk_norm="head", tied=True, extra_vocab=151936 - 259, ctx_len=4096),
    # Mistral 7B's attention and FFN widths, 4 of 32 layers
    "mistral": ArchSpec("llama", vocab="spm", n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336,
                        n_layer=4, rope_base=1e6, extra_vocab=32000 - 261, ctx_len=4096),
    # SmolLM3 3B's widths, 12 of 36 layers (every fourth without RoPE)
    "smollm3": ArchSpec("smollm3", pre="llama-bpe", n_embd=2048, n_head=16, n_head_kv=4, head_dim=128,
                        n_ff=11008, n_layer=12, tied=True, rope_base=5e6, extra_vocab=128256 - 259, ctx_len=4096),
    # OLMo 2 1B (vocabulary 100352)
    "olmo2": ArchSpec("olmo2", pre="dbrx", n_embd=2048, n_head=16, n_head_kv=16, head_dim=128, n_ff=8192,
                      n_layer=16, rope_base=500000.0, qk_norm="full", pre_norms=False, post_norms=True,
                      extra_vocab=100352 - 259, ctx_len=4096),
    # Phi-3 mini's widths, 8 of 32 layers
    "phi3": ArchSpec("phi3", vocab="spm", n_embd=3072, n_head=32, n_head_kv=32, head_dim=96, n_ff=8192,
                     n_layer=8, rope_base=10000.0, fused=True, extra_vocab=32064 - 262, ctx_len=4096),
    # Gemma 2 2B's widths, 12 of 26 layers, vocabulary 256000 -> 64000
    "gemma2": ArchSpec("gemma2", vocab="spm", n_embd=2304, n_head=8, n_head_kv=4, head_dim=256, n_ff=9216,
                       n_layer=12, rope_base=10000.0, post_norms=True, tied=True, attn_softcap=50.0,
                       final_softcap=30.0, sliding_window=4096, extra_vocab=64000 - 261, ctx_len=8192),
    # Qwen3-30B-A3B's expert shape (128 experts of 768, 8 used) at Qwen3 0.6B's
    # width and 12 layers with 64 experts: 8 of 64 experts read per token
    "qwen3moe": ArchSpec("qwen3moe", add_bos=False, n_embd=1024, n_head=16, n_head_kv=4, head_dim=128,
                         n_layer=12, qk_norm="head", n_expert=64, n_expert_used=8, n_ff_exp=768, tied=True,
                         extra_vocab=151936 - 259, ctx_len=4096),
    # Qwen3.5 0.8B: 18 gated DeltaNet layers (16 q/k and 16 v heads of 128)
    # and 6 gated full-attention layers (8 heads of 256, 2 KV heads, a quarter
    # rotated), vocabulary 248320
    "qwen35": ArchSpec("qwen35", pre="qwen35", add_bos=False, n_embd=1024, n_head=8, n_head_kv=2, head_dim=256,
                       n_ff=3584, n_layer=24, n_rot=64, rope_sections=(11, 11, 10, 0), rope_base=1e7, ssm_state=128,
                       ssm_k_heads=16, ssm_v_heads=16, tied=True, extra_vocab=248320 - 259, ctx_len=4096),
    # Qwen3.5 35B-A3B's layer widths (hidden 2048; DeltaNet 16 q/k and 32 v
    # heads of 128; attention 16 heads of 256, 2 KV heads; experts of 512, 8
    # routed and one shared) with 32 of its 256 experts, 8 of its 40 layers and
    # tied embeddings
    "qwen35moe": ArchSpec("qwen35moe", pre="qwen35", add_bos=False, n_embd=2048, n_head=16, n_head_kv=2,
                          head_dim=256, n_ff=512, n_layer=8, n_rot=64, rope_sections=(11, 11, 10, 0), rope_base=1e7,
                          ssm_state=128, ssm_k_heads=16, ssm_v_heads=32, n_expert=32, n_expert_used=8, n_ff_exp=512,
                          tied=True, extra_vocab=248320 - 259, ctx_len=4096),
}


def params(spec: ArchSpec, n_vocab: int) -> int:
    E = spec.n_embd
    # qwen35: a gated query (twice the rows); DeltaNet layers: q/k/v in, the
    # output gate, beta and alpha, and the output projection.
    attn = E * ((4 if spec.ssm_state else 2) * spec.q_dim + 2 * spec.kv_dim) - (E * spec.q_dim if spec.ssm_state else 0)
    value = spec.ssm_v_heads * spec.ssm_state
    recurrent = E * (spec.ssm_conv_dim + 2 * value + 2 * spec.ssm_v_heads)
    ffn = 3 * E * (spec.n_ff_exp * spec.n_expert if spec.n_expert else spec.n_ff)
    if spec.n_expert and spec.ssm_state:
        ffn += 3 * E * spec.n_ff  # qwen35moe's shared expert
    mixing = sum(recurrent if spec.is_recurrent(i) else attn for i in range(spec.n_layer))
    return mixing + spec.n_layer * ffn + n_vocab * E * (1 if spec.tied else 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default=",".join(SPECS), help="comma-separated: " + ",".join(SPECS))
    ap.add_argument("--mix", default="Q4_K_M", help="file type (tools/random_gguf.py tensor_type)")
    ap.add_argument("-t", "--threads", default="2")
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench_arch")
    ap.add_argument("--specdec", type=Path, default=Path(os.environ.get("SPECDEC_BIN", REPO / "build/release/specdec")))
    args = ap.parse_args()
    archs = [a for a in args.arch.split(",") if a]
    unknown = [a for a in archs if a not in SPECS]
    if unknown:
        ap.error(f"unknown architecture(s) {','.join(unknown)}; known: {','.join(SPECS)}")
    if not args.specdec.exists():
        ap.error(f"{args.specdec} is not built (scripts/build.sh release)")
    (args.out / "files").mkdir(parents=True, exist_ok=True)

    rows, runs = [], {}
    for arch in archs:
        spec = SPECS[arch]
        path = args.out / "files" / f"{arch}-{args.mix}.gguf"
        if not path.exists():
            t0 = time.time()
            tmp = path.with_suffix(".part")
            write_model(tmp, spec, args.mix, seed=1)
            tmp.rename(path)
            print(f"{arch}: wrote {path} ({path.stat().st_size / 2**20:.0f} MiB, {time.time() - t0:.0f} s)", flush=True)
        run_dir = args.out / arch
        cmd = [str(args.specdec), "bench", "-m", str(path), "--method", "ar", "--prefill", str(args.prefill),
               "--decode", str(args.decode), "-t", args.threads, "--llamacpp", "--out-dir", str(run_dir)]
        print(f"{arch}: {' '.join(cmd)}", flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr[-2000:], file=sys.stderr)
            rows.append({"arch": arch, "error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"})
            continue
        bench = json.loads((run_dir / "bench.json").read_text())
        runs[arch] = bench
        lc = {m["threads"]: m for m in bench.get("llamacpp", {}).get("micro", [])}
        for m in bench["micro"]:
            ref = lc.get(m["threads"], {})
            n_vocab = spec.extra_vocab + (261 if spec.vocab == "spm" else 259) + (1 if spec.arch == "phi3" else 0)
            rows.append({
                "arch": arch, "params_m": round(params(spec, n_vocab) / 1e6), "file_mib": round(path.stat().st_size / 2**20),
                "threads": m["threads"], "prefill": m["prefill_tok_s"], "prefill_llamacpp": ref.get("prefill_tok_s"),
                "decode": m["decode_tok_s"], "decode_llamacpp": ref.get("decode_tok_s"),
                "roofline": m.get("decode_roofline_fraction"), "kernels": m.get("kernels", {}),
            })

    def ratio(a, b):
        return f"{a / b:.2f}" if a and b else "n/a"

    lines = ["| arch | params (M, all experts) | file MiB | threads | prefill tok/s | llama.cpp | ratio | decode tok/s | llama.cpp | ratio | % roofline | kernels |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['arch']} | | | | error: {r['error']} | | | | | | | |")
            continue
        lc_p, lc_d = r["prefill_llamacpp"], r["decode_llamacpp"]
        lines.append(
            f"| {r['arch']} | {r['params_m']} | {r['file_mib']} | {r['threads']} | {r['prefill']:.1f} | "
            f"{lc_p:.1f} | {ratio(r['prefill'], lc_p)} | {r['decode']:.1f} | {lc_d:.1f} | {ratio(r['decode'], lc_d)} | "
            f"{100 * r['roofline']:.0f} | {', '.join(f'{k} {v}' for k, v in r['kernels'].items())} |"
            if lc_p and lc_d else
            f"| {r['arch']} | {r['params_m']} | {r['file_mib']} | {r['threads']} | {r['prefill']:.1f} | n/a | n/a | "
            f"{r['decode']:.1f} | n/a | n/a | {100 * (r['roofline'] or 0):.0f} | |")
    table = "\n".join(lines)
    print(table)
    (args.out / "bench_arch.md").write_text(
        f"# specdec vs llama.cpp on random-weight files ({args.mix}, prefill {args.prefill}, decode {args.decode})\n\n"
        + table + "\n")
    (args.out / "bench_arch.json").write_text(json.dumps({"rows": rows, "runs": runs}, indent=1))
    print(f"wrote {args.out / 'bench_arch.md'} and bench_arch.json")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
