"""End-to-end tests of `specdec serve` (OpenAI-compatible server, continuous batching).

Starts the server binary ($SPECDEC_BIN, default build/release/specdec) on a free
loopback port with the default (CI) model, talks to it with the official
`openai` client and with raw http.client/sockets for malformed input, and
always kills it at the end. Every network call has a timeout.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import DEFAULT_MODEL, REPO_ROOT, model_path

openai = pytest.importorskip("openai")

BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))
KEY = "test-key-123"
CTX = 512
TIMEOUT = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *extra: str, api_key: str | None = KEY):
        if not BIN.exists():
            pytest.fail(f"server binary {BIN} missing (build it or set SPECDEC_BIN)", pytrace=False)
        self.port = free_port()
        self.key = api_key
        args = [str(BIN), "serve", "-m", str(model_path(DEFAULT_MODEL)), "--host", "127.0.0.1",
                "--port", str(self.port), "--ctx", str(CTX), "--threads", "2", *extra]
        if api_key:
            args += ["--api-key", api_key]
        env = dict(os.environ)
        env.pop("SPECDEC_API_KEY", None)
        # An unnamed temporary file, made through the language's API.
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                pytest.fail(f"server exited early:\n{self.log.read()}", pytrace=False)
            try:
                status, _ = self.request("GET", "/health", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        pytest.fail("server did not become healthy within 60 s", pytrace=False)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def client(self, **kw) -> "openai.OpenAI":
        return openai.OpenAI(base_url=self.base, api_key=self.key or "none", timeout=TIMEOUT, max_retries=0, **kw)

    def request(self, method: str, path: str, body: bytes | str | None = None, headers: dict | None = None,
                timeout: float = 30, auth: bool = True) -> tuple[int, bytes]:
        h = {"Content-Type": "application/json"}
        if auth and self.key:
            h["Authorization"] = f"Bearer {self.key}"
        h.update(headers or {})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def health(self) -> dict:
        status, body = self.request("GET", "/health", timeout=5)
        assert status == 200
        return json.loads(body)

    def metrics(self) -> str:
        status, body = self.request("GET", "/metrics", timeout=5)
        assert status == 200
        return body.decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="module")
def server():
    s = Server("--max-batch", "8", "--max-queue", "16")
    try:
        yield s
    finally:
        s.stop()
    assert s.proc.returncode is not None


def generate_ref(prompt: str, n: int, chat: bool) -> dict:
    args = [str(BIN), "generate", "-m", str(model_path(DEFAULT_MODEL)), "-p", prompt, "-n", str(n), "--json",
            "--threads", "2", "--ctx", str(CTX), "--method", "ar"]
    if chat:
        args.append("--chat")
    out = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


MODEL = DEFAULT_MODEL


# --- OpenAI client: chat and completions, streaming and not ----------------------

def test_models_and_health(server):
    assert server.health()["status"] == "ok"
    ids = [m.id for m in server.client().models.list()]
    assert ids == [MODEL]


def test_chat_matches_generate(server):
    prompt = "What is the capital of France?"
    ref = generate_ref(prompt, 24, chat=True)
    r = server.client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=24, temperature=0)
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == ref["text"]
    assert r.choices[0].finish_reason == ref["finish_reason"]
    assert r.usage.prompt_tokens == ref["n_prompt"]
    assert r.usage.completion_tokens == ref["n_generated"]
    assert r.usage.total_tokens == ref["n_prompt"] + ref["n_generated"]


def test_completion_matches_generate(server):
    prompt = "The quick brown fox"
    ref = generate_ref(prompt, 20, chat=False)
    r = server.client().completions.create(model=MODEL, prompt=prompt, max_tokens=20, temperature=0)
    assert r.object == "text_completion"
    assert r.choices[0].text == ref["text"]
    assert r.usage.completion_tokens == ref["n_generated"]


def test_ignore_eos_extension(server):
    """`ignore_eos` (llama.cpp's and vLLM's extension) generates exactly
    max_tokens past the end-of-generation token, the text the CLI's
    --ignore-eos gives; without it the same request stops at the EOS."""
    prompt, n = "Count from one to one thousand: one, two, three,", 160
    c = server.client()
    plain = c.completions.create(model=MODEL, prompt=prompt, max_tokens=n, temperature=0)
    assert plain.choices[0].finish_reason == "stop" and plain.usage.completion_tokens < n, plain.usage
    r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=n, temperature=0,
                             extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == n, r.usage
    args = [str(BIN), "generate", "-m", str(model_path(DEFAULT_MODEL)), "-p", prompt, "-n", str(n), "--json",
            "--threads", "2", "--ctx", str(CTX), "--method", "ar", "--ignore-eos"]
    ref = json.loads(subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT,
                                    check=True).stdout.strip().splitlines()[-1])
    assert r.choices[0].text == ref["text"]
    assert r.choices[0].text.startswith(plain.choices[0].text)
    status, body = server.request("POST", "/v1/completions", json.dumps(
        {"model": MODEL, "prompt": prompt, "max_tokens": 4, "ignore_eos": "yes"}))
    assert status == 400 and b"ignore_eos" in body, body


def stream_chat(client, content: str, max_tokens: int, **kw) -> tuple[str, str | None, object]:
    text, finish, usage = [], None, None
    s = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                       max_tokens=max_tokens, temperature=0, stream=True,
                                       stream_options={"include_usage": True}, **kw)
    for ch in s:
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            text.append(c.delta.content or "")
            finish = c.finish_reason or finish
    return "".join(text), finish, usage


def test_streaming_equals_non_streaming(server):
    c = server.client()
    content = "Write a haiku about the sea."
    full = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                     max_tokens=30, temperature=0)
    text, finish, usage = stream_chat(c, content, 30)
    assert text == full.choices[0].message.content
    assert finish == full.choices[0].finish_reason
    assert usage.completion_tokens == full.usage.completion_tokens

    pieces = [ch.choices[0].text for ch in c.completions.create(
        model=MODEL, prompt="One, two, three,", max_tokens=12, temperature=0, stream=True) if ch.choices]
    ref = c.completions.create(model=MODEL, prompt="One, two, three,", max_tokens=12, temperature=0)
    assert "".join(pieces) == ref.choices[0].text


def test_stop_strings_and_seeded_sampling(server):
    c = server.client()
    ref = generate_ref("Count: 1, 2, 3,", 30, chat=False)
    cut = ref["text"][: max(1, len(ref["text"]) // 2)][-2:]
    r = c.completions.create(model=MODEL, prompt="Count: 1, 2, 3,", max_tokens=30, temperature=0, stop=[cut])
    assert r.choices[0].finish_reason == "stop"
    assert cut not in r.choices[0].text
    assert ref["text"].startswith(r.choices[0].text)
    # Same seed, same sample; the request's own Rng is independent of others.
    a = c.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=16, temperature=0.9, seed=7)
    b = c.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=16, temperature=0.9, seed=7)
    assert a.choices[0].text == b.choices[0].text


def test_specdec_extension(server):
    c = server.client()
    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                  temperature=0, extra_body={"specdec": {"method": "ar"}})
    assert r.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                  extra_body={"specdec": {"method": "chain", "draft_k": 4}})
    assert "method chain not available" in e.value.body["message"]
    # A method that needs a draft, on a server without one: 400 saying so.
    for method in ["chain", "tree", "ssd"]:
        st, err = error_of(server.request("POST", "/v1/completions", json.dumps(
            {"model": MODEL, "prompt": "Hi", "max_tokens": 2, "specdec": {"method": method}})))
        assert st == 400 and err["param"] == "specdec.method" and err["code"] == "draft_model_required"
        assert "needs a draft model" in err["message"]
    # Methods without a draft model work here.
    ref = c.completions.create(model=MODEL, prompt="One, two, three,", max_tokens=12, temperature=0)
    r = c.completions.create(model=MODEL, prompt="One, two, three,", max_tokens=12, temperature=0,
                             extra_body={"specdec": {"method": "ngram", "draft_k": 3}})
    assert r.choices[0].text == ref.choices[0].text


def test_default_auto_is_ar_and_reports_its_shapes(server):
    """Greedy requests that name no method get auto (here without a draft
    model: prompt lookup or plain AR steps); the text is AR's, and /metrics
    counts the shapes chosen with predicted and measured seconds."""
    c = server.client()
    prompt = "def add(a, b):\n    return a + b\n\ndef add3(a, b, c):\n    return add(add(a, b), c)\n\ndef add4("
    ar = c.completions.create(model=MODEL, prompt=prompt, max_tokens=32, temperature=0,
                              extra_body={"specdec": {"method": "ar"}})

    def counters(m: str) -> dict:
        # The server is shared by this module's tests: compare before and after.
        out = {}
        for line in m.splitlines():
            if line.startswith("specdec_auto_rounds_total{"):
                out[line.split("\"")[1]] = float(line.split()[-1])
            elif line.startswith('specdec_method_rounds_total{method="auto"}'):
                out["method_rounds"] = float(line.split()[-1])
            elif line.startswith("specdec_auto_") and "{" not in line:
                out[line.split()[0]] = float(line.split()[1])
        return out

    before = counters(server.metrics())
    auto = c.completions.create(model=MODEL, prompt=prompt, max_tokens=32, temperature=0)
    assert auto.choices[0].text == ar.choices[0].text
    after = counters(server.metrics())
    d = {k: after[k] - before.get(k, 0.0) for k in after}
    assert {"none", "lookup", "draft"} <= set(after) and d["draft"] == 0
    # Every decode round of the auto request is counted under the shape it got:
    # as many as the per-method counter has, and at most one per token after the first.
    assert d["none"] + d["lookup"] == d["method_rounds"]
    assert 1 <= d["method_rounds"] <= 31
    assert d["specdec_auto_predicted_seconds_total"] > 0 and d["specdec_auto_measured_seconds_total"] > 0


# --- load: N concurrent streaming clients ------------------------------------------

PROMPTS = [f"Tell me a short fact about the number {i}." for i in range(8)]


def test_concurrent_streaming_load(server):
    c = server.client()
    n_tok = 32
    # References, one at a time (identical to `specdec generate`, checked above).
    refs = [c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": p}],
                                      max_tokens=n_tok, temperature=0) for p in PROMPTS]
    # Single-stream throughput.
    t0 = time.perf_counter()
    single_text, _, single_usage = stream_chat(c, PROMPTS[0], n_tok)
    single_s = time.perf_counter() - t0
    assert single_text == refs[0].choices[0].message.content

    def one(i: int):
        t = time.perf_counter()
        text, finish, usage = stream_chat(server.client(), PROMPTS[i], n_tok)
        return i, text, finish, usage, time.perf_counter() - t

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(PROMPTS)) as ex:
        results = list(ex.map(one, range(len(PROMPTS)), timeout=TIMEOUT * 2))
    wall = time.perf_counter() - t0
    lat = sorted(r[4] for r in results)
    total_tokens = sum(r[3].completion_tokens for r in results)
    for i, text, finish, usage, _ in results:
        assert text == refs[i].choices[0].message.content, f"client {i} got different text under batching"
        assert finish == refs[i].choices[0].finish_reason
    p99 = lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))]
    print(f"\n[load] N={len(PROMPTS)} streaming clients, {n_tok} max tokens each: "
          f"p50 {statistics.median(lat):.2f} s, p99 {p99:.2f} s, total {total_tokens / wall:.1f} tok/s "
          f"(wall {wall:.2f} s); single stream {single_usage.completion_tokens / single_s:.1f} tok/s")
    m = server.metrics()
    assert "specdec_mean_batch_size" in m and "specdec_request_latency_seconds_bucket" in m


def abandon_stream(port, extra=None):
    """Raw socket: read the first few SSE chunks of a long streamed chat, then vanish."""
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Tell me a long story."}],
                       "max_tokens": 400, "temperature": 0, "stream": True, **(extra or {})})
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    got = b""
    while got.count(b"data: ") < 4:
        chunk = s.recv(4096)
        assert chunk
        got += chunk
    s.close()
    return got


def check_disconnect_spares_others(srv, prompts, refs, settle_s, quitter_extra=None, stream_kwargs=None):
    """One client vanishes mid-stream while others stream `prompts` (each with its
    `stream_kwargs`): theirs equal `refs`, the abandoned sequence is freed within
    `settle_s` and recorded as a 499."""
    kwargs = stream_kwargs or [{} for _ in prompts]
    with ThreadPoolExecutor(len(prompts) + 1) as ex:
        q = ex.submit(abandon_stream, srv.port, quitter_extra)
        futs = [ex.submit(stream_chat, srv.client(), p, 24, **kw) for p, kw in zip(prompts, kwargs)]
        assert b"200 OK" in q.result(timeout=TIMEOUT)
        for f, ref in zip(futs, refs):
            assert f.result(timeout=TIMEOUT)[0] == ref
    deadline = time.time() + settle_s
    while time.time() < deadline and "specdec_active_sequences 0" not in srv.metrics():
        time.sleep(0.2)
    m = srv.metrics()
    assert "specdec_active_sequences 0" in m
    assert 'status="499"' in m


def test_disconnect_mid_stream_does_not_disturb_others(server):
    c = server.client()
    refs = [c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": p}],
                                      max_tokens=24, temperature=0).choices[0].message.content for p in PROMPTS[:3]]
    check_disconnect_spares_others(server, PROMPTS[:3], refs, settle_s=20)
    assert server.health()["status"] == "ok"


# --- malformed input on every endpoint ----------------------------------------------

def error_of(status_body: tuple[int, bytes]) -> tuple[int, dict]:
    status, body = status_body
    err = json.loads(body)["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return status, err


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_malformed_bodies(server, path):
    chat = path.endswith("chat/completions")
    good = ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]} if chat
            else {"model": MODEL, "prompt": "hi"})
    for raw in [b"", b"{", b"not json", b"[]", b"null", b"\xff\xfe", b'{"a":' + b"[" * 5000]:
        st, err = error_of(server.request("POST", path, raw))
        assert st == 400, raw
    bad_fields = [
        {"max_tokens": "ten"}, {"max_tokens": 0}, {"max_tokens": -1}, {"max_tokens": 1.5},
        {"temperature": "hot"}, {"temperature": -1}, {"top_p": 2}, {"seed": "x"}, {"stop": 5},
        {"stop": ["ok", 1]}, {"stream": "yes"}, {"n": 3}, {"model": 12}, {"specdec": "chain"},
        {"specdec": {"method": "tree"}}, {"specdec": {"draft_k": -1}},
        {"messages": "hi"} if chat else {"prompt": 42},
        {"messages": [{"role": "user", "content": {"x": 1}}]} if chat else {"prompt": [1, 2, 3]},
    ]
    for extra in bad_fields:
        st, err = error_of(server.request("POST", path, json.dumps({**good, **extra})))
        assert st == 400, extra
        assert err["type"] == "invalid_request_error"
    st, err = error_of(server.request("POST", path, json.dumps({**good, "model": "gpt-4"})))
    assert st == 400 and err["code"] == "model_not_found"
    long_prompt = "hello " * (CTX * 2)
    body = ({**good, "messages": [{"role": "user", "content": long_prompt}]} if chat else {**good, "prompt": long_prompt})
    st, err = error_of(server.request("POST", path, json.dumps(body)))
    assert st == 400 and err["code"] == "context_length_exceeded"
    st, _ = error_of(server.request("GET", path))
    assert st == 405
    # Still serving.
    assert server.request("POST", path, json.dumps({**good, "max_tokens": 2}))[0] == 200


@pytest.mark.parametrize("method,path", [("GET", "/health"), ("GET", "/v1/models"), ("GET", "/metrics"),
                                         ("POST", "/v1/chat/completions"), ("POST", "/v1/completions"),
                                         ("GET", "/nope")])
def test_api_key_required(server, method, path):
    for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}]:
        st, err = error_of(server.request(method, path, "{}" if method == "POST" else None, headers=headers,
                                          auth=False if not headers else True))
        assert st == 401, headers
        assert err["type"] == "authentication_error"


def test_openai_client_errors(server):
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.base, api_key="wrong", timeout=30, max_retries=0).models.list()
    with pytest.raises(openai.BadRequestError):
        server.client().chat.completions.create(model="unknown-model", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.NotFoundError):
        server.client().get("/nonexistent", cast_to=object)


def test_garbage_http_does_not_crash(server):
    for raw in [b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: x\r\n\r\n",
                b"POST /v1/completions HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n",
                b"GET / HTTP/1.1\r\n" + b"X: " + b"a" * 70000 + b"\r\n\r\n",
                b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro"]:  # then hang up
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            try:
                s.sendall(raw)
                s.shutdown(socket.SHUT_WR)
                s.recv(4096)
            except OSError:
                pass
    assert server.health()["status"] == "ok"


def test_queue_full_gives_429():
    s = Server("--max-batch", "1", "--max-queue", "1", api_key=None)
    try:
        c = s.client()
        started = threading.Event()

        def long_stream():
            st = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Tell a long story."}],
                                           max_tokens=200, temperature=0, stream=True)
            for _ in st:
                started.set()
            return True

        with ThreadPoolExecutor(2) as ex:
            first = ex.submit(long_stream)
            assert started.wait(60)
            second = ex.submit(lambda: c.completions.create(model=MODEL, prompt="x", max_tokens=4))
            deadline = time.time() + 30
            while s.health()["queue_depth"] < 1 and time.time() < deadline:
                time.sleep(0.05)
            assert s.health()["queue_depth"] == 1
            st, err = error_of(s.request("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": 2})))
            assert st == 429
            assert err["code"] == "queue_full"
            with pytest.raises(openai.RateLimitError):
                c.completions.create(model=MODEL, prompt="x", max_tokens=4)
            assert first.result(timeout=TIMEOUT) and second.result(timeout=TIMEOUT).choices[0].text is not None
        assert 'status="429"' in s.metrics()
    finally:
        s.stop()


def count_499(metrics: str) -> float:
    return sum(float(l.split()[-1]) for l in metrics.splitlines()
               if l.startswith("specdec_requests_total{") and 'status="499"' in l)


def test_non_streaming_client_that_gives_up_is_cancelled(server):
    before = count_499(server.metrics())
    body = json.dumps({"model": MODEL, "prompt": "Tell a long story.", "max_tokens": 400, "temperature": 0})
    with pytest.raises(TimeoutError):
        server.request("POST", "/v1/completions", body, timeout=1.0)
    # Wait for both: "no active sequence" alone is also true before the
    # request is admitted, and the 499 is counted when the server notices.
    deadline = time.time() + 20
    while time.time() < deadline:
        m = server.metrics()
        if "specdec_active_sequences 0" in m and count_499(m) > before:
            break
        time.sleep(0.2)
    assert "specdec_active_sequences 0" in m
    assert count_499(m) > before, m


# --- speculative decoding in the server -------------------------------------------
# A second server with a draft model: SmolLM2 drafting for itself (-d with the
# same file), so chain and tree accept long paths; any draft is lossless, so
# every greedy output must equal `specdec generate --method ar`.

SPEC_METHODS = ["chain", "tree", "ngram", "auto"]


@pytest.fixture(scope="module")
def spec_server():
    s = Server("--max-batch", "6", "--max-queue", "16", "-d", str(model_path(DEFAULT_MODEL)), "--method", "chain",
               "--draft-k", "4", "--tree-topk", "2", "--tree-depth", "4", "--tree-budget", "8")
    try:
        yield s
    finally:
        s.stop()
    assert s.proc.returncode is not None


_refs: dict = {}


def ar_ref(prompt: str, n: int, chat: bool) -> dict:
    """`specdec generate` (AR) output, computed once per (prompt, n, chat)."""
    key = (prompt, n, chat)
    if key not in _refs:
        _refs[key] = generate_ref(prompt, n, chat)
    return _refs[key]


def spec_body(method: str | None, draft_k: int | None = None) -> dict:
    if method is None:
        return {}
    ext = {"method": method}
    if draft_k:
        ext["draft_k"] = draft_k
    return {"extra_body": {"specdec": ext}}


@pytest.mark.parametrize("method", [None, *SPEC_METHODS])  # None: the server's default (chain)
def test_spec_methods_match_generate_ar(spec_server, method):
    check_equals_ar(spec_server.client(), **spec_body(method))


def test_spec_per_request_override_and_metrics(spec_server):
    c = spec_server.client()
    prompt = "Count: 1, 2, 3,"
    ref = ar_ref(prompt, 30, chat=False)
    for method, k in [("ar", None), ("chain", 2), ("chain", 7), ("ngram", 3), ("tree", None)]:
        r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=30, temperature=0, **spec_body(method, k))
        assert r.choices[0].text == ref["text"], (method, k)
    # Stop strings cut speculative output exactly where AR's is cut.
    cut = ref["text"][: max(1, len(ref["text"]) // 2)][-2:]
    r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=30, temperature=0, stop=[cut])
    assert r.choices[0].finish_reason == "stop" and cut not in r.choices[0].text
    assert ref["text"].startswith(r.choices[0].text)
    # Seeded sampling reproduces under speculation too.
    a, b = [c.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=16, temperature=0.9, seed=7,
                                 **spec_body(m)).choices[0].text for m in ("chain", "chain")]
    assert a == b
    # Unknown methods and bad options are refused.
    with pytest.raises(openai.BadRequestError):
        c.completions.create(model=MODEL, prompt="x", max_tokens=2, **spec_body("medusa"))
    with pytest.raises(openai.BadRequestError):
        c.completions.create(model=MODEL, prompt="x", max_tokens=2, **spec_body("chain", 65))
    m = spec_server.metrics()
    for method in ["ar", "chain", "ngram", "tree"]:
        assert f'specdec_method_tokens_total{{method="{method}"}}' in m
    tau = {line.split("\"")[1]: float(line.split()[-1]) for line in m.splitlines()
           if line.startswith("specdec_method_mean_accept_length{")}
    assert tau["ar"] == 1.0
    assert tau["chain"] > 1.5  # the draft is the target itself
    assert "specdec_draft_seconds_total" in m and "specdec_verify_seconds_total" in m


def test_spec_mixed_concurrent_clients(spec_server):
    """Concurrent streaming clients, each with its own method, all get AR's greedy output."""
    n_tok = 24
    refs = [ar_ref(p, n_tok, chat=True)["text"] for p in PROMPTS[:6]]
    plan = [("ar", None), ("chain", None), ("ngram", None), ("tree", None), ("chain", 2), ("ngram", 5)]

    def one(i: int):
        method, k = plan[i]
        return stream_chat(spec_server.client(), PROMPTS[i], n_tok, **spec_body(method, k))[0]

    with ThreadPoolExecutor(len(plan)) as ex:
        outs = list(ex.map(one, range(len(plan)), timeout=TIMEOUT * 2))
    for i, (out, ref) in enumerate(zip(outs, refs)):
        assert out == ref, f"client {i} ({plan[i]}) differs from AR"


