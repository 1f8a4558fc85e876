"""specdec: speculative decoding of GGUF models on the CPU.

    import specdec
    llm = specdec.Engine("smollm2-135m-instruct-q4_1", draft=None, threads=2)
    out = llm.generate("The capital of France is", max_tokens=16)
    print(out.text, out.stats["mean_accept_len"])
    for piece in llm.generate("Once upon a time", stream=True):
        print(piece, end="", flush=True)
    r = llm.create_chat_completion([{"role": "user", "content": "Hi!"}], max_tokens=32)
    print(r["choices"][0]["message"]["content"], r["specdec"])

Model names and paths are the CLI's (`specdec generate -m`): a GGUF path or a
name from models/manifest.json ($SPECDEC_MODELS_DIR, else ./models).
create_chat_completion and create_completion return the dicts (and, with
stream=True, the chunk dicts) that llama-cpp-python returns, plus a "specdec"
entry with the speculation statistics. Engine errors raise SpecdecError (a
RuntimeError) with the engine's message; invalid OpenAI parameters raise
ValueError. Decoding runs with the GIL released; Ctrl-C stops it between
tokens and raises KeyboardInterrupt.
"""
from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence, Union

from ._core import SpecdecError
from . import _core

__all__ = ["Engine", "Generation", "TextStream", "SpecdecError"]
__version__ = "0.1.0"


@dataclass
class Generation:
    """The result of Engine.generate: the text and what the engine reports."""

    text: str
    tokens: list = field(default_factory=list)
    finish_reason: str = "length"
    stats: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.text


