#!/usr/bin/env python3
"""llama.cpp baselines for `specdec bench --llamacpp` (via llama-cpp-python).

Input (JSON, written by specdec bench):
  {"model": PATH, "threads": [..], "n_ctx": N,
   # AR micro-mode (issue #4):
   "micro": {"tokens": [ids], "prefill": P, "decode": D, "reps": R},
   # or the prompt-set mode (issue #7):
   "turns": [{"conv", "turn", "tokens"}], "n_predict", "temps", "ignore_eos",
   "eog": [ids], "seed", "warmup", "reps", "pld_num_pred_tokens", "pld_max_ngram_size"}

Output (JSON):
  micro: {"micro": [{"threads", "prefill_tok_s", "decode_tok_s", ...}], ...}
  prompts: {"runs": [{"method": "llamacpp-ar"|"llamacpp-pld", "threads", "temp",
             "records": [{"conv", "turn", "n_prompt", "n_generated", "prefill_s",
                          "decode_s", "rep_decode_s", "finish_reason"}]}], ...}

Timing: micro prefill = llama.eval(P tokens) after a reset; micro decode = D
single-token llama.eval calls with fixed tokens (no sampling, same tokens as
specdec).  Prompt mode: Llama.generate() on the exact prompt token ids specdec
used; prefill = time to the first token, decode = first token to last
(decode tok/s = generated / decode, as specdec).  --checkpoint FILE makes the
prompt mode resumable: each finished record is appended to FILE at once, and
records already there are reused instead of run again.  Prompt-lookup speculation is
llama_cpp.llama_speculative.LlamaPromptLookupDecoding passed as draft_model.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def log(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def load(model: str, threads: int, n_ctx: int, draft=None):
    import llama_cpp

    return llama_cpp.Llama(
        model_path=model,
        n_ctx=n_ctx,
        n_batch=512,
        n_threads=threads,
        n_threads_batch=threads,
        draft_model=draft,
        logits_all=False,
        verbose=False,
    )


def run_micro(inp: dict, quiet: bool) -> dict:
    m = inp["micro"]
    toks = m["tokens"]
    P, D, reps = m["prefill"], m["decode"], max(1, m.get("reps", 1))
    rows = []
    for t in inp["threads"]:
        llm = load(inp["model"], t, max(inp.get("n_ctx", 0), P + D + 16))
        llm.reset()
        llm.eval(toks[:16])  # warm-up
        pre, dec = [], []
        for _ in range(reps):
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(toks[:P])
            pre.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for i in range(D):
                llm.eval([toks[P + i]])
            dec.append(time.perf_counter() - t0)
            log(quiet, f"llama.cpp micro t={t}: prefill {P / pre[-1]:.1f} tok/s, decode {D / dec[-1]:.1f} tok/s")
        p, d = statistics.median(pre), statistics.median(dec)
        rows.append({"engine": "llama.cpp", "threads": t, "prefill_tokens": P, "prefill_s": p,
                     "prefill_rep_s": pre, "prefill_tok_s": P / p, "decode_tokens": D, "decode_s": d,
                     "decode_rep_s": dec, "decode_tok_s": D / d, "n_batch": 512})
        del llm
    return {"micro": rows}


def generate_turn(llm, tokens, n_predict, temp, eog, ignore_eos, seed):
    llm.reset()
    llm.set_seed(seed)
    n = 0
    t_first = None
    finish = "length"
    t0 = time.perf_counter()
    kw = dict(temp=temp, top_k=0 if temp > 0 else 1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True)
    for tok in llm.generate(tokens, **kw):
        now = time.perf_counter()
        if t_first is None:
            t_first = now
        if not ignore_eos and tok in eog:
            finish = "stop"
            break
        n += 1
        if n >= n_predict:
            break
        if llm.n_tokens + 1 >= llm.n_ctx():
            break
    t_end = time.perf_counter()
    if t_first is None:
        t_first = t_end
    return n, t_first - t0, t_end - t_first, finish


def read_checkpoint(path: str | None) -> dict:
    """(method, threads, temp, conv, turn) -> record, from a JSONL checkpoint
    (a torn last line, from a run killed mid-write, is ignored)."""
    done = {}
    if not path:
        return done
    try:
        with open(path) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
    except FileNotFoundError:
        return done
    for i, line in enumerate(lines):
        try:
            j = json.loads(line)
        except json.JSONDecodeError:
            if i + 1 == len(lines):
                break
            raise
        r = j["rec"]
        done[(j["method"], j["threads"], j["temp"], r["conv"], r["turn"])] = r
    return done


def run_prompts(inp: dict, quiet: bool, checkpoint: str | None = None) -> dict:
    """Every turn for each method, thread count and temperature. With a
    checkpoint, each finished record is appended to it at once and the
    records it already holds are not run again (a stopped run resumes)."""
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    runs = []
    eog = set(inp.get("eog", []))
    turns = inp["turns"]
    reps = max(1, inp.get("reps", 1))
    done = read_checkpoint(checkpoint)
    for t in inp["threads"]:
        for method in ("llamacpp-ar", "llamacpp-pld"):
            draft = None
            extra = {}
            if method == "llamacpp-pld":
                k = int(inp.get("pld_num_pred_tokens", 10))
                g = int(inp.get("pld_max_ngram_size", 2))
                draft = LlamaPromptLookupDecoding(max_ngram_size=g, num_pred_tokens=k)
                extra = {"num_pred_tokens": k, "max_ngram_size": g}
            pending = any((method, t, temp, tr["conv"], tr["turn"]) not in done
                          for temp in inp["temps"] for tr in turns)
            llm = load(inp["model"], t, inp["n_ctx"], draft) if pending else None
            for temp in inp["temps"]:
                todo = [tr for tr in turns if (method, t, temp, tr["conv"], tr["turn"]) not in done]
                for _ in range(int(inp.get("warmup", 0)) if todo else 0):
                    generate_turn(llm, turns[0]["tokens"], inp["n_predict"], temp, eog, inp["ignore_eos"], inp["seed"])
                recs = []
                for i, tr in enumerate(turns):
                    key = (method, t, temp, tr["conv"], tr["turn"])
                    if key in done:
                        recs.append(done[key])
                        continue
                    decs, pres = [], []
                    for _ in range(reps):
                        n, pre, dec, fin = generate_turn(llm, tr["tokens"], inp["n_predict"], temp, eog,
                                                         inp["ignore_eos"], inp["seed"])
                        decs.append(dec)
                        pres.append(pre)
                    d = statistics.median(decs)
                    recs.append({"conv": tr["conv"], "turn": tr["turn"], "n_prompt": len(tr["tokens"]),
                                 "n_generated": n, "prefill_s": statistics.median(pres), "decode_s": d,
                                 "rep_decode_s": decs, "finish_reason": fin})
                    if checkpoint:
                        with open(checkpoint, "a") as f:
                            f.write(json.dumps({"method": method, "threads": t, "temp": temp, **extra,
                                                "rec": recs[-1]}) + "\n")
                    log(quiet, f"[{i + 1}/{len(turns)}] {method} t={t} T={temp}: "
                               f"{n / d if d > 0 else 0:.1f} tok/s")
                runs.append({"method": method, "threads": t, "temp": temp, **extra, "records": recs})
            if llm is not None:
                del llm
    return {"runs": runs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--checkpoint", help="prompt mode: JSONL of finished records, appended as they finish; "
                                         "records already in it are not run again")
    args = ap.parse_args(argv)
    with open(args.input) as f:
        inp = json.load(f)
    import llama_cpp

    out = run_micro(inp, args.quiet) if "micro" in inp else run_prompts(inp, args.quiet, args.checkpoint)
    out["llama_cpp_python_version"] = llama_cpp.__version__
    out["model"] = inp["model"]
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