def test_spec_disconnect_mid_stream_does_not_disturb_others(spec_server):
    refs = [ar_ref(p, 24, chat=True)["text"] for p in PROMPTS[:3]]
    check_disconnect_spares_others(spec_server, PROMPTS[:3], refs, settle_s=20,
                                   quitter_extra={"specdec": {"method": "chain"}},
                                   stream_kwargs=[spec_body(m) for m in ["chain", "tree", "ngram"]])
    # The freed slot (target and draft sequences) serves a new request correctly.
    assert stream_chat(spec_server.client(), PROMPTS[0], 24, **spec_body("chain"))[0] == refs[0]


def test_spec_load_by_method(spec_server):
    """N concurrent greedy streaming clients per method, one method at a time: all
    outputs equal AR's; prints tok/s and p50/p99 latency per method."""
    n_tok, n = 32, 4
    refs = [ar_ref(p, n_tok, chat=True)["text"] for p in PROMPTS[:n]]
    for method in ["ar", "chain", "ngram", "auto"]:
        def one(i: int):
            t = time.perf_counter()
            text, _, usage = stream_chat(spec_server.client(), PROMPTS[i], n_tok, **spec_body(method))
            return text, usage.completion_tokens, time.perf_counter() - t

        t0 = time.perf_counter()
        with ThreadPoolExecutor(n) as ex:
            res = list(ex.map(one, range(n), timeout=TIMEOUT * 2))
        wall = time.perf_counter() - t0
        for (text, _, _), ref in zip(res, refs):
            assert text == ref, method
        lat = sorted(r[2] for r in res)
        p99 = lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))]
        print(f"\n[spec load] method={method} N={n} clients x {n_tok} tokens: "
              f"{sum(r[1] for r in res) / wall:.1f} tok/s, p50 {statistics.median(lat):.2f} s, p99 {p99:.2f} s")


