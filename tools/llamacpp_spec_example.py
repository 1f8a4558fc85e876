"""llama.cpp's own speculative decoding (the llama-speculative-simple example,
built by tools/build_llamacpp.sh from the llama.cpp that llama-cpp-python
vendors) on one turn, for the `llamacpp-draft` and `llamacpp-ngram-*`
baselines of `specdec bench --llamacpp` (tools/bench_llamacpp.py).

Each baseline is one of llama.cpp's speculative types (`--spec-type`, its
common/speculative.cpp), run with the settings llama.cpp's own
docs/speculative.md gives for it: draft-simple with specdec's K and a greedy
draft, draft-eagle3 with specdec's EAGLE-3 head (its eagle3 GGUF, as
tools/reference/eagle3_llama_ref.py converts it) and K, the n-gram types
with their documented example command lines. The other types need what the
packaged models do not carry (MTP layers, a DFlash or DSpark drafter).

The example takes prompt text, not token ids: the turn's ids are turned back
into text (special tokens written out), and that text is used only if
tokenizing it as the example does (BOS as the model says, special tokens
parsed) gives back exactly the same ids; the example's own count of prompt
tokens is checked too. Its greedy output is compared with llama.cpp AR's as
text (the example prints text, not ids).

Figures are the example's own: "encoded N tokens in S seconds" (the target's
prompt minus its last token, plus the draft's prompt when there is a draft
model), "decoded N tokens in S
seconds" (every token after the prompt, the first one included), n_drafted and
n_accept. It is run with -n N-1: its loop stops once it has more than -n
tokens, so it decodes at least N, and its last round can overshoot by up to its
draft length (K, or up to 64 for the n-gram types: it drafts in full even when
fewer are left); when it stops on an end-of-generation
token, that token is counted (and any accepted after it in the same round).
So its generated count can exceed specdec's N; tok/s is its count over its time.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import tempfile


def piece(llm, tok: int) -> bytes:
    """The token's text as the example prints it (special tokens written out)."""
    import llama_cpp

    vocab = llm._model.vocab
    buf = ctypes.create_string_buffer(64)
    n = llama_cpp.llama_token_to_piece(vocab, tok, buf, 64, 0, True)
    if n < 0:
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, tok, buf, -n, 0, True)
    return buf.raw[:n]


def text_of(llm, tokens) -> bytes:
    return b"".join(piece(llm, t) for t in tokens)


def prompt_text(llm, tokens) -> bytes | None:
    """Text that the example tokenizes into exactly `tokens`, or None."""
    tokens = list(tokens)
    starts = (1, 0) if tokens and tokens[0] == llm.token_bos() else (0,)
    for s in starts:  # a leading BOS is added back by the tokenizer when the model asks for one
        text = text_of(llm, tokens[s:])
        if llm.tokenize(text, add_bos=True, special=True) == tokens:
            return text
    return None


# bench method -> llama.cpp speculative type and its flags (after --spec-type).
# "{k}" is specdec's draft length; the n-gram flags are docs/speculative.md's.
SPEC_TYPES = {
    "llamacpp-draft": ["draft-simple", "--spec-draft-n-max", "{k}", "--spec-draft-n-min", "0",
                       "--spec-draft-p-min", "0"],
    # an EAGLE-3 head in llama.cpp's eagle3 GGUF (-md), chains of K as specdec's eagle3-chain
    "llamacpp-eagle3": ["draft-eagle3", "--spec-draft-n-max", "{k}", "--spec-draft-n-min", "0",
                        "--spec-draft-p-min", "0"],
    "llamacpp-ngram-simple": ["ngram-simple", "--spec-draft-n-max", "64"],
    "llamacpp-ngram-map-k": ["ngram-map-k", "--spec-draft-n-max", "64"],
    "llamacpp-ngram-map-k4v": ["ngram-map-k4v", "--spec-ngram-map-k4v-size-n", "8", "--spec-ngram-map-k4v-size-m", "8",
                               "--spec-ngram-map-k4v-min-hits", "2", "--spec-draft-n-max", "64"],
    "llamacpp-ngram-mod": ["ngram-mod", "--spec-ngram-mod-n-match", "24", "--spec-ngram-mod-n-min", "48",
                           "--spec-ngram-mod-n-max", "64"],
    "llamacpp-ngram-cache": ["ngram-cache"],
}


