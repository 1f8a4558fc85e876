#!/usr/bin/env python3
"""llama.cpp baselines for `specdec bench --llamacpp` (via llama-cpp-python).

Input (JSON, written by specdec bench):
  {"model": PATH, "threads": [..], "n_ctx": N,
   # AR micro-mode (issue #4):
   "micro": {"tokens": [ids], "prefill": P, "decode": D, "reps": R,
             "forward_sizes": [N, ..], "forward_reps": R2},  # sizes optional
   # or the prompt-set mode (issue #7):
   "turns": [{"conv", "turn", "tokens"}], "n_predict", "temps", "ignore_eos",
   "eog": [ids], "seed", "warmup", "reps", "pld_num_pred_tokens", "pld_max_ngram_size",
   # optional: llama.cpp's own speculative types, run by its example "spec_bin":
   # "spec_methods": ["llamacpp-draft", "llamacpp-ngram-simple", ...]
   # (llamacpp_spec_example.SPEC_TYPES), "spec_bin": PATH,
   # and for llamacpp-draft "draft_model": PATH, "draft_num_pred_tokens": K,
   # for llamacpp-eagle3 "eagle3_head": PATH (a Hugging Face layout directory,
   # converted to "eagle3_gguf": PATH, or llama.cpp's eagle3 GGUF), "eagle3_num_pred_tokens": K}

Output (JSON):
  micro: {"micro": [{"threads", "prefill_tok_s", "decode_tok_s", ...,
                      # with "forward_sizes" in the input:
                      "forward": [{"n", "seconds", "rep_seconds", "ratio"}]}], ...}
  prompts: {"runs": [{"method": "llamacpp-ar"|"llamacpp-pld"|<a spec method>, "threads", "temp",
             "records": [{"conv", "turn", "n_prompt", "n_generated", "prefill_s",
                          "decode_s", "rep_decode_s", "finish_reason", "tokens",
                          "matches_llamacpp_ar",  # pld/spec, greedy: output == llamacpp-ar's
                          # spec methods: "drafted", "accepted" (no "tokens": the example prints text)
                         }]}],
           "skipped": [{"method", "threads", "temp", "conv", "turn", "reason"}],  # when any
           "unavailable": {<spec method>: why}, ...}  # when the example is not built

Timing: micro prefill = llama.eval(P tokens) after a reset; micro decode = D
single-token llama.eval calls with fixed tokens (no sampling, same tokens as
specdec).  Prompt mode: Llama.generate() on the exact prompt token ids specdec
used; prefill = time to the first token, decode = first token to last
(decode tok/s = generated / decode, as specdec).  --checkpoint FILE makes the
prompt mode resumable: each finished record is appended to FILE at once, and
records already there are reused instead of run again.  Prompt-lookup speculation is
llama_cpp.llama_speculative.LlamaPromptLookupDecoding passed as draft_model.
Draft-model and n-gram speculation are llama.cpp's own example
llama-speculative-simple ("spec_bin", built by tools/build_llamacpp.sh
from the same vendored llama.cpp) with one `--spec-type` each, run once per
turn by tools/llamacpp_spec_example.py; its figures are the ones it prints
(prefill includes the draft's prompt).  Turns it cannot
run are listed under "skipped"; a missing binary under "unavailable".
"""

from __future__ import annotations

import argparse
import json
import os
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
        # With a draft model llama-cpp-python (0.3.36) keeps logits for every
        # token anyway, but sizes its score table by this flag: n_batch rows
        # when False, so a prompt plus output past 512 tokens failed with "could
        # not broadcast ... into shape (0,)". True gives it n_ctx rows; the
        # computation is the same either way.
        logits_all=draft is not None,
        verbose=False,
    )