def test_spec_serve_refuses_draft_method_without_draft():
    out = subprocess.run([str(BIN), "serve", "-m", str(model_path(DEFAULT_MODEL)), "--method", "chain", "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "needs a draft model" in out.stderr


def test_spec_self_speculation_draft_layers():
    """--draft-layers L: the draft is the target's first L layers; chain output still equals AR's."""
    s = Server("--max-batch", "2", "--draft-layers", "10", "--method", "chain", "--draft-k", "3")
    try:
        prompt = "The quick brown fox"
        ref = ar_ref(prompt, 20, chat=False)
        r = s.client().completions.create(model=MODEL, prompt=prompt, max_tokens=20, temperature=0)
        assert r.choices[0].text == ref["text"]
        assert 'specdec_method_tokens_total{method="chain"}' in s.metrics()
    finally:
        s.stop()


# --- SSD (Saguaro) in the server: a proposer of the continuous batch ----------

@pytest.fixture(scope="module")
def ssd_server():
    s = Server("--max-batch", "4", "--max-queue", "16", "-d", str(model_path(DEFAULT_MODEL)), "--method", "ssd",
               "--ssd-k", "4", "--fanout-budget", "4", "--backup", "jit")
    try:
        yield s
    finally:
        s.stop()
    assert s.proc.returncode is not None


def check_equals_ar(c, **kw) -> None:
    """Chat and completion, streaming and not, equal `specdec generate` (AR)."""
    prompt = "What is the capital of France?"
    ref = ar_ref(prompt, 24, chat=True)
    r = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=24,
                                  temperature=0, **kw)
    assert r.choices[0].message.content == ref["text"]
    assert r.choices[0].finish_reason == ref["finish_reason"]
    assert r.usage.completion_tokens == ref["n_generated"]
    text, finish, usage = stream_chat(c, prompt, 24, **kw)
    assert text == ref["text"] and finish == ref["finish_reason"]
    assert usage.completion_tokens == ref["n_generated"]
    prompt = "The quick brown fox"
    ref = ar_ref(prompt, 20, chat=False)
    r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=20, temperature=0, **kw)
    assert r.choices[0].text == ref["text"]
    assert r.usage.completion_tokens == ref["n_generated"]
    pieces = [ch.choices[0].text for ch in c.completions.create(
        model=MODEL, prompt=prompt, max_tokens=20, temperature=0, stream=True, **kw) if ch.choices]
    assert "".join(pieces) == ref["text"]