def spec_args(method: str, draft: str | None, k: int) -> list[str]:
    """The example's speculative flags for a bench method (draft-simple needs the
    draft GGUF, draft-eagle3 the head's eagle3 GGUF)."""
    kind, *flags = SPEC_TYPES[method]
    out = ["--spec-type", kind] + [f.replace("{k}", str(k)) for f in flags]
    if kind.startswith("draft-"):
        if not draft:
            raise ValueError(f"{method} needs a draft model" if kind == "draft-simple" else
                             f"{method} needs an EAGLE-3 head GGUF")
        out = ["-md", draft] + out
    return out


_NUM = {
    "encoded": re.compile(r"encoded\s+(\d+) tokens in\s+([0-9.]+) seconds"),
    "decoded": re.compile(r"decoded\s+(\d+) tokens in\s+([0-9.]+) seconds"),
    "n_drafted": re.compile(r"n_drafted\s*=\s*(\d+)"),
    "n_accept": re.compile(r"n_accept\s*=\s*(\d+)"),
}


def run_turn(binary: str, target: str, spec: list[str], text: bytes, n_prompt: int, n_predict: int, threads: int,
             temp: float, seed: int, n_ctx: int, ignore_eos: bool, timeout: float = 3600) -> dict:
    """One run of the example with the speculative flags `spec` (spec_args);
    raises RuntimeError with its stderr when it fails."""
    fd, path = tempfile.mkstemp(suffix=".txt", prefix="specdec-llamacpp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text + b"\n")  # -f drops one trailing newline; the prompt's own must stay
        cmd = [binary, "-m", target, "-f", path, "-n", str(max(0, n_predict - 1)),
               "-c", str(n_ctx), "-b", str(max(n_ctx, 512)), "-ub", "512",
               "-t", str(threads), "-tb", str(threads), "-td", str(threads), "-tbd", str(threads),
               *spec, "-fa", "off",
               "--temp", str(temp), "--top-k", "1" if temp == 0 else "0", "--top-p", "1", "--min-p", "0",
               "--repeat-penalty", "1", "--seed", str(seed)]
        if ignore_eos:
            cmd.append("--ignore-eos")
        p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    finally:
        os.unlink(path)
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(binary)} failed (exit {p.returncode}): {err[-2000:]}")
    got = {}
    for key, rx in _NUM.items():
        m = rx.findall(err)
        if not m:
            raise RuntimeError(f"{os.path.basename(binary)}: no '{key}' figure in its output: {err[-2000:]}")
        got[key] = m[-1]
    n_enc, s_enc = int(got["encoded"][0]), float(got["encoded"][1])
    n_dec, s_dec = int(got["decoded"][0]), float(got["decoded"][1])
    if n_enc != n_prompt:
        raise RuntimeError(f"the example read {n_enc} prompt tokens, specdec used {n_prompt}")
    # stdout: "\n\n", the prompt's pieces, the generated pieces, "\n\n" before and after the statistics.
    return {"n_generated": n_dec, "prefill_s": s_enc, "decode_s": s_dec,
            "drafted": int(got["n_drafted"]), "accepted": int(got["n_accept"]),
            "finish_reason": "length" if n_dec >= n_predict else "stop", "stdout": p.stdout}


def same_output(text: bytes | None, ref: bytes, ref_stopped: bool) -> bool | None:
    """Whether the example's text is llama.cpp AR's output: equal when AR
    stopped on an end token, else AR's N tokens' text is where it starts (the
    example may decode a few tokens more)."""
    if text is None:
        return None
    return text == ref if ref_stopped else text.startswith(ref)


def generated_text(stdout: bytes, prompt: bytes) -> bytes | None:
    """The generated text out of the example's stdout (None if it is not laid out as expected)."""
    head, tail = b"\n\n" + prompt, b"\n\n\n\n"
    if not stdout.startswith(head) or not stdout.endswith(tail) or len(stdout) < len(head) + len(tail):
        return None
    return stdout[len(head):len(stdout) - len(tail)]