def forward_sizes(llm, toks: list, P: int, D: int, sizes: list, reps: int) -> list:
    """specdec's fwd(N)/fwd(1) on llama.cpp: one llama_decode of N tokens past
    the P-token prefix, every one with logits (as a verification needs), the
    cache rolled back to P before each, median of `reps` after a warm-up.
    Through llama-cpp-python's context and batch directly (Llama.eval would
    also copy every row's logits into its numpy table, which llama.cpp's own
    verification does not do). llama.cpp keeps full logits; specdec reduces
    each row to its greedy token. Sizes past the context's n_batch (512) get
    no entry: one llama_decode cannot hold them."""
    ctx, batch = llm._ctx, llm._batch
    llm.reset()
    llm.eval(toks[:P])
    out = []
    for n in sorted(set([1] + list(sizes))):
        if n > llm.n_batch:  # one llama_decode holds at most n_batch tokens: no row for n
            continue
        chunk = list(toks[P:P + min(n, D)])  # the rows specdec's micro-mode forwards
        while len(chunk) < n:
            chunk.append(toks[len(chunk) % P])
        ts = []
        for i in range(reps + 1):
            ctx.kv_cache_seq_rm(-1, P, -1)
            batch.set_batch(batch=chunk, n_past=P, logits_all=True)
            t0 = time.perf_counter()
            ctx.decode(batch)
            if i > 0:  # the first is the warm-up
                ts.append(time.perf_counter() - t0)
        out.append({"n": n, "seconds": statistics.median(ts), "rep_seconds": ts})
    ctx.kv_cache_seq_rm(-1, P, -1)
    t1 = out[0]["seconds"]
    for f in out:
        f["ratio"] = f["seconds"] / t1
    return out


def run_micro(inp: dict, quiet: bool) -> dict:
    m = inp["micro"]
    toks = m["tokens"]
    P, D, reps = m["prefill"], m["decode"], max(1, m.get("reps", 1))
    rows = []
    for t in inp["threads"]:
        llm = load(inp["model"], t, max(inp.get("n_ctx", 0), P + D + 16, P + max(m.get("forward_sizes") or [0]) + 16))
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
        row = {"engine": "llama.cpp", "threads": t, "prefill_tokens": P, "prefill_s": p,
               "prefill_rep_s": pre, "prefill_tok_s": P / p, "decode_tokens": D, "decode_s": d,
               "decode_rep_s": dec, "decode_tok_s": D / d, "n_batch": 512}
        if m.get("forward_sizes"):
            row["forward"] = forward_sizes(llm, toks, P, D, m["forward_sizes"], m.get("forward_reps", 5))
            log(quiet, f"llama.cpp micro t={t}: " +
                ", ".join(f"fwd({f['n']})/fwd(1) {f['ratio']:.2f}" for f in row["forward"] if f["n"] != 1))
        rows.append(row)
        del llm
    return {"micro": rows}


def generate_turn(llm, tokens, n_predict, temp, eog, ignore_eos, seed):
    """One turn: (generated ids without the end token, prefill s, decode s, finish reason)."""
    llm.reset()
    llm.set_seed(seed)
    out = []
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
        out.append(int(tok))
        if len(out) >= n_predict:
            break
        if llm.n_tokens + 1 >= llm.n_ctx():
            break
    t_end = time.perf_counter()
    if t_first is None:
        t_first = t_end
    return out, t_first - t0, t_end - t_first, finish


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


def methods_of(inp: dict) -> list[str]:
    import llamacpp_spec_example as spec

    wanted = inp.get("spec_methods", ["llamacpp-draft"] if inp.get("draft_model") else [])
    unknown = [m for m in wanted if m not in spec.SPEC_TYPES]
    if unknown:
        raise SystemExit(f"bench_llamacpp: unknown spec methods {unknown} (known: {sorted(spec.SPEC_TYPES)})")
    return ["llamacpp-ar", "llamacpp-pld"] + list(wanted)


def is_spec(method: str) -> bool:
    """Run by llama.cpp's speculative example (not by llama-cpp-python)."""
    return method not in ("llamacpp-ar", "llamacpp-pld")


def spec_unavailable(inp: dict) -> str | None:
    b = inp.get("spec_bin") or ""
    if not (os.path.isfile(b) and os.access(b, os.X_OK)):
        return (f"llama.cpp's speculative example is not built ({b or 'no spec_bin given'}): "
                "run tools/build_llamacpp.sh, then rerun with --resume")
    return None


