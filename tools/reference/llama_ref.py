#!/usr/bin/env python3
"""Independent reference harness for specdec, over llama.cpp (llama-cpp-python).

For a GGUF model and a list of prompts it produces, as JSON:
  (a) tokenizations (token ids, per-token pieces, detokenization round trip),
  (b) the logits for every prompt position (full rows, or top-k per row),
  (c) greedy continuations of N tokens: argmax over the raw logits after each
      low-level ``eval`` (no sampler involved), with the top-1/top-2 margin of
      every step so near-ties can be told apart from real divergences.

llama.cpp's defaults are kept (KV cache type f16, no flash attention, CPU only,
mmap); the llama_cpp version and every setting used are recorded in the output.

CLI (see tools/reference/README.md):
    python3 tools/reference/llama_ref.py {tokenize,logits,greedy,all}
        --model PATH|NAME [--prompt TEXT ...] [--prompts-file FILE] --out FILE
        [--n-tokens N] [--logits full|topk|none] [--top-k K] [--npz FILE]
        [--n-ctx N] [--n-threads N] [--n-batch N] [--no-add-special] [--parse-special]
        [--no-stop-at-eos]

--model accepts a path or a model name from models/manifest.json.
--prompts-file accepts JSONL (objects with "prompt", "text" or "turns" (the first
turn is used, or all turns joined with --join-turns SEP)) or plain text (one prompt
per line).

Python use:
    from llama_ref import load_model, tokenize, prompt_logits, greedy, run
    llm = load_model("models/smollm2-135m-instruct-q4_1.gguf")
    ids = tokenize(llm, "Hello")
    rows = prompt_logits(llm, ids)           # numpy [len(ids), n_vocab] float32
    out = greedy(llm, ids, 16)               # {"tokens": [...], "text": ..., ...}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = Path(os.environ.get("SPECDEC_MODELS_DIR", REPO_ROOT / "models"))

DEFAULTS = {
    "n_ctx": 2048,
    "n_batch": 512,
    "n_threads": 2,
    "seed": 0,
    "add_special": True,
    "parse_special": False,
    "stop_at_eos": True,
}


def _import_llama():
    try:
        import llama_cpp  # noqa: F401
    except ImportError as e:  # pragma: no cover
        raise SystemExit(
            "error: llama_cpp is not installed (pip install -r tools/requirements.txt)"
        ) from e
    return llama_cpp


def resolve_model(model: str) -> Path:
    """A path, or a model name in models/manifest.json (or models/<name>.gguf)."""
    p = Path(model)
    if p.exists():
        return p
    cand = MODELS_DIR / f"{model}.gguf"
    if cand.exists():
        return cand
    man = MODELS_DIR / "manifest.json"
    if man.exists():
        entry = json.loads(man.read_text()).get("models", {}).get(model)
        if entry and (MODELS_DIR / entry["file"]).exists():
            return MODELS_DIR / entry["file"]
    raise SystemExit(
        f"error: model '{model}' not found (not a file, not in {MODELS_DIR}); "
        f"run: python3 tools/fetch_models.py {model}"
    )


def model_sha256(path: Path) -> str:
    """From models/manifest.json when it lists this file with the same size, else computed."""
    path = Path(path).resolve()
    man = path.parent / "manifest.json"
    if man.exists():
        try:
            for e in json.loads(man.read_text()).get("models", {}).values():
                if (path.parent / e["file"]).resolve() == path and e.get("size") == path.stat().st_size:
                    return e["sha256"]
        except (ValueError, KeyError):
            pass
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def load_model(path, n_ctx: int = DEFAULTS["n_ctx"], n_threads: int = DEFAULTS["n_threads"],
               n_batch: int = DEFAULTS["n_batch"], seed: int = DEFAULTS["seed"]):
    """A llama_cpp.Llama with logits for every position (logits_all=True), CPU only."""
    llama_cpp = _import_llama()
    return llama_cpp.Llama(
        model_path=str(path),
        logits_all=True,
        n_ctx=n_ctx,
        n_batch=n_batch,
        n_ubatch=n_batch,
        n_threads=n_threads,
        n_threads_batch=n_threads,
        n_gpu_layers=0,
        seed=seed,
        verbose=False,
    )


def tokenize(llm, text: str, add_special: bool = DEFAULTS["add_special"],
             parse_special: bool = DEFAULTS["parse_special"]) -> list[int]:
    """llama_tokenize(text, add_special, parse_special): add_special adds BOS/EOS as the
    model's metadata says (tokenizer.ggml.add_bos_token ...)."""
    return list(llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=parse_special))


def detokenize(llm, tokens, special: bool = False) -> str:
    return llm.detokenize(list(tokens), special=special).decode("utf-8", errors="replace")


def token_pieces(llm, tokens) -> list[str]:
    return [llm.detokenize([t], special=True).decode("utf-8", errors="backslashreplace") for t in tokens]