def test_ssd_server_default_matches_generate_ar(ssd_server):
    check_equals_ar(ssd_server.client())
    m = ssd_server.metrics()
    assert 'specdec_method_tokens_total{method="ssd"}' in m
    hit = [float(l.split()[-1]) for l in m.splitlines() if l.startswith("specdec_ssd_hit_rate ")]
    assert hit and hit[0] > 0, m
    stall = [float(l.split()[-1]) for l in m.splitlines() if l.startswith("specdec_ssd_stall_seconds_total ")]
    assert stall and stall[0] >= 0
    tau = {l.split("\"")[1]: float(l.split()[-1]) for l in m.splitlines()
           if l.startswith("specdec_method_mean_accept_length{")}
    assert tau["ssd"] > 1.5  # the draft is the target itself


def test_ssd_per_request_override_stop_and_mixed(spec_server):
    """A chain server: requests pick ssd per request; ssd and batch requests at once all equal AR."""
    c = spec_server.client()
    check_equals_ar(c, **spec_body("ssd"))
    prompt = "Count: 1, 2, 3,"
    ref = ar_ref(prompt, 30, chat=False)
    for k in [None, 2]:  # draft_k is SSD's K
        r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=30, temperature=0, **spec_body("ssd", k))
        assert r.choices[0].text == ref["text"], k
    cut = ref["text"][: max(1, len(ref["text"]) // 2)][-2:]
    r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=30, temperature=0, stop=[cut],
                             **spec_body("ssd"))
    assert r.choices[0].finish_reason == "stop" and cut not in r.choices[0].text
    assert ref["text"].startswith(r.choices[0].text)
    # Sampled ssd requests are served (each alone) and honour max_tokens.
    r = c.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=8, temperature=0.9, seed=3,
                             **spec_body("ssd"))
    assert r.usage.completion_tokens <= 8 and r.choices[0].finish_reason in ("stop", "length")

    n_tok = 24
    refs = [ar_ref(p, n_tok, chat=True)["text"] for p in PROMPTS[:6]]
    plan = ["ssd", "chain", "ssd", "ar", "ssd", "tree"]

    def one(i: int):
        return stream_chat(spec_server.client(), PROMPTS[i], n_tok, **spec_body(plan[i]))[0]

    with ThreadPoolExecutor(len(plan)) as ex:
        outs = list(ex.map(one, range(len(plan)), timeout=TIMEOUT * 2))
    for i, (out, ref) in enumerate(zip(outs, refs)):
        assert out == ref, f"client {i} ({plan[i]}) differs from AR"
    assert 'specdec_method_tokens_total{method="ssd"}' in spec_server.metrics()