# What llama.cpp prints when its graph for the target's architecture exposes no
# layer inputs to an EAGLE-3 head (the vendored build wires them for llama,
# qwen3 and a few more, not for qwen2): every turn would fail the same way.
_NO_EAGLE3_FEATURES = "layer input tensor is null"


def method_unsupported(method: str, error: str, vocab) -> str | None:
    """Why a failure means the method cannot run on this target at all (so
    its other turns are not tried), or None for a failure of one turn."""
    if method == "llamacpp-eagle3" and _NO_EAGLE3_FEATURES in error:
        arch = (getattr(vocab, "metadata", None) or {}).get("general.architecture", "?")
        return (f"llama.cpp's build does not capture EAGLE-3 features for this target's architecture ({arch}): "
                f"its graph sets no layer inputs ('{_NO_EAGLE3_FEATURES}')")
    return None


def eagle3_gguf(inp: dict, quiet: bool) -> str:
    """The EAGLE-3 head as llama.cpp's eagle3 GGUF: a GGUF is used as it is, a
    Hugging Face layout directory is converted (once: kept at inp["eagle3_gguf"],
    remade when the head's weights are newer) with its matrices in float16, as
    the released heads and specdec's exported ones hold them."""
    head = inp["eagle3_head"]
    if not os.path.isdir(head):
        return head
    out = inp["eagle3_gguf"]
    weights = os.path.join(head, "model.safetensors")
    if not (os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(weights)):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
        from pathlib import Path

        import eagle3_llama_ref

        log(quiet, f"llama.cpp baseline: converting the EAGLE-3 head {head} -> {out}")
        tmp = out + ".tmp"
        eagle3_llama_ref.convert(Path(head), Path(inp["model"]), Path(tmp), f16=True)
        os.replace(tmp, out)
    return out