def _pieces(run) -> Iterator[str]:
    """Decoded text pieces of a run; the run is cancelled if the consumer stops early."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        while True:
            b = run.next()
            if b is None:
                tail = dec.decode(b"", final=True)
                if tail:
                    yield tail
                return
            s = dec.decode(b)
            if s:
                yield s
    finally:
        if not run.finished:
            run.cancel()


class TextStream:
    """Iterator of text pieces (Engine.generate(stream=True)); .result and
    .stats are set once it is exhausted. close() stops decoding."""

    def __init__(self, run):
        self._run = run
        self._it = _pieces(run)
        self.result: Optional[Generation] = None

    def __iter__(self) -> "TextStream":
        return self

    def __next__(self) -> str:
        try:
            return next(self._it)
        except StopIteration:
            if self.result is None:
                self.result = _generation(self._run)
            raise

    @property
    def stats(self) -> Optional[dict]:
        return self.result.stats if self.result else None

    def close(self) -> None:
        self._it.close()


def _generation(run) -> Generation:
    return Generation(
        text=run.text.decode("utf-8", errors="replace"),
        tokens=list(run.tokens),
        finish_reason=run.finish_reason,
        stats=run.stats(),
    )


def _stop_list(stop) -> list:
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    return list(stop)


class Engine:
    """A target model (and optionally a draft model) loaded once.

    model, draft: a GGUF path or a manifest name, as `specdec generate -m/-d`.
    threads: worker threads (None: all cores). ctx: context size in tokens
    (None: min(model's training context, 4096)).
    """

    def __init__(self, model: str, draft: Optional[str] = None, threads: Optional[int] = None,
                 ctx: Optional[int] = None, draft_k: int = 5):
        self._engine = _core.Engine(str(model), None if draft is None else str(draft), threads or 0, ctx or 0)
        self.draft_k = draft_k

    @property
    def model_path(self) -> str:
        return self._engine.model_path

    @property
    def draft_path(self) -> Optional[str]:
        return self._engine.draft_path

    @property
    def n_ctx(self) -> int:
        return self._engine.n_ctx

    @property
    def threads(self) -> int:
        return self._engine.threads

    def tokenize(self, text: str) -> list:
        return list(self._engine.tokenize(text))

    # --- the CLI's request ---------------------------------------------------
    def generate(self, prompt: str, method: Optional[str] = None, max_tokens: int = 128,
                 temperature: float = 0.0, seed: int = 0, top_k: int = 0, top_p: float = 1.0,
                 min_p: float = 0.0, repeat_penalty: float = 1.0, repeat_last_n: int = 64,
                 stop: Union[str, Sequence[str], None] = None, ignore_eos: bool = False,
                 chat: bool = False, system: Optional[str] = None, draft_k: Optional[int] = None,
                 stream: bool = False) -> Union[Generation, TextStream]:
        """Decodes `prompt` as `specdec generate` does (same defaults: greedy,
        128 tokens; method None: auto when greedy, ar when sampling).
        method: ar, auto, chain, tree (these two need a draft) or ngram.
        Returns a Generation, or with stream=True a TextStream of text pieces."""
        run = self._engine.start(prompt, method or "", int(max_tokens), float(temperature), int(top_k),
                                 float(top_p), float(min_p), float(repeat_penalty), int(repeat_last_n),
                                 int(seed), _stop_list(stop), bool(ignore_eos), bool(chat), system or "",
                                 int(draft_k or self.draft_k))
        if stream:
            return TextStream(run)
        for _ in _pieces(run):
            pass
        return _generation(run)

    # --- llama-cpp-python's API ------------------------------------------------
    def create_chat_completion(self, messages: list, max_tokens: Optional[int] = None,
                               temperature: float = 0.2, top_p: float = 0.95, top_k: int = 40,
                               min_p: float = 0.05, seed: Optional[int] = None,
                               stop: Union[str, Sequence[str], None] = None, stream: bool = False,
                               method: Optional[str] = None, draft_k: Optional[int] = None, **kwargs: Any):
        """OpenAI chat completion (llama-cpp-python's defaults). max_tokens
        None: to the end of the context. Extra OpenAI parameters are checked
        by the server's request parser (unsupported ones raise ValueError)."""
        body = {"messages": messages}
        return self._openai("chat", body, max_tokens, temperature, top_p, top_k, min_p, seed, stop, stream,
                            method, draft_k, kwargs)

    def create_completion(self, prompt: str, max_tokens: Optional[int] = 16, temperature: float = 0.8,
                          top_p: float = 0.95, top_k: int = 40, min_p: float = 0.05, seed: Optional[int] = None,
                          stop: Union[str, Sequence[str], None] = None, stream: bool = False,
                          method: Optional[str] = None, draft_k: Optional[int] = None, **kwargs: Any):
        """OpenAI text completion (llama-cpp-python's defaults)."""
        body = {"prompt": prompt}
        return self._openai("completion", body, max_tokens, temperature, top_p, top_k, min_p, seed, stop,
                            stream, method, draft_k, kwargs)

    def __call__(self, prompt: str, **kwargs: Any):
        return self.create_completion(prompt, **kwargs)

    def _openai(self, endpoint, body, max_tokens, temperature, top_p, top_k, min_p, seed, stop, stream,
                method, draft_k, extra):
        if max_tokens is not None and max_tokens > 0:
            body["max_tokens"] = max_tokens
        body.update(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p)
        if seed is not None:
            body["seed"] = seed
        if stop:
            body["stop"] = stop
        if method is not None:
            body["specdec"] = {"method": method}
        # llama-cpp-python's own parameters at their neutral values are accepted.
        for k in ("repeat_penalty",):
            if k in extra and extra[k] not in (None, 1.0):
                raise ValueError(f"'{k}' is not supported by create_{endpoint} (use 1.0)")
            extra.pop(k, None)
        body.update({k: v for k, v in extra.items() if v is not None})
        try:
            text = json.dumps(body)
        except TypeError as e:
            raise TypeError(f"create_{endpoint}: arguments must be JSON values: {e}") from None
        run = self._engine.start_openai(endpoint, text, int(draft_k or self.draft_k))
        if stream:
            return self._chunks(run, endpoint)
        for _ in _pieces(run):
            pass
        out = json.loads(run.response_json())
        out["specdec"] = run.stats()
        return out

    def _chunks(self, run, endpoint) -> Iterator[dict]:
        chat = endpoint == "chat"
        if chat:
            yield json.loads(run.chunk_json("", "", True))
        for piece in _pieces(run):
            yield json.loads(run.chunk_json(piece, ""))
        last = json.loads(run.chunk_json("", run.finish_reason))
        last["specdec"] = run.stats()
        yield last