def test_ssd_shares_the_batch_with_other_methods(spec_server):
    """A short ar request sent while a long ssd request streams finishes first:
    ssd decodes in the continuous batch, beside the other methods, not in a
    cohort that holds every other request back until it ends."""
    c = spec_server.client()
    prompt = "Write a long story about a lighthouse keeper."
    ref_long = ar_ref(prompt, 160, chat=True)["text"]
    ref_short = ar_ref(PROMPTS[0], 4, chat=True)["text"]
    order = []

    def long_ssd():
        out = []
        for ch in c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}],
                                            max_tokens=160, temperature=0, stream=True, **spec_body("ssd")):
            if ch.choices and ch.choices[0].delta.content:
                out.append(ch.choices[0].delta.content)
                if len(out) == 1:
                    started.set()
        order.append("ssd")
        return "".join(out)

    def short_ar():
        started.wait(TIMEOUT)
        text = stream_chat(c, PROMPTS[0], 4, **spec_body("ar"))[0]
        order.append("ar")
        return text

    started = threading.Event()
    with ThreadPoolExecutor(2) as ex:
        f_long, f_short = ex.submit(long_ssd), ex.submit(short_ar)
        assert f_long.result(timeout=TIMEOUT * 2) == ref_long
        assert f_short.result(timeout=TIMEOUT * 2) == ref_short
    assert order == ["ar", "ssd"], order