def run_prompts(inp: dict, quiet: bool, checkpoint: str | None = None) -> dict:
    """Every turn for each method, thread count and temperature. With a
    checkpoint, each finished record is appended to it at once and the
    records it already holds are not run again (a stopped run resumes)."""
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    import llamacpp_spec_example as spec

    runs, skipped, unavailable = [], [], {}
    eog = set(inp.get("eog", []))
    turns = inp["turns"]
    reps = max(1, inp.get("reps", 1))
    done = read_checkpoint(checkpoint)
    vocab = None  # tokenizer of the target, for the example's text prompts
    for t in inp["threads"]:
        ar_tokens = {}  # (temp, conv, turn) -> llamacpp-ar's record (its ids, for greedy comparisons)
        for method in methods_of(inp):
            if method in unavailable:
                continue  # found at an earlier thread count: it does not depend on threads
            draft = None
            extra = {}
            if method == "llamacpp-pld":
                k = int(inp.get("pld_num_pred_tokens", 10))
                g = int(inp.get("pld_max_ngram_size", 2))
                draft = LlamaPromptLookupDecoding(max_ngram_size=g, num_pred_tokens=k)
                extra = {"num_pred_tokens": k, "max_ngram_size": g}
            elif is_spec(method):
                why = spec_unavailable(inp)
                if why:
                    unavailable[method] = why
                    log(quiet, f"llama.cpp baseline: {method} not measured: {why}")
                    continue
                extra = {"spec_type": spec.SPEC_TYPES[method][0], "impl": "llama-speculative-simple"}
                draft_gguf = inp.get("draft_model")
                if method == "llamacpp-draft":
                    extra.update(num_pred_tokens=int(inp.get("draft_num_pred_tokens", 4)),
                                 draft_model=inp["draft_model"])
                if method == "llamacpp-eagle3":
                    draft_gguf = eagle3_gguf(inp, quiet)
                    extra.update(num_pred_tokens=int(inp.get("eagle3_num_pred_tokens", 4)),
                                 eagle3_head=inp["eagle3_head"])
                spec_flags = spec.spec_args(method, draft_gguf, extra.get("num_pred_tokens", 0))
                if vocab is None:
                    vocab = llama_cpp.Llama(model_path=inp["model"], vocab_only=True, verbose=False)
            pending = any((method, t, temp, tr["conv"], tr["turn"]) not in done
                          for temp in inp["temps"] for tr in turns)
            llm = load(inp["model"], t, inp["n_ctx"], draft) if pending and not is_spec(method) else None

            def one(tr, temp):
                """(record fields, generated text or None) of one run of the turn."""
                if not is_spec(method):
                    gen, pre, dec, fin = generate_turn(llm, tr["tokens"], inp["n_predict"], temp, eog,
                                                       inp["ignore_eos"], inp["seed"])
                    return {"n_generated": len(gen), "prefill_s": pre, "decode_s": dec, "finish_reason": fin,
                            "tokens": gen}, None
                text = spec.prompt_text(vocab, tr["tokens"])
                if text is None:
                    raise ValueError("its prompt ids do not come back from their text (the example takes text)")
                r = spec.run_turn(inp["spec_bin"], inp["model"], spec_flags, text, len(tr["tokens"]),
                                  inp["n_predict"], t, temp, inp["seed"], inp["n_ctx"], inp["ignore_eos"])
                return r, spec.generated_text(r.pop("stdout"), spec.text_of(vocab, tr["tokens"]))

            for temp in inp["temps"]:
                todo = [tr for tr in turns if (method, t, temp, tr["conv"], tr["turn"]) not in done]
                for _ in range(int(inp.get("warmup", 0)) if todo else 0):
                    try:
                        one(todo[0], temp)
                    except (ValueError, RuntimeError):
                        pass  # reported when the turn itself runs
                recs = []
                for i, tr in enumerate(turns):
                    key = (method, t, temp, tr["conv"], tr["turn"])
                    if key in done:
                        recs.append(done[key])
                    else:
                        try:
                            runs_of_turn = [one(tr, temp) for _ in range(reps)]
                        except (ValueError, RuntimeError) as e:
                            why = method_unsupported(method, str(e), vocab)
                            if why:
                                unavailable[method] = why
                                log(quiet, f"llama.cpp baseline: {method} not measured: {why}")
                                break
                            skipped.append({"method": method, "threads": t, "temp": temp, "conv": tr["conv"],
                                            "turn": tr["turn"], "reason": str(e)})
                            log(quiet, f"[{i + 1}/{len(turns)}] {method} t={t} T={temp}: skipped: {e}")
                            continue
                        decs = [r["decode_s"] for r, _ in runs_of_turn]
                        rec, text = runs_of_turn[-1]  # counts and tokens of the last repetition
                        rec = {"conv": tr["conv"], "turn": tr["turn"], "n_prompt": len(tr["tokens"]), **rec,
                               "prefill_s": statistics.median(r["prefill_s"] for r, _ in runs_of_turn),
                               "decode_s": statistics.median(decs), "rep_decode_s": decs}
                        if method != "llamacpp-ar":
                            ref = ar_tokens.get((temp, tr["conv"], tr["turn"]))
                            same = None
                            if temp == 0 and ref is not None:
                                same = rec["tokens"] == ref["tokens"] if "tokens" in rec else spec.same_output(
                                    text, spec.text_of(vocab, ref["tokens"]), ref["finish_reason"] == "stop")
                            rec["matches_llamacpp_ar"] = same
                        recs.append(rec)
                        if checkpoint:
                            with open(checkpoint, "a") as f:
                                f.write(json.dumps({"method": method, "threads": t, "temp": temp, **extra,
                                                    "rec": rec}) + "\n")
                        d = rec["decode_s"]
                        log(quiet, f"[{i + 1}/{len(turns)}] {method} t={t} T={temp}: "
                                   f"{rec['n_generated'] / d if d > 0 else 0:.1f} tok/s")
                    if method == "llamacpp-ar" and "tokens" in recs[-1]:  # (AR turns are never skipped)
                        ar_tokens[(temp, tr["conv"], tr["turn"])] = recs[-1]
                if method in unavailable:
                    break  # no run: the report lists why
                runs.append({"method": method, "threads": t, "temp": temp, **extra, "records": recs})
            if llm is not None:
                del llm
    out = {"runs": runs}
    if skipped:
        out["skipped"] = skipped
    if unavailable:
        out["unavailable"] = unavailable
    return out


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