def prompt_logits(llm, tokens) -> np.ndarray:
    """Logits [len(tokens), n_vocab] (float32) after evaluating tokens from an empty cache."""
    if not tokens:
        return np.zeros((0, llm.n_vocab()), dtype=np.float32)
    llm.reset()  # n_tokens = 0; eval() then drops the KV cache from position 0
    llm.eval(list(tokens))
    return np.array(llm.scores[: len(tokens)], dtype=np.float32, copy=True)


def is_eog(llm, tok: int) -> bool:
    """llama_vocab_is_eog: EOS, EOT and the model's other end-of-generation tokens."""
    llama_cpp = _import_llama()
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    return bool(llama_cpp.llama_vocab_is_eog(vocab, tok))


def _top2(row: np.ndarray) -> tuple[int, float, float]:
    i = int(np.argmax(row))
    best = float(row[i])
    tmp = row.copy()
    tmp[i] = -np.inf
    second = float(tmp.max()) if tmp.size > 1 else float("-inf")
    return i, best, best - second


def greedy(llm, tokens, n_tokens: int, stop_at_eos: bool = DEFAULTS["stop_at_eos"]) -> dict:
    """Greedy continuation by argmax over raw logits, one low-level eval per token."""
    tokens = list(tokens)
    llm.reset()
    llm.eval(tokens)
    out, margins, top_logits = [], [], []
    stopped = "length"
    for _ in range(n_tokens):
        row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        tok, best, margin = _top2(row)
        out.append(tok)
        margins.append(margin)
        top_logits.append(best)
        if stop_at_eos and is_eog(llm, tok):
            stopped = "eos"
            break
        if llm.n_tokens + 1 > llm.n_ctx():
            stopped = "context"
            break
        llm.eval([tok])
    return {
        "n_requested": n_tokens,
        "tokens": out,
        "text": detokenize(llm, out),
        "stop_reason": stopped,
        "top_logit": top_logits,
        "top2_margin": margins,
    }


def greedy_split(ours: list[int], ref: dict) -> tuple[int, float] | None:
    """Where a greedy continuation `ours` first parts from llama.cpp's (`ref`, as
    greedy() returns it), with llama.cpp's top-1/top-2 margin at that step, so a
    test can tell a near-tie from a real divergence; None when they are equal."""
    b = ref["tokens"]
    split = next((i for i in range(min(len(ours), len(b))) if ours[i] != b[i]), None)
    if split is None:
        # One is a prefix of the other: a length difference is no near-tie.
        return None if len(ours) == len(b) else (min(len(ours), len(b)), float("inf"))
    return split, ref["top2_margin"][split]


def llama_cpp_info() -> dict:
    llama_cpp = _import_llama()
    info = {"llama_cpp_python_version": getattr(llama_cpp, "__version__", None)}
    try:
        info["system_info"] = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    except Exception:  # pragma: no cover
        pass
    return info


def run(model_path, prompts: list[str], what=("tokenize", "logits", "greedy"), n_tokens: int = 32,
        logits_mode: str = "full", top_k: int = 20, npz: str | None = None,
        n_ctx: int = DEFAULTS["n_ctx"], n_threads: int = DEFAULTS["n_threads"],
        n_batch: int = DEFAULTS["n_batch"], seed: int = DEFAULTS["seed"],
        add_special: bool = DEFAULTS["add_special"], parse_special: bool = DEFAULTS["parse_special"],
        stop_at_eos: bool = DEFAULTS["stop_at_eos"]) -> dict:
    """Run the requested parts for every prompt; returns the JSON-ready result."""
    model_path = Path(model_path)
    t0 = time.time()
    llm = load_model(model_path, n_ctx=n_ctx, n_threads=n_threads, n_batch=n_batch, seed=seed)
    doc = {
        "tool": "specdec tools/reference/llama_ref.py",
        "format_version": 1,
        "reference": llama_cpp_info(),
        "model": {
            "path": str(model_path),
            "file": model_path.name,
            "sha256": model_sha256(model_path),
            "n_vocab": llm.n_vocab(),
            "n_ctx_train": llm._model.n_ctx_train() if hasattr(llm, "_model") else None,
            "bos_token_id": llm.token_bos(),
            "eos_token_id": llm.token_eos(),
        },
        "settings": {
            "n_ctx": n_ctx, "n_batch": n_batch, "n_ubatch": n_batch, "n_threads": n_threads,
            "seed": seed, "logits_all": True, "n_gpu_layers": 0, "type_k": "default (f16)",
            "type_v": "default (f16)", "flash_attn": False, "use_mmap": True,
            "add_special": add_special, "parse_special": parse_special,
            "greedy": "argmax over raw logits after each llama_decode; no sampler",
            "stop_at_eos": stop_at_eos, "n_tokens": n_tokens if "greedy" in what else None,
            "logits": logits_mode if "logits" in what else None,
            "top_k": top_k if ("logits" in what and logits_mode == "topk") else None,
        },
        "results": [],
    }
    arrays = {}
    for i, text in enumerate(prompts):
        ids = tokenize(llm, text, add_special, parse_special)
        if len(ids) + (n_tokens if "greedy" in what else 0) > n_ctx:
            raise SystemExit(f"error: prompt {i} needs more than n_ctx={n_ctx} tokens; raise --n-ctx")
        res = {"index": i, "prompt": text, "n_prompt_tokens": len(ids)}
        res["tokens"] = ids
        if "tokenize" in what:
            res["pieces"] = token_pieces(llm, ids)
            detok = detokenize(llm, ids)
            res["detokenized"] = detok
            res["roundtrip_equal"] = detok == text
        if "logits" in what and logits_mode != "none":
            rows = prompt_logits(llm, ids)
            res["argmax"] = [int(x) for x in rows.argmax(axis=1)]
            if logits_mode == "full":
                res["logits"] = rows.astype(np.float64).tolist()
            elif logits_mode == "topk":
                k = min(top_k, rows.shape[1])
                idx = np.argsort(-rows, axis=1, kind="stable")[:, :k]
                res["logits_topk"] = [
                    [[int(j), float(rows[p, j])] for j in idx[p]] for p in range(rows.shape[0])
                ]
            if npz:
                arrays[f"logits_{i}"] = rows
        if "greedy" in what:
            res["greedy"] = greedy(llm, ids, n_tokens, stop_at_eos)
        doc["results"].append(res)
    if npz and arrays:
        np.savez_compressed(npz, **arrays)
        doc["logits_npz"] = str(npz)
    doc["elapsed_s"] = round(time.time() - t0, 3)
    llm.close() if hasattr(llm, "close") else None
    return doc