def test_ssd_disconnect_mid_stream_does_not_hang(ssd_server):
    refs = [ar_ref(p, 24, chat=True)["text"] for p in PROMPTS[:2]]
    check_disconnect_spares_others(ssd_server, PROMPTS[:2], refs, settle_s=30)
    # The server still answers, with the right output.
    assert stream_chat(ssd_server.client(), PROMPTS[0], 24)[0] == refs[0]
    r = ssd_server.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPTS[1]}],
                                                    max_tokens=24, temperature=0)
    assert r.choices[0].message.content == refs[1]


def test_ssd_serve_refuses_without_draft_and_bad_options():
    base = [str(BIN), "serve", "-m", str(model_path(DEFAULT_MODEL)), "--port", "0"]
    out = subprocess.run(base + ["--method", "ssd"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "needs a draft model" in out.stderr
    out = subprocess.run(base + ["--method", "ssd", "-d", str(model_path(DEFAULT_MODEL)), "--fanout", "zipf"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "fanout" in out.stderr


def method_counter(metrics: str, name: str, method: str) -> float:
    key = f'{name}{{method="{method}"}} '
    return sum(float(l.split()[-1]) for l in metrics.splitlines() if l.startswith(key))


def test_serve_with_an_eagle3_head(tmp_path):
    """`serve --eagle3 HEAD`: the head drafts for auto (the default), chain and
    tree inside the continuous batch, next to ar and ngram requests; every
    greedy answer is AR's; ssd (a draft model's) is refused per request and
    as the server's method. The head has random weights (tests/python/test_eagle3.py
    writes it in the released Hugging Face layout)."""
    from test_eagle3 import target_dims, write_head

    dims = target_dims(model_path(DEFAULT_MODEL))
    head = tmp_path / "head"
    write_head(head, dims, seed=4, layer_ids=[2, dims.n_layer // 2, dims.n_layer - 3])
    base = [str(BIN), "serve", "-m", str(model_path(DEFAULT_MODEL)), "--port", "0", "--eagle3", str(head)]
    for extra, words in [(["--method", "ssd"], "not an EAGLE-3 head"),
                         (["-d", str(model_path(DEFAULT_MODEL))], "not both")]:
        out = subprocess.run(base + extra, capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and words in out.stderr, out.stderr
    s = Server("--max-batch", "4", "--max-queue", "16", "--eagle3", str(head), "--draft-k", "3",
               "--tree-topk", "2", "--tree-depth", "3", "--tree-budget", "6")
    try:
        c = s.client()
        status, body = s.request("GET", "/v1/models")
        info = json.loads(body)["data"][0]["specdec"]
        assert status == 200 and info["default_method"] == "auto"
        assert {"auto", "chain", "tree"} <= set(info["methods"]) and "ssd" not in info["methods"], info
        for method in [None, "chain", "tree"]:
            check_equals_ar(c, **spec_body(method))
        with pytest.raises(openai.BadRequestError) as e:
            c.completions.create(model=MODEL, prompt="x", max_tokens=2, **spec_body("ssd"))
        assert "draft model" in str(e.value)
        # Concurrent clients, each with its own method: one batch, AR's tokens.
        n_tok = 24
        refs = [ar_ref(p, n_tok, chat=True)["text"] for p in PROMPTS[:6]]
        plan = ["chain", "tree", "auto", "ar", "ngram", "chain"]

        def one(i: int):
            return stream_chat(s.client(), PROMPTS[i], n_tok, **spec_body(plan[i]))[0]

        with ThreadPoolExecutor(len(plan)) as ex:
            outs = list(ex.map(one, range(len(plan)), timeout=TIMEOUT * 2))
        for i, (out, ref) in enumerate(zip(outs, refs)):
            assert out == ref, f"client {i} ({plan[i]}) differs from AR"
        # Seeded sampling under the head's chain reproduces.
        a, b = [c.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=16, temperature=0.9,
                                     seed=7, **spec_body("chain")).choices[0].text for _ in range(2)]
        assert a == b
        m = s.metrics()
        for method in ["chain", "tree"]:
            assert method_counter(m, "specdec_method_drafted_total", method) > 0, (method, m)
        assert method_counter(m, "specdec_method_tokens_total", "auto") > 0
        draft_rounds = [float(l.split()[-1]) for l in m.splitlines()
                        if l.startswith('specdec_auto_rounds_total{shape="draft"}')]
        assert draft_rounds and draft_rounds[0] > 0, m  # auto drafted with the head
    finally:
        s.stop()
    assert s.proc.returncode == 0


def test_serve_draft_layers_list_and_auto(tmp_path):
    """--draft-layers takes generate's forms: a list keeps those layers (output still AR's);
    auto without a calibration file is refused naming `specdec calibrate`."""
    s = Server("--max-batch", "2", "--draft-layers", "0-5,8", "--method", "chain", "--draft-k", "3")
    try:
        prompt = "The quick brown fox"
        ref = ar_ref(prompt, 20, chat=False)
        r = s.client().completions.create(model=MODEL, prompt=prompt, max_tokens=20, temperature=0)
        assert r.choices[0].text == ref["text"]
        r = s.client().completions.create(model=MODEL, prompt=prompt, max_tokens=20, temperature=0,
                                          **spec_body("ssd"))
        assert r.choices[0].text == ref["text"]
    finally:
        s.stop()
    bare = tmp_path / "bare.gguf"
    bare.symlink_to(model_path(DEFAULT_MODEL))
    for layers, needle in [("auto", "calibrate"), ("7-3", "7-3"), ("0-999", "cannot keep layer")]:
        out = subprocess.run([str(BIN), "serve", "-m", str(bare), "--port", "0", "--draft-layers", layers,
                              "--method", "chain"], capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and needle in out.stderr, (layers, out.stderr)


# --- limits of a public server: body size, max_tokens cap, request timeout, SIGTERM ---

def raw_exchange(port: int, raw: bytes, timeout: float = 30) -> bytes:
    """Sends raw bytes, returns everything until the server closes or the answer's body is in."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        got = b""
        while True:
            head, sep, rest = got.partition(b"\r\n\r\n")
            if sep:
                length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if length and len(rest) >= length[0]:
                    return got
            chunk = s.recv(65536)
            if not chunk:
                return got
            got += chunk


def test_limits_body_size_and_max_tokens_cap():
    s = Server("--max-body-mb", "1", "--max-tokens", "32", "--max-batch", "2", api_key=None)
    try:
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        big = json.dumps({**chat, "messages": [{"role": "user", "content": "a" * (1 << 20)}]}).encode()
        st, err = error_of(s.request("POST", "/v1/chat/completions", big))
        assert st == 413 and err["code"] == "payload_too_large" and "--max-body-mb" in err["message"]
        # Chunked: no Content-Length to check up front; the same limit applies while reading.
        chunks = b"".join(b"%x\r\n" % len(big[i:i + 65536]) + big[i:i + 65536] + b"\r\n"
                          for i in range(0, len(big), 65536)) + b"0\r\n\r\n"
        got = raw_exchange(s.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                                   b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)
        assert got.startswith(b"HTTP/1.1 413") and b"payload_too_large" in got, got[:300]
        # A chunked body within the limit is served.
        small = json.dumps({**chat, "max_tokens": 2}).encode()
        got = raw_exchange(s.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                                   b"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                   + b"%x\r\n" % len(small) + small + b"\r\n0\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 200"), got[:300]
        # max_tokens over the cap: 400 naming the field; at the cap: served.
        for key in ["max_tokens", "max_completion_tokens"]:
            st, err = error_of(s.request("POST", "/v1/chat/completions", json.dumps({**chat, key: 33})))
            assert st == 400 and err["param"] == key and "--max-tokens" in err["message"], err
        r = s.client().chat.completions.create(model=MODEL, messages=chat["messages"], max_tokens=32, temperature=0)
        assert r.usage.completion_tokens <= 32
        # None given: the cap is the limit.
        r = s.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Tell a story."}],
                                               temperature=0)
        assert r.usage.completion_tokens <= 32
        assert 'status="413"' in s.metrics()
    finally:
        s.stop()


def test_limits_request_timeout():
    """A request running past --request-timeout ends with a clear error: 504 for
    a plain answer, an error event for a stream; the server goes on."""
    s = Server("--request-timeout", "0.5", "--max-batch", "2", api_key=None)
    try:
        body = {"model": MODEL, "prompt": "Count from one to one thousand: one, two, three,", "max_tokens": 400,
                "temperature": 0}
        t0 = time.monotonic()
        st, err = error_of(s.request("POST", "/v1/completions", json.dumps(body)))
        assert st == 504 and err["code"] == "request_timeout" and "--request-timeout" in err["message"], err
        assert time.monotonic() - t0 < 10
        c = s.client()
        events = list(c.completions.create(model=MODEL, prompt=body["prompt"], max_tokens=400, temperature=0,
                                           stream=True))
        pytest.fail(f"the stream ran to its end ({len(events)} events)")
    except openai.APIError as e:
        # The openai client raises on an SSE error event.
        assert "--request-timeout" in str(e), e
    finally:
        s.stop()
    assert s.proc.returncode == 0


def test_sigterm_finishes_or_cancels_and_reports():
    """SIGTERM with two streams running and one waiting: the waiting one gets a
    503 error event at once, the running ones finish within --shutdown-grace
    or are cancelled (503 event); stderr names them by id; exit status 0; a
    request during the grace gets 503 with Retry-After."""
    s = Server("--max-batch", "2", "--max-queue", "4", "--shutdown-grace", "1", api_key=None)

    def stream(max_tokens: int) -> tuple[str | None, list]:
        body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Tell me a long story."}],
                           "max_tokens": max_tokens, "temperature": 0, "stream": True})
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200
        events = [json.loads(l[6:]) for l in r.read().decode().split("\n\n") if l.startswith("data: {")]
        conn.close()
        return (events[0].get("id") if events else None), events

    try:
        with ThreadPoolExecutor(3) as ex:
            futs = [ex.submit(stream, 400) for _ in range(3)]
            deadline = time.time() + 30
            while time.time() < deadline:
                m = s.metrics()
                if "specdec_active_sequences 2" in m and "specdec_queue_depth 1" in m:
                    break
                time.sleep(0.05)
            s.proc.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            conn.request("GET", "/health")
            r = conn.getresponse()
            assert r.status == 503 and r.getheader("Retry-After") == "1"
            assert json.loads(r.read())["error"]["code"] == "shutting_down"
            conn.close()
            results = [f.result(timeout=60) for f in futs]
        assert s.proc.wait(timeout=30) == 0
        s.log.seek(0)
        log = s.log.read()
        report = next(l for l in log.splitlines() if "specdec serve: shutdown:" in l)
        cancelled = [rid for rid, evs in results if any("error" in e for e in evs)]
        for rid, evs in results:
            errs = [e["error"] for e in evs if "error" in e]
            assert not errs or errs[0]["code"] == "shutting_down", errs
            assert rid and rid in report, (rid, report)
        assert len(cancelled) >= 1 and "1 waiting cancelled" in report, report
    finally:
        s.stop()


def trickle_headers(port: int, every: float, give_up: float) -> tuple[float | None, bytes]:
    """Sends a request line, then one header byte every `every` s, never ending
    the headers. Returns the seconds until the server closed the connection
    (None: still open at `give_up`) and whatever the server sent."""
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        s.settimeout(every)
        while time.monotonic() - t0 < give_up:
            try:
                s.sendall(b"a")
                chunk = s.recv(4096)
                if not chunk:
                    return time.monotonic() - t0, got
                got += chunk
            except socket.timeout:
                continue
            except OSError:  # reset: closed
                return time.monotonic() - t0, got
    return None, got


def test_header_timeout_closes_trickling_clients_and_spares_others():
    """--header-timeout is a total deadline: clients trickling a header byte
    every 0.5 s (each byte would reset the 10 s --read-timeout) are closed
    unanswered after 2 s, while normal requests meanwhile are served."""
    s = Server("--header-timeout", "2", "--read-timeout", "10", "--max-batch", "2", api_key=None)
    try:
        with ThreadPoolExecutor(4) as ex:
            tricklers = [ex.submit(trickle_headers, s.port, 0.5, 12) for _ in range(4)]
            time.sleep(0.3)
            t0 = time.monotonic()
            for _ in range(3):
                assert s.health()["status"] == "ok"
            r = s.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                                   max_tokens=4, temperature=0)
            assert r.choices[0].message.content and time.monotonic() - t0 < 10
            for f in tricklers:
                closed_after, got = f.result(timeout=30)
                assert closed_after is not None, "a trickling client was still connected after 12 s"
                assert 1.9 <= closed_after < 2 + 2.5, closed_after
                assert got == b"", got[:200]
        assert s.health()["status"] == "ok"
    finally:
        s.stop()
    out = subprocess.run([str(BIN), "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert "--header-timeout" in out.stdout


def test_second_signal_cancels_at_once_and_reports():
    """SIGTERM with a long stream running and a 60 s grace: the stream goes on;
    a SIGINT then cancels it at once (a shutting_down error event), although
    a client is still trickling headers; stderr names it as cancelled and the
    exit status is 128 + SIGINT."""
    s = Server("--max-batch", "2", "--shutdown-grace", "60", "--header-timeout", "30", api_key=None)
    events: list[tuple[float, dict]] = []
    first = threading.Event()

    def stream() -> None:
        # ignore_eos: the stream must outlast the second signal however fast
        # the machine decodes (the model ends this text after ~110 tokens,
        # under a second on a quick CI machine).
        body = json.dumps({"model": MODEL, "prompt": "Count from one to one thousand: one, two, three,",
                           "max_tokens": 3000, "ignore_eos": True, "temperature": 0, "stream": True})
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200
        for line in r:
            if line.startswith(b"data: {"):
                events.append((time.monotonic(), json.loads(line[6:])))
                first.set()
        conn.close()

    try:
        with ThreadPoolExecutor(2) as ex:
            fut = ex.submit(stream)
            trickler = ex.submit(trickle_headers, s.port, 0.5, 40)
            assert first.wait(60), "no token within 60 s"
            s.proc.send_signal(signal.SIGTERM)
            time.sleep(1.0)
            n_at_second = len(events)
            assert not any("error" in e or e["choices"][0].get("finish_reason") for _, e in events), \
                "the stream ended before the second signal: make it longer"
            t_second = time.monotonic()
            s.proc.send_signal(signal.SIGINT)
            fut.result(timeout=30)
            rc = s.proc.wait(timeout=30)
            t_exit = time.monotonic()
            closed_after, got = trickler.result(timeout=30)
        # The grace went on between the signals: tokens kept coming.
        assert n_at_second >= 2, n_at_second
        t_err, last = events[-1]
        assert last.get("error", {}).get("code") == "shutting_down", last
        assert t_err - t_second < 5, t_err - t_second
        assert t_exit - t_second < 10, t_exit - t_second
        # Closed by the stop, unanswered, long before its 30 s header deadline.
        assert closed_after is not None and closed_after < 20 and got == b"", (closed_after, got[:200])
        assert rc == 128 + signal.SIGINT, rc
        s.log.seek(0)
        log = s.log.read()
        assert "SIGINT again: cancelling running requests now" in log, log
        report = next(l for l in log.splitlines() if "specdec serve: shutdown:" in l)
        rid = events[0][1]["id"]
        assert f"1 running cancelled ({rid})" in report and "0 running finished" in report, report
    finally:
        s.stop()
