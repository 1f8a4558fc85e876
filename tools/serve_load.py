#!/usr/bin/env python3
"""Load and fault test of `specdec serve`.

Starts the server itself (binary: --bin or $SPECDEC_BIN, default
build/release/specdec; a packaged model by name, -m, and optionally a draft,
-d, which adds chain, tree and ssd to the methods), then:

 1. references: every greedy request of the plan run alone, one after
    another, non-streaming, method ar; every seeded sampled request run alone
    with each method whose seeded output does not depend on its neighbours
    (ar, ngram, chain, tree; not ssd, whose cache depends on timing);
 2. a warm-up (every sequence slot, every method, more connections than the
    server has worker threads), then the idle RSS;
 3. the load: --clients concurrent clients for --duration seconds, each
    looping over actions: streaming requests (mostly) and non-streaming ones
    over the methods and sampling settings, and faults: a client that hangs
    up mid-stream, malformed JSON, max_tokens over the server's cap, a body
    over --max-body-mb (with Content-Length, and chunked), a body that stalls
    half-way, a connection that opens and never sends, one that trickles its
    headers a byte at a time and never ends them. Half-way, a burst of
    max-queue + max-batch + 16 requests at once;
 4. after the load: the server must become idle (no active or queued request,
    KV usage 0), its anonymous RSS less the KV pages in RAM
    (specdec_kv_resident_bytes: written KV pages stay, up to the cache's size)
    must return to the idle level (within --rss-slack-mb or --rss-slack-frac),
    and its /metrics counters must agree with what the clients saw;
 5. shutdown under load: max-batch + 2 long streams, then SIGTERM: each must
    finish or end with a 503 error event, the server's shutdown report must
    name them accordingly, new requests must get 503 with Retry-After, and the
    exit status must be 0.

Checks (any failure makes the exit status 1): every greedy request that
completed equals its reference (text and finish reason), every seeded one
equals its method's reference; every other answer is a clear error (a 4xx or
5xx status with an OpenAI JSON error body, or an SSE error event); 429 and
503 answers carry Retry-After; no client waits past --client-timeout (a
hang); the server never exits before SIGTERM (a crash).

Prints a table (requests, completed, errors by kind, mismatches, crashes,
TTFT and inter-token percentiles, throughput, RSS before / peak / after) and
writes it as JSON (--json PATH). Inter-token times are the gaps between
streamed content events (one per token, except where the server holds text
back, e.g. a partial UTF-8 character or a possible stop string).

Standard library only (asyncio over raw sockets: one client is one coroutine
and one connection per request, so 64 clients cost the 2-core machine little).

Example (the CI form is tests/python/test_serve_load.py):
    .venv/bin/python tools/serve_load.py -m smollm2-135m-instruct-q4_1 \\
        -d smollm2-135m-instruct-q4_1 --clients 64 --duration 240 --json out/load.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"

PROMPTS = [
    "What is the capital of France?",
    "Tell me a short fact about the number 7.",
    "Write a haiku about the sea.",
    "List three colours of the rainbow.",
    "Explain in one sentence what a compiler does.",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Count: 1, 2, 3,",
    "The quick brown fox",
    "Once upon a time, in a small village by the mountains,",
    "Translate 'good morning' into Spanish.",
    "Give me a name for a friendly robot.",
    "Why is the sky blue? Answer briefly.",
]

MALFORMED = [
    b"",
    b"{",
    b"not json",
    b"[]",
    b"null",
    b"\xff\xfe\x00",
    b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "ten"}',
    b'{"messages": 5}',
    b'{"prompt": {"x": 1}}',
    b'{"messages": [{"role": "user", "content": "hi"}], "temperature": -3}',
    b'{"messages": [{"role": "user", "content": "hi"}], "specdec": {"method": "medusa"}}',
    b'{"a":' + b"[" * 3000,
    b'{"messages": [{"role": "user", "content": "unterminated',
]


@dataclass(frozen=True)
class Spec:
    """One request of the plan, without method and streaming."""
    chat: bool
    prompt: str
    max_tokens: int
    stop: tuple = ()
    temperature: float = 0.0
    seed: int | None = None

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.chat else "/v1/completions"

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def body(self, model: str, method: str | None, draft_k: int | None, stream: bool,
             max_tokens: int | None = None) -> dict:
        b: dict = {"model": model, "max_tokens": max_tokens or self.max_tokens, "temperature": self.temperature}
        if self.chat:
            b["messages"] = [{"role": "user", "content": self.prompt}]
        else:
            b["prompt"] = self.prompt
        if self.stop:
            b["stop"] = list(self.stop)
        if self.seed is not None:
            b["seed"] = self.seed
            b["top_p"] = 0.95
        if method or draft_k:
            ext: dict = {}
            if method:
                ext["method"] = method
            if draft_k:
                ext["draft_k"] = draft_k
            b["specdec"] = ext
        if stream:
            b["stream"] = True
            b["stream_options"] = {"include_usage": True}
        return b


def make_plan(rng: random.Random, n_prompts: int) -> tuple[list[Spec], list[Spec]]:
    """Greedy requests: each prompt as chat and as completion; seeded sampled
    ones: half the prompts. Fewer prompts: fewer references to compute."""
    greedy, sampled = [], []
    prompts = PROMPTS[:n_prompts]
    for i, p in enumerate(prompts):
        for chat in (True, False):
            stop = ("\n\n",) if (i + chat) % 4 == 0 else ()
            greedy.append(Spec(chat, p, rng.choice([8, 16, 24, 32, 48]), stop))
    for i, p in enumerate(prompts[:max(1, len(prompts) // 2)]):
        sampled.append(Spec(i % 2 == 0, p, rng.choice([12, 24]), (), 0.8, 1000 + i))
    return greedy, sampled


# --- a minimal HTTP/1.1 client over asyncio streams --------------------------------

class HttpError(Exception):
    pass


@dataclass
class Answer:
    status: int = 0
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    events: list = field(default_factory=list)  # SSE: (time, parsed JSON or "[DONE]")
    t_sent: float = 0.0
    closed_early: bool = False  # the stream ended without [DONE] (or we hung up)


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        raise HttpError(f"bad status line {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return int(m.group(1)), headers


async def read_chunks(reader: asyncio.StreamReader):
    """Yields the data of a chunked body as it arrives."""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


def request_bytes(method: str, path: str, body: bytes, key: str | None, extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\n{auth}Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n").encode() + body


async def http(port: int, method: str, path: str, body: bytes = b"", key: str | None = None,
               stop_after_events: int | None = None) -> Answer:
    """One request on its own connection. For an SSE answer, parses the events;
    stop_after_events: hang up after that many content events."""
    reader, writer = await asyncio.open_connection(HOST, port)
    ans = Answer()
    try:
        writer.write(request_bytes(method, path, body, key))
        await writer.drain()
        ans.t_sent = time.monotonic()
        ans.status, ans.headers = await read_head(reader)
        if "event-stream" in ans.headers.get("content-type", ""):
            buf = b""
            content_events = 0
            done = False
            async for data in read_chunks(reader):
                buf += data
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    if not ev.startswith(b"data: "):
                        raise HttpError(f"bad SSE line {ev[:80]!r}")
                    payload = ev[6:]
                    t = time.monotonic()
                    if payload == b"[DONE]":
                        ans.events.append((t, "[DONE]"))
                        done = True
                        continue
                    j = json.loads(payload)
                    ans.events.append((t, j))
                    if event_text(j):
                        content_events += 1
                        if stop_after_events is not None and content_events >= stop_after_events:
                            ans.closed_early = True
                            return ans
            ans.closed_early = not done
        elif ans.headers.get("transfer-encoding", "").lower() == "chunked":
            ans.body = b"".join([d async for d in read_chunks(reader)])
        elif "content-length" in ans.headers:
            ans.body = await reader.readexactly(int(ans.headers["content-length"]))
        else:
            ans.body = await reader.read()
        return ans
    finally:
        writer.close()


def event_text(j) -> str:
    if not isinstance(j, dict) or not j.get("choices"):
        return ""
    c = j["choices"][0]
    if "delta" in c:
        return c["delta"].get("content") or ""
    return c.get("text") or ""


def is_error_body(body: bytes) -> dict | None:
    """The OpenAI error object of a JSON error body, or None."""
    try:
        j = json.loads(body)
    except ValueError:
        return None
    err = j.get("error") if isinstance(j, dict) else None
    if isinstance(err, dict) and {"message", "type", "param", "code"} <= set(err) and err["message"]:
        return err
    return None


# --- the server process -------------------------------------------------------------

class ServerProc:
    def __init__(self, args: argparse.Namespace):
        cmd = [args.bin, "serve", "-m", args.model, "--host", HOST, "--port", "0", "--ctx", str(args.ctx),
               "--threads", str(args.threads), "--max-batch", str(args.max_batch), "--max-queue",
               str(args.max_queue), "--max-body-mb", str(args.max_body_mb), "--max-tokens", str(args.max_tokens),
               "--request-timeout", str(args.request_timeout), "--read-timeout", str(args.read_timeout),
               "--header-timeout", str(args.header_timeout), "--idle-timeout", str(args.idle_timeout),
               "--shutdown-grace", str(args.shutdown_grace)]
        if args.draft:
            cmd += ["-d", args.draft]
        if args.api_key:
            cmd += ["--api-key", args.api_key]
        cmd += args.server_arg
        self.cmd = cmd
        env = dict(os.environ)
        env.pop("SPECDEC_API_KEY", None)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        self.lines: list[str] = []
        self.port_ready = threading.Event()
        self.port = 0
        threading.Thread(target=self._drain, daemon=True).start()
        if not self.port_ready.wait(args.start_timeout) or not self.port:
            self.kill()
            raise SystemExit("server did not start:\n" + "".join(self.lines))

    def _drain(self) -> None:
        assert self.proc.stderr
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            self.lines.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self.port_ready.set()
        self.port_ready.set()

    def rss_kib(self, key: str = "VmRSS") -> int:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


# --- the test -----------------------------------------------------------------------

def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def parse_metrics(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def kv_resident_kib(m: dict) -> int:
    return int(sum(v for k, v in m.items() if k.startswith("specdec_kv_resident_bytes{")) / 1024)


def requests_by_status(m: dict) -> dict:
    """specdec_requests_total{endpoint,status} as {(endpoint, status): n}."""
    out = {}
    for k, v in m.items():
        mm = re.match(r'specdec_requests_total\{endpoint="([^"]*)",status="(\d+)"\}', k)
        if mm:
            out[(mm.group(1), int(mm.group(2)))] = v
    return out


# The status /metrics records for a stream that ended with an error event.
STREAM_ERROR_STATUS = {"request_timeout": 504, "shutting_down": 503, "decode_failed": 500, "prefill_failed": 500}


class Load:
    def __init__(self, args: argparse.Namespace, srv: ServerProc):
        self.a = args
        self.srv = srv
        self.port = srv.port
        self.rng = random.Random(args.seed)
        self.greedy, self.sampled = make_plan(self.rng, args.prompts)
        self.methods_greedy = [None, "ar", "auto", "ngram"] + (["chain", "tree", "ssd"] if args.draft else [])
        self.methods_sampled = ["ar", "ngram"] + (["chain", "tree"] if args.draft else [])
        self.refs: dict = {}
        self.kinds: dict[str, int] = {}      # outcome counts by kind
        self.failures: list[str] = []        # what makes the run fail (first few kept verbatim)
        self.n_fail: dict[str, int] = {}
        self.expected: dict = {}             # (endpoint, status) the server should have recorded
        self.abandoned: dict = {}            # endpoint -> streams we hung up on (200 or 499 at the server)
        self.submitted = 0                   # answered 200 (a job was queued)
        self.stream_errors = 0               # of those, streams that ended with an error event
        self.ttft: list[float] = []
        self.itl: list[float] = []
        self.tokens = 0
        self.requests = 0
        self.completed = 0
        self.greedy_checked = 0
        self.seeded_checked = 0
        self.mismatches = 0
        self.seeded_mismatches = 0
        self.hangs = 0
        self.burst: dict = {}

    # -- bookkeeping
    def count(self, kind: str) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def fail(self, kind: str, detail: str) -> None:
        self.n_fail[kind] = self.n_fail.get(kind, 0) + 1
        if len(self.failures) < 20:
            self.failures.append(f"{kind}: {detail}")

    def expect(self, path: str, status: int) -> None:
        self.expected[(path, status)] = self.expected.get((path, status), 0) + 1

    def body(self, spec: Spec, method, draft_k, stream: bool, **kw) -> bytes:
        return json.dumps(spec.body(self.a.model_id, method, draft_k, stream, **kw)).encode()

    async def call(self, *args, **kw) -> Answer | None:
        """http() under the client timeout; None (and a hang) if it ran out."""
        try:
            return await asyncio.wait_for(http(self.port, *args, key=self.a.api_key, **kw), self.a.client_timeout)
        except asyncio.TimeoutError:
            self.hangs += 1
            self.fail("hang", f"{args[0]} {args[1]}: no answer within {self.a.client_timeout} s")
            return None

    # -- answers
    def check_error(self, ans: Answer, path: str, want: set[int], what: str) -> bool:
        """A clear error: one of the wanted statuses, an OpenAI JSON error body,
        Retry-After on 429/503. Records it for the metrics check."""
        err = is_error_body(ans.body)
        if ans.status not in want or err is None:
            self.fail("unexpected", f"{what}: status {ans.status}, body {ans.body[:200]!r}")
            return False
        if ans.status in (429, 503) and not ans.headers.get("retry-after"):
            self.fail("no_retry_after", f"{what}: {ans.status} without Retry-After")
        self.expect(path, ans.status)
        return True

    def check_output(self, spec: Spec, method, draft_k, text: str, finish, n_tokens) -> None:
        if spec.greedy:
            ref = self.refs[(spec, None)]
            self.greedy_checked += 1
        elif (spec, method) in self.refs:
            ref = self.refs[(spec, method)]
            self.seeded_checked += 1
        else:
            return  # sampled ssd (or the default method): completes, nothing to compare
        if text != ref["text"] or finish != ref["finish"]:
            if spec.greedy:
                self.mismatches += 1
            else:
                self.seeded_mismatches += 1
            self.fail("mismatch", f"{'greedy' if spec.greedy else 'seeded'} {spec.path} method={method} "
                                  f"draft_k={draft_k} max_tokens={spec.max_tokens}: got {text!r} ({finish}), "
                                  f"alone {ref['text']!r} ({ref['finish']})")
        elif n_tokens is not None and n_tokens != ref["n"]:
            self.fail("mismatch", f"{spec.path} method={method}: {n_tokens} tokens, alone {ref['n']}")

    async def generation(self, spec: Spec, method, draft_k, stream: bool, abandon_after: int | None = None) -> str:
        """One request of the plan; returns its outcome kind."""
        self.requests += 1
        ans = await self.call("POST", spec.path, self.body(spec, method, draft_k, stream),
                              stop_after_events=abandon_after)
        if ans is None:
            return "hang"
        if ans.status == 429:
            self.check_error(ans, spec.path, {429}, "queue full")
            return "queue_full"
        if ans.status != 200:
            self.check_error(ans, spec.path, {503, 504}, f"{spec.path} method={method}")
            return f"error_{ans.status}"
        self.submitted += 1
        if not stream:
            j = json.loads(ans.body)
            c = j["choices"][0]
            text = c["message"]["content"] if spec.chat else c["text"]
            self.check_output(spec, method, draft_k, text, c["finish_reason"], j["usage"]["completion_tokens"])
            self.expect(spec.path, 200)
            self.tokens += j["usage"]["completion_tokens"]
            return "completed"
        if abandon_after is not None and ans.closed_early:
            self.abandoned[spec.path] = self.abandoned.get(spec.path, 0) + 1
            return "abandoned"
        # A full stream: content events, a finish reason, usage, then [DONE] or an error event.
        text, finish, usage, times = [], None, None, []
        for t, j in ans.events:
            if j == "[DONE]":
                continue
            if "error" in j:
                err = j["error"]
                code = err.get("code") if isinstance(err, dict) else None
                if not isinstance(err, dict) or not err.get("message") or code not in STREAM_ERROR_STATUS:
                    self.fail("unexpected", f"stream error event {j}")
                    return "unexpected"
                self.stream_errors += 1
                self.expect(spec.path, STREAM_ERROR_STATUS[code])
                return f"stream_error_{code}"
            if j.get("usage"):
                usage = j["usage"]
            if j.get("choices"):
                piece = event_text(j)
                if piece:
                    text.append(piece)
                    times.append(t)
                finish = j["choices"][0].get("finish_reason") or finish
        if ans.closed_early or usage is None or finish is None:
            self.fail("unexpected", f"stream ended without [DONE], usage or finish reason ({len(ans.events)} events)")
            return "unexpected"
        self.expect(spec.path, 200)
        self.check_output(spec, method, draft_k, "".join(text), finish, usage["completion_tokens"])
        self.tokens += usage["completion_tokens"]
        if times:
            self.ttft.append(times[0] - ans.t_sent)
            self.itl.extend(b - a for a, b in zip(times, times[1:]))
        return "completed"

    # -- faults
    async def malformed(self, rng: random.Random) -> str:
        path = rng.choice(["/v1/chat/completions", "/v1/completions"])
        self.requests += 1
        ans = await self.call("POST", path, rng.choice(MALFORMED))
        if ans is not None:
            self.check_error(ans, path, {400}, "malformed body")
        return "bad_request"

    async def over_cap(self, rng: random.Random) -> str:
        spec = rng.choice(self.greedy)
        self.requests += 1
        ans = await self.call("POST", spec.path, self.body(spec, None, None, rng.random() < 0.5,
                                                           max_tokens=self.a.max_tokens + 1))
        if ans is not None and self.check_error(ans, spec.path, {400}, "max_tokens over the cap"):
            if is_error_body(ans.body)["param"] not in ("max_tokens", "max_completion_tokens"):
                self.fail("unexpected", f"over-cap error names {is_error_body(ans.body)['param']!r}")
        return "over_cap"

    async def oversized(self, rng: random.Random) -> str:
        """A body over --max-body-mb: with its Content-Length, or chunked."""
        path = "/v1/chat/completions"
        self.requests += 1
        size = (self.a.max_body_mb << 20) + 4096
        filler = b'{"messages": [{"role": "user", "content": "' + b"a" * size + b'"}]}'
        chunked = rng.random() < 0.5
        auth = f"Authorization: Bearer {self.a.api_key}\r\n" if self.a.api_key else ""

        async def go() -> Answer:
            reader, writer = await asyncio.open_connection(HOST, self.port)
            try:
                head = f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\n{auth}Content-Type: application/json\r\n"
                try:
                    if chunked:
                        writer.write((head + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode())
                        for i in range(0, len(filler), 65536):
                            part = filler[i:i + 65536]
                            writer.write(b"%x\r\n" % len(part) + part + b"\r\n")
                            await writer.drain()
                        writer.write(b"0\r\n\r\n")
                    else:
                        writer.write((head + f"Content-Length: {len(filler)}\r\nConnection: close\r\n\r\n")
                                     .encode())
                        writer.write(filler)
                    await writer.drain()
                except ConnectionError:
                    pass  # the server may answer and stop reading first: read its answer
                ans = Answer()
                ans.status, ans.headers = await read_head(reader)
                ans.body = await reader.readexactly(int(ans.headers.get("content-length", "0")))
                return ans
            finally:
                writer.close()

        try:
            ans = await asyncio.wait_for(go(), self.a.client_timeout)
        except asyncio.TimeoutError:
            self.hangs += 1
            self.fail("hang", "oversized body: no answer")
            return "too_large"
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            self.fail("unexpected", f"oversized body ({'chunked' if chunked else 'length'}): {e!r}")
            return "too_large"
        self.check_error(ans, path, {413}, f"oversized body ({'chunked' if chunked else 'length'})")
        return "too_large"

    async def stall(self, rng: random.Random) -> str:
        """Headers and half the body, then nothing: the server must give up
        (400 after its read timeout) rather than hold the request forever."""
        spec = rng.choice(self.greedy)
        body = self.body(spec, None, None, True)
        self.requests += 1

        async def go() -> Answer:
            reader, writer = await asyncio.open_connection(HOST, self.port)
            try:
                raw = request_bytes("POST", spec.path, body, self.a.api_key)
                writer.write(raw[: len(raw) - len(body) // 2])
                await writer.drain()
                ans = Answer()
                ans.status, ans.headers = await read_head(reader)
                ans.body = await reader.readexactly(int(ans.headers.get("content-length", "0")))
                return ans
            finally:
                writer.close()

        limit = self.a.read_timeout + 30
        try:
            ans = await asyncio.wait_for(go(), limit)
        except asyncio.TimeoutError:
            self.hangs += 1
            self.fail("hang", f"stalled body: the server held it past {limit} s")
            return "stalled"
        except (ConnectionError, asyncio.IncompleteReadError):
            # Dropped without an answer: also not held; but the server answers 400 here.
            self.fail("unexpected", "stalled body: connection dropped without an answer")
            return "stalled"
        self.check_error(ans, spec.path, {400}, "stalled body")
        return "stalled"

    async def idle(self, rng: random.Random) -> str:
        """Opens a connection and sends nothing: it must be closed by the server."""
        limit = self.a.idle_timeout + 30
        reader, writer = await asyncio.open_connection(HOST, self.port)
        try:
            data = await asyncio.wait_for(reader.read(1), limit)
            if data:
                self.fail("unexpected", f"idle connection got data {data!r}")
        except asyncio.TimeoutError:
            self.hangs += 1
            self.fail("hang", f"idle connection still open after {limit} s")
        except ConnectionError:
            pass  # reset: closed too
        finally:
            writer.close()
        return "idle_closed"

    async def trickle(self, rng: random.Random) -> str:
        """Sends a request's headers a byte at a time, each well within the read
        timeout, and never ends them (slowloris): the server must close the
        connection unanswered at its --header-timeout rather than hold it."""
        every = self.a.read_timeout / 3
        # Under load the connection may first wait for a worker thread.
        limit = self.a.header_timeout + 30
        reader, writer = await asyncio.open_connection(HOST, self.port)
        t0 = time.monotonic()
        try:
            auth = f"Authorization: Bearer {self.a.api_key}\r\n" if self.a.api_key else ""
            writer.write(f"POST /v1/chat/completions HTTP/1.1\r\nHost: {HOST}\r\n{auth}X-Slow: ".encode())
            await writer.drain()
            while True:
                try:
                    data = await asyncio.wait_for(reader.read(4096), every)
                except asyncio.TimeoutError:
                    if time.monotonic() - t0 > limit:
                        self.hangs += 1
                        self.fail("hang", f"trickling client still connected after {limit} s")
                        break
                    writer.write(b"a")
                    await writer.drain()
                    continue
                if data:
                    self.fail("unexpected", f"trickling client got an answer {data[:80]!r}")
                break  # closed
        except ConnectionError:
            pass  # reset: closed too
        finally:
            writer.close()
        took = time.monotonic() - t0
        # The server's deadline starts at the first byte it reads, after this t0.
        if took < self.a.header_timeout - 0.5:
            self.fail("unexpected", f"trickling client closed after {took:.1f} s, before --header-timeout")
        return "header_closed"

    # -- the clients
    def pick(self, rng: random.Random) -> tuple[Spec, str | None, int | None]:
        if rng.random() < 0.8:
            spec = rng.choice(self.greedy)
            method = rng.choice(self.methods_greedy)
        else:
            spec = rng.choice(self.sampled)
            # Sampled ssd requests decode alone (a cohort of one): rare.
            method = "ssd" if self.a.draft and rng.random() < 0.05 else rng.choice(self.methods_sampled)
        draft_k = rng.choice([None, None, 2, 5]) if method in ("chain", "ngram") and spec.greedy else None
        return spec, method, draft_k

    async def client(self, cid: int, end: float) -> None:
        rng = random.Random(self.a.seed * 7919 + cid)
        actions = [("stream", 70), ("nonstream", 8), ("abandon", 6), ("malformed", 4), ("over_cap", 3),
                   ("oversized", 2), ("stall", 3), ("idle", 4), ("trickle", 3)]
        names, weights = zip(*actions)
        faults = [n for n in names if n not in ("stream", "nonstream")]
        first = True
        while time.monotonic() < end and self.srv.alive():
            # The first clients start with one fault each, so that a short run has every kind.
            action = faults[cid] if first and cid < len(faults) else rng.choices(names, weights)[0]
            first = False
            if action in ("stream", "nonstream", "abandon"):
                spec, method, draft_k = self.pick(rng)
                kind = await self.generation(spec, method, draft_k, action != "nonstream",
                                             abandon_after=rng.randint(1, 3) if action == "abandon" else None)
            else:
                kind = await getattr(self, action)(rng)
            self.count(kind)
            if kind == "completed":
                self.completed += 1
            elif kind in ("queue_full", "error_503"):
                await asyncio.sleep(rng.uniform(0.5, 1.0))  # Retry-After: 1, with jitter

    async def burst_at(self, when: float, n: int = 0, record: bool = True) -> None:
        """n requests at once (default: 16 more than the batch and queue hold)."""
        await asyncio.sleep(max(0.0, when - time.monotonic()))
        n = n or self.a.max_queue + self.a.max_batch + 16
        spec = Spec(False, "Say hi.", 4)
        body = self.body(spec, "ar", None, False)

        async def one() -> int:
            self.requests += 1
            ans = await self.call("POST", spec.path, body)
            if ans is None:
                return -1
            if ans.status == 200:
                self.submitted += 1
                self.expect(spec.path, 200)
                self.completed += 1
                self.tokens += json.loads(ans.body)["usage"]["completion_tokens"]
            else:
                self.check_error(ans, spec.path, {429}, "burst")
            return ans.status

        statuses = await asyncio.gather(*[one() for _ in range(n)])
        if not record:
            return
        self.burst = {"requests": n, **{str(s): statuses.count(s) for s in sorted(set(statuses))}}
        self.kinds["queue_full"] = self.kinds.get("queue_full", 0) + statuses.count(429)
        self.kinds["completed"] = self.kinds.get("completed", 0) + statuses.count(200)
        if statuses.count(429) == 0:
            self.fail("burst", f"a burst of {n} (queue {self.a.max_queue}) saw no queue-full answer: {self.burst}")

    async def metrics(self) -> dict:
        ans = await self.call("GET", "/metrics")
        if ans is None or ans.status != 200:
            raise SystemExit(f"/metrics failed: {ans and ans.status}")
        return parse_metrics(ans.body.decode())

    async def references(self) -> None:
        for spec in self.greedy:
            self.refs[(spec, None)] = await self.alone(spec, "ar")
        for spec in self.sampled:
            for m in self.methods_sampled:
                self.refs[(spec, m)] = await self.alone(spec, m)

    async def alone(self, spec: Spec, method: str) -> dict:
        ans = await self.call("POST", spec.path, self.body(spec, method, None, False))
        if ans is None or ans.status != 200:
            raise SystemExit(f"reference {spec} failed: {ans and ans.status} {ans and ans.body[:300]!r}")
        j = json.loads(ans.body)
        c = j["choices"][0]
        return {"text": c["message"]["content"] if spec.chat else c["text"], "finish": c["finish_reason"],
                "n": j["usage"]["completion_tokens"]}

    async def wait_idle(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            m = await self.metrics()
            idle = (m.get("specdec_active_sequences") == 0 and m.get("specdec_queue_depth") == 0 and
                    m.get('specdec_kv_tokens{cache="target"}', 0) == 0 and
                    m.get('specdec_kv_tokens{cache="draft"}', 0) == 0)
            if idle or time.monotonic() > deadline:
                return m
            await asyncio.sleep(0.25)

    async def shutdown_under_load(self) -> dict:
        """Long streams, then SIGTERM during them: each finishes or gets a 503
        error event, the report names them so, new requests get 503 +
        Retry-After, and the server exits 0."""
        n = self.a.max_batch + 2
        # Half of them short (they finish within the grace), half as long as the cap allows.
        specs = [Spec(True, PROMPTS[i % len(PROMPTS)], self.a.max_tokens if i % 2 else 24) for i in range(n)]
        # The signal must come while the batch is full and some wait, so that
        # both the grace and the refusal of waiting requests are exercised. On
        # a fast machine every stream can end between two looks at /metrics:
        # then they are checked as ordinary requests and sent again.
        full, attempts = False, 0
        while True:
            attempts += 1
            streams = [asyncio.create_task(http(self.port, "POST", s.path, self.body(s, "ar", None, True),
                                                key=self.a.api_key)) for s in specs]
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all(t.done() for t in streams):
                m = await self.metrics()
                if (m.get("specdec_active_sequences", 0) >= self.a.max_batch
                        and m.get("specdec_queue_depth", 0) >= 1):
                    full = True
                    break
                await asyncio.sleep(0.02)
            if full or attempts >= 5 or not all(t.done() for t in streams):
                break
            for ans in await asyncio.gather(*streams, return_exceptions=True):
                if isinstance(ans, BaseException) or ans.status != 200:
                    self.fail("shutdown", f"a stream before the signal: {ans!r}")
        if not full:
            self.fail("shutdown", f"the batch was never seen full with requests waiting ({attempts} tries)")
        self.srv.proc.send_signal(signal.SIGTERM)
        t_sig = time.monotonic()
        await asyncio.sleep(0.3)
        late = None
        try:
            late = await asyncio.wait_for(http(self.port, "POST", specs[0].path,
                                               self.body(specs[0], "ar", None, False), key=self.a.api_key), 10)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass  # already closed: fine if the grace is over
        out = {"streams": n, "finished": 0, "cancelled": 0, "refused_or_cancelled_ids": [], "finished_ids": [],
               "full_at_signal": full, "attempts": attempts}
        finished_after_signal = set()  # surely still running at the signal
        try:
            done = await asyncio.wait_for(asyncio.gather(*streams, return_exceptions=True),
                                          self.a.shutdown_grace + 30)
        except asyncio.TimeoutError:
            self.hangs += 1
            self.fail("hang", "streams not ended by the shutdown")
            done = []
        for ans in done:
            if isinstance(ans, BaseException) or ans.status != 200:
                self.fail("shutdown", f"a stream at shutdown: {ans!r}")
                continue
            evs = [j for _, j in ans.events if j != "[DONE]"]
            rid = next((j.get("id") for j in evs if isinstance(j, dict) and "id" in j), None)
            errs = [j["error"] for j in evs if "error" in j]
            if errs:
                if errs[0].get("code") != "shutting_down":
                    self.fail("shutdown", f"a stream ended with {errs[0]}")
                out["cancelled"] += 1
                out["refused_or_cancelled_ids"].append(rid)
            elif any(j.get("choices") and j["choices"][0].get("finish_reason") for j in evs):
                out["finished"] += 1
                out["finished_ids"].append(rid)
                if ans.events[-1][0] > t_sig + 0.5:
                    finished_after_signal.add(rid)
            else:
                self.fail("shutdown", f"a stream ended without finish or error ({len(evs)} events)")
        if late is not None:
            out["late_request_status"] = late.status
            if late.status != 503 or not late.headers.get("retry-after") or is_error_body(late.body) is None:
                self.fail("shutdown", f"a request during the grace got {late.status} {late.headers}")
        try:
            code = self.srv.proc.wait(timeout=self.a.shutdown_grace + 30)
        except subprocess.TimeoutExpired:
            self.fail("shutdown", "the server did not exit after SIGTERM")
            self.srv.kill()
            code = None
        out["exit_code"] = code
        if code != 0:
            self.fail("shutdown", f"exit status {code} after SIGTERM")
        await asyncio.sleep(0.2)  # the stderr reader's last lines
        report = next((l.strip() for l in self.srv.lines if "specdec serve: shutdown:" in l), "")
        out["report"] = report
        if not report:
            self.fail("shutdown", "no shutdown report on stderr")
        else:
            m = re.search(r"(\d+) running finished(?: \(([^)]*)\))?, (\d+) running cancelled(?: \(([^)]*)\))?, "
                          r"(\d+) waiting cancelled(?: \(([^)]*)\))?", report)
            if not m:
                self.fail("shutdown", f"unparsed report {report!r}")
            else:
                ids = lambda s: set(s.split(", ")) if s else set()  # noqa: E731
                fin, can, ref = ids(m.group(2)), ids(m.group(4)), ids(m.group(6))
                out["report_counts"] = {"finished": len(fin), "cancelled": len(can), "refused": len(ref)}
                # Finished in the report: finished for the clients too, and every
                # stream that ended well after the signal is there; cancelled or
                # refused in the report: exactly the streams that got a 503 event.
                if (not fin <= set(out["finished_ids"]) or not finished_after_signal <= fin
                        or (can | ref) != set(out["refused_or_cancelled_ids"])):
                    self.fail("shutdown", f"report {report!r} disagrees with the clients: finished "
                                          f"{sorted(out['finished_ids'])}, cancelled "
                                          f"{sorted(out['refused_or_cancelled_ids'])}")
        return out

    async def run(self) -> dict:
        a = self.a
        t0 = time.monotonic()
        await self.references()
        t_refs = time.monotonic() - t0
        print(f"serve_load: {len(self.refs)} references in {t_refs:.1f} s", file=sys.stderr)
        # Warm-up: every sequence slot of both caches once, with the longest
        # requests and every method (then an SSD cohort), so that the idle RSS
        # includes the KV pages and buffers any load touches first.
        longest = sorted(self.greedy, key=lambda s: -s.max_tokens)
        methods = [m for m in self.methods_greedy if m != "ssd"]
        await asyncio.gather(*[self.generation(longest[i % len(longest)], methods[i % len(methods)], None, True)
                               for i in range(a.max_batch)])
        if a.draft:
            await asyncio.gather(*[self.generation(longest[i % len(longest)], "ssd", None, True)
                                   for i in range(a.max_batch)])
        # ... and more connections at once than the server has worker threads
        # (max batch + max queue + 32): it keeps the threads it starts, and
        # their allocator arenas.
        await self.burst_at(0, n=a.max_batch + a.max_queue + 40, record=False)
        await self.wait_idle(30)
        await asyncio.sleep(1.0)
        m0 = await self.metrics()
        rss_before = self.srv.rss_kib()
        heap_before = self.srv.rss_kib("RssAnon") - kv_resident_kib(m0)
        # The warm-up is not part of the load's figures.
        for attr in ("ttft", "itl"):
            getattr(self, attr).clear()
        self.tokens = self.requests = self.completed = self.submitted = self.stream_errors = 0
        self.expected.clear()
        self.kinds.clear()

        rss_peak = rss_before
        stop_sampling = asyncio.Event()

        async def sample() -> None:
            nonlocal rss_peak
            while not stop_sampling.is_set():
                rss_peak = max(rss_peak, self.srv.rss_kib())
                if not self.srv.alive():
                    return
                await asyncio.sleep(0.25)

        print(f"serve_load: idle RSS {rss_before / 1024:.1f} MiB; load: {a.clients} clients for {a.duration:g} s",
              file=sys.stderr)
        sampler = asyncio.create_task(sample())
        t_load = time.monotonic()
        end = t_load + a.duration
        await asyncio.gather(self.burst_at(t_load + a.duration / 2),
                             *[self.client(i, end) for i in range(a.clients)])
        load_s = time.monotonic() - t_load
        crashed = not self.srv.alive()
        stop_sampling.set()
        await sampler
        out: dict = {}
        if crashed:
            self.fail("crash", f"the server exited during the load with {self.srv.proc.returncode}")
        else:
            m1 = await self.wait_idle(60)
            if m1.get("specdec_active_sequences") or m1.get("specdec_queue_depth"):
                self.fail("not_idle", "requests still active or queued 60 s after the load")
            kv = {c: m1.get(f'specdec_kv_tokens{{cache="{c}"}}') for c in ("target", "draft")}
            if any(kv.values()):
                self.fail("kv", f"KV usage after the load: {kv}")
            await asyncio.sleep(2.0)
            # The metrics the releasers record as streams end: wait for them to settle.
            m1 = await self.settled_metrics(m0)
            rss_after = self.srv.rss_kib()
            heap_after = self.srv.rss_kib("RssAnon") - kv_resident_kib(m1)
            out.update(self.compare_metrics(m0, m1))
            out["kv_tokens_after"] = kv
            # KV pages, once written, stay resident (the cache is allocated
            # once, untouched pages cost nothing, and a load writes slots and
            # SSD branch sequences nothing wrote before): that growth is
            # bounded by the cache's size and reported apart. What must
            # return to idle is the rest of the anonymous memory (heap, stacks).
            allowance = max(a.rss_slack_mb * 1024, heap_before * a.rss_slack_frac)
            if heap_after > heap_before + allowance:
                self.fail("rss", f"anonymous RSS less KV after the load {heap_after / 1024:.1f} MiB vs idle "
                                 f"{heap_before / 1024:.1f} MiB (allowed +{allowance / 1024:.1f} MiB)")
            out["rss_mib"] = {"before": rss_before / 1024, "peak": rss_peak / 1024, "after": rss_after / 1024,
                              "hwm": self.srv.rss_kib("VmHWM") / 1024,
                              "heap_before": heap_before / 1024, "heap_after": heap_after / 1024,
                              "kv_before": kv_resident_kib(m0) / 1024, "kv_after": kv_resident_kib(m1) / 1024}
            out["shutdown"] = await self.shutdown_under_load()
        out.update({
            "model": a.model, "draft": a.draft, "clients": a.clients, "duration_s": round(load_s, 1),
            "references_s": round(t_refs, 1), "max_batch": a.max_batch, "max_queue": a.max_queue,
            "requests": self.requests, "completed": self.completed,
            "errors_by_kind": {k: v for k, v in sorted(self.kinds.items()) if k != "completed"},
            "greedy_checked": self.greedy_checked, "seeded_checked": self.seeded_checked,
            "mismatches": self.mismatches, "seeded_mismatches": self.seeded_mismatches,
            "hangs": self.hangs, "crashes": int(crashed), "burst": self.burst,
            "ttft_s": {q: pct(self.ttft, v) for q, v in (("p50", .5), ("p90", .9), ("p99", .99))},
            "inter_token_s": {q: pct(self.itl, v) for q, v in (("p50", .5), ("p90", .9), ("p99", .99))},
            "completion_tokens": self.tokens, "throughput_tok_s": self.tokens / load_s if load_s else 0.0,
            "failures": self.failures, "failure_counts": self.n_fail,
        })
        out["ok"] = not self.n_fail
        return out

    async def settled_metrics(self, m0: dict) -> dict:
        want = sum(self.expected.values()) + sum(self.abandoned.values())
        deadline = time.monotonic() + 15
        while True:
            m1 = await self.metrics()
            d = {k: v - requests_by_status(m0).get(k, 0) for k, v in requests_by_status(m1).items()}
            got = sum(v for (ep, _), v in d.items() if ep.startswith("/v1/"))
            if got >= want or time.monotonic() > deadline:
                return m1
            await asyncio.sleep(0.25)

    def compare_metrics(self, m0: dict, m1: dict) -> dict:
        """specdec_requests_total by endpoint and status against the clients'
        tally (a stream we hung up on is 499, or 200 if it had ended first);
        generations finished against the requests that were queued."""
        before, after = requests_by_status(m0), requests_by_status(m1)
        srv = {k: v - before.get(k, 0) for k, v in after.items() if k[0].startswith("/v1/")}
        srv = {k: int(v) for k, v in srv.items() if v}
        problems = []
        for ep in sorted({k[0] for k in srv} | {k[0] for k in self.expected} | set(self.abandoned)):
            aband = self.abandoned.get(ep, 0)
            statuses = {k[1] for k in srv if k[0] == ep} | {k[1] for k in self.expected if k[0] == ep}
            for st in sorted(statuses - {200, 499}):
                if srv.get((ep, st), 0) != self.expected.get((ep, st), 0):
                    problems.append(f"{ep} {st}: server {srv.get((ep, st), 0)}, clients "
                                    f"{self.expected.get((ep, st), 0)}")
            s200, s499, c200 = srv.get((ep, 200), 0), srv.get((ep, 499), 0), self.expected.get((ep, 200), 0)
            if s200 + s499 != c200 + aband or s499 > aband or s200 < c200:
                problems.append(f"{ep} 200/499: server {s200}/{s499}, clients {c200} completed + {aband} abandoned")
        completions = m1.get("specdec_completions_total", 0) - m0.get("specdec_completions_total", 0)
        # Every queued job is retired once (finished, or cancelled by its client) unless it failed.
        want = self.submitted - self.stream_errors
        if int(completions) != want:
            problems.append(f"specdec_completions_total +{int(completions)}, clients: {want} queued and not failed")
        gen = m1.get("specdec_tokens_generated_total", 0) - m0.get("specdec_tokens_generated_total", 0)
        if gen < self.tokens:
            problems.append(f"specdec_tokens_generated_total +{int(gen)} < {self.tokens} tokens the clients got")
        for p in problems:
            self.fail("metrics", p)
        return {"metrics_agree": not problems,
                "metrics_requests": {f"{ep} {st}": n for (ep, st), n in sorted(srv.items())},
                "metrics_completions": int(completions), "metrics_tokens_generated": int(gen)}


def fmt_pct(d: dict, scale: float = 1.0, unit: str = "s") -> str:
    if d["p50"] is None:
        return "-"
    return " / ".join(f"{d[q] * scale:.3f}" for q in ("p50", "p90", "p99")) + f" {unit}"


def table(r: dict) -> str:
    rss = r.get("rss_mib", {})
    sd = r.get("shutdown", {})
    rows = [
        ("model", r["model"] + (f" (draft {r['draft']})" if r["draft"] else "")),
        ("load", f"{r['clients']} clients, {r['duration_s']} s, max batch {r['max_batch']}, queue {r['max_queue']}"),
        ("requests", r["requests"]),
        ("completed", r["completed"]),
        ("errors by kind", ", ".join(f"{k} {v}" for k, v in r["errors_by_kind"].items()) or "none"),
        ("burst", ", ".join(f"{k} {v}" for k, v in r["burst"].items()) or "-"),
        ("mismatches", f"{r['mismatches']} of {r['greedy_checked']} greedy, {r['seeded_mismatches']} of "
                       f"{r['seeded_checked']} seeded"),
        ("hangs", r["hangs"]),
        ("crashes", r["crashes"]),
        ("TTFT p50/p90/p99", fmt_pct(r["ttft_s"])),
        ("inter-token p50/p90/p99", fmt_pct(r["inter_token_s"], 1000, "ms")),
        ("throughput", f"{r['throughput_tok_s']:.1f} tok/s ({r['completion_tokens']} completion tokens)"),
        ("RSS before/peak/after", " / ".join(f"{rss[k]:.1f}" for k in ("before", "peak", "after")) + " MiB"
         if rss else "-"),
        ("  of it KV before/after", f"{rss['kv_before']:.1f} / {rss['kv_after']:.1f} MiB" if rss else "-"),
        ("  anon less KV before/after", f"{rss['heap_before']:.1f} / {rss['heap_after']:.1f} MiB" if rss else "-"),
        ("KV tokens after", ", ".join(f"{k} {int(v or 0)}" for k, v in r.get("kv_tokens_after", {}).items()) or "-"),
        ("metrics agree", r.get("metrics_agree", "-")),
        ("shutdown", f"exit {sd.get('exit_code')}, {sd.get('finished', 0)} finished, {sd.get('cancelled', 0)} "
                     f"cancelled of {sd.get('streams', 0)} streams (signal at a full batch: "
                     f"{sd.get('full_at_signal')}, try {sd.get('attempts')})" if sd else "-"),
        ("result", "OK" if r["ok"] else "FAILED: " + ", ".join(f"{k} {v}" for k, v in r["failure_counts"].items())),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("SPECDEC_BIN", str(REPO / "build" / "release" / "specdec")),
                    help="specdec binary (default $SPECDEC_BIN, else build/release/specdec)")
    ap.add_argument("-m", "--model", default="smollm2-135m-instruct-q4_1", help="model name or GGUF path")
    ap.add_argument("-d", "--draft", default="", help="draft model (adds chain, tree and ssd)")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS),
                    help=f"prompts in the plan (1-{len(PROMPTS)}; each needs references computed first)")
    ap.add_argument("--duration", type=float, default=180, help="seconds of load")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--max-queue", type=int, default=64,
                    help="the server's queue (default: room for the default 64 clients; the burst exceeds it)")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--max-body-mb", type=int, default=1, help="the server's body limit (small: cheap to exceed)")
    ap.add_argument("--max-tokens", type=int, default=256, help="the server's max_tokens cap")
    ap.add_argument("--request-timeout", type=float, default=300, help="the server's per-request timeout")
    ap.add_argument("--read-timeout", type=int, default=3, help="the server's read timeout (stalled bodies)")
    ap.add_argument("--header-timeout", type=int, default=4,
                    help="the server's header deadline (clients trickling their headers)")
    ap.add_argument("--idle-timeout", type=int, default=3, help="the server's idle-connection timeout")
    ap.add_argument("--shutdown-grace", type=int, default=3, help="the server's shutdown grace")
    ap.add_argument("--client-timeout", type=float, default=360, help="a client waiting longer has hung")
    ap.add_argument("--start-timeout", type=float, default=120)
    ap.add_argument("--api-key", default="load-test-key")
    ap.add_argument("--rss-slack-mb", type=float, default=16,
                    help="anonymous RSS less KV after the load may exceed idle by this much ...")
    ap.add_argument("--rss-slack-frac", type=float, default=0.10, help="... or by this fraction, if larger")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--server-arg", action="append", default=[], help="extra argument for specdec serve")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if not Path(args.bin).exists():
        ap.error(f"no specdec binary at {args.bin} (build it, or give --bin / $SPECDEC_BIN)")
    args.model_id = None  # what /v1/models calls it
    srv = ServerProc(args)
    print(f"serve_load: {' '.join(srv.cmd)}", file=sys.stderr)
    try:
        load = Load(args, srv)

        async def go() -> dict:
            models = await load.call("GET", "/v1/models")
            args.model_id = json.loads(models.body)["data"][0]["id"]
            return await load.run()

        result = asyncio.run(go())
    finally:
        srv.kill()
    result["server_command"] = srv.cmd
    print(table(result))
    for f in result["failures"]:
        print("  " + f, file=sys.stderr)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