def read_prompts(prompts: list[str] | None, prompts_file: str | None, join_turns: str | None,
                 limit: int | None) -> list[str]:
    out = list(prompts or [])
    if prompts_file:
        with open(prompts_file, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    obj = line
                if isinstance(obj, str):
                    out.append(obj)
                elif isinstance(obj, dict) and "turns" in obj:
                    turns = obj["turns"]
                    out.append(join_turns.join(turns) if join_turns is not None else turns[0])
                elif isinstance(obj, dict) and ("prompt" in obj or "text" in obj):
                    out.append(obj.get("prompt", obj.get("text")))
                else:
                    raise SystemExit(f"error: cannot read a prompt from line: {line[:80]}")
    if limit is not None:
        out = out[:limit]
    if not out:
        raise SystemExit("error: no prompts (use --prompt or --prompts-file)")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="llama.cpp reference outputs (tokens, logits, greedy) as JSON")
    ap.add_argument("command", choices=["tokenize", "logits", "greedy", "all"])
    ap.add_argument("--model", required=True, help="GGUF path or model name from models/manifest.json")
    ap.add_argument("--prompt", action="append", help="a prompt (repeatable)")
    ap.add_argument("--prompts-file", help="JSONL (prompt/text/turns) or plain text lines")
    ap.add_argument("--join-turns", default=None, help="join all turns with this separator instead of taking the first")
    ap.add_argument("--limit", type=int, default=None, help="at most N prompts")
    ap.add_argument("--out", default="-", help="output JSON file ('-' = stdout)")
    ap.add_argument("--n-tokens", type=int, default=32, help="greedy continuation length")
    ap.add_argument("--logits", choices=["full", "topk", "none"], default="full")
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--npz", default=None, help="also save full float32 logits to this .npz (logits_<i>)")
    ap.add_argument("--n-ctx", type=int, default=DEFAULTS["n_ctx"])
    ap.add_argument("--n-threads", type=int, default=DEFAULTS["n_threads"])
    ap.add_argument("--n-batch", type=int, default=DEFAULTS["n_batch"])
    ap.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    ap.add_argument("--no-add-special", action="store_true", help="do not add BOS/EOS per model metadata")
    ap.add_argument("--parse-special", action="store_true", help="parse special-token text like <|im_start|>")
    ap.add_argument("--no-stop-at-eos", action="store_true", help="greedy: continue past end-of-generation tokens")
    args = ap.parse_args(argv)

    what = ("tokenize", "logits", "greedy") if args.command == "all" else (args.command,)
    prompts = read_prompts(args.prompt, args.prompts_file, args.join_turns, args.limit)
    doc = run(
        resolve_model(args.model), prompts, what=what, n_tokens=args.n_tokens,
        logits_mode=args.logits, top_k=args.top_k, npz=args.npz, n_ctx=args.n_ctx,
        n_threads=args.n_threads, n_batch=args.n_batch, seed=args.seed,
        add_special=not args.no_add_special, parse_special=args.parse_special,
        stop_at_eos=not args.no_stop_at_eos,
    )
    text = json.dumps(doc, ensure_ascii=False)
    if args.out == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
        sys.stderr.write(f"wrote {args.out} ({len(prompts)} prompts, {doc['elapsed_s']} s)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
