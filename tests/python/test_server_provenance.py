"""The `specdec.provenance` stream extension of `specdec serve` (the chat page colours tokens with it).

A request with `"specdec": {"provenance": true}` gets, on each chunk, the
delta's text split by token with each part marked "draft" (an accepted draft
token) or "target" (the target's own: the first token and each round's bonus
or corrected token), and the count of completion tokens of each kind. Checked
here on the CI model against what the round statistics say, computed by
another path: `specdec generate --json` (its own scheduler loop and counters)
on the same prompt and method reports `accepted` draft tokens and `rounds`,
and the server's /metrics counts accepted tokens per method. Greedy, and
ending by length (trees are capped at the tokens left, so no round is cut):
draft tokens in the stream == accepted, target tokens == rounds + 1 (the
prefill's). AR: every token the target's. The streamed text equals the
non-streamed text, and a request that does not ask gets OpenAI's chunk shape
unchanged.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import time

import pytest

from conftest import DEFAULT_MODEL, model_path
from test_server import BIN, CTX, TIMEOUT, Server

PROMPT = "List the planets of the solar system, one per line, with one fact about each."
N = 48
DRAFT_LAYERS = "24"  # self-speculation: the first 24 of 30 layers draft, and some drafts are rejected


@pytest.fixture(scope="module")
def srv():
    s = Server("--max-batch", "2", "--draft-layers", DRAFT_LAYERS, "--method", "chain", "--draft-k", "4",
               api_key=None)
    try:
        yield s
    finally:
        s.stop()


def post(srv: Server, body: dict) -> tuple[int, bytes]:
    return srv.request("POST", "/v1/chat/completions", json.dumps(body), timeout=TIMEOUT)


def stream_events(srv: Server, body: dict) -> list[dict]:
    """The SSE data objects of one streamed request (up to [DONE])."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=TIMEOUT)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps({**body, "stream": True}),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200, r.read()
        events = []
        for raw in r:
            line = raw.decode().rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                return events
            events.append(json.loads(line[6:]))
        pytest.fail("stream ended without [DONE]")
    finally:
        conn.close()


def body_for(method: str, provenance: bool = True, n: int = N) -> dict:
    spec = {"method": method, "draft_k": 4}
    if provenance:
        spec["provenance"] = True
    return {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": n, "temperature": 0,
            "stream_options": {"include_usage": True}, "specdec": spec}


def cli_stats(method: str) -> dict:
    """`specdec generate --json` on the same chat prompt and method: its round statistics."""
    args = [str(BIN), "generate", "-m", str(model_path(DEFAULT_MODEL)), "-p", PROMPT, "--chat", "-n", str(N),
            "--json", "--threads", "2", "--ctx", str(CTX), "--method", method]
    if method in ("chain", "ngram"):
        args += ["--draft-k", "4"]
    if method == "chain":
        args += ["--draft-layers", DRAFT_LAYERS]
    out = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def accepted_counter(srv: Server, method: str) -> float:
    m = re.search(r'^specdec_method_accepted_total\{method="%s"\} (\S+)$' % method, srv.metrics(), re.M)
    return float(m.group(1)) if m else 0.0


def summarize(events: list[dict]) -> tuple[str, int, int, dict, dict]:
    """Streamed text, draft and target token counts, the text of each kind, usage; checks each chunk."""
    streamed, draft, target, usage = "", 0, 0, None
    parts = {"draft": "", "target": ""}
    for ev in events:
        if ev.get("usage"):
            usage = ev["usage"]
        if not ev["choices"]:
            continue
        content = ev["choices"][0]["delta"].get("content") or ""
        streamed += content
        ext = ev.get("specdec")
        if ext is None:
            assert content == "", "a chunk with text but no provenance"
            continue
        # The parts are the delta's text, cut at token boundaries.
        assert "".join(p["text"] for p in ext["provenance"]) == content
        for p in ext["provenance"]:
            assert p["source"] in ("draft", "target") and p["text"]
            parts[p["source"]] += p["text"]
        draft += ext["tokens"]["draft"]
        target += ext["tokens"]["target"]
    return streamed, draft, target, parts, usage


@pytest.mark.parametrize("method", ["chain", "ngram", "ar"])
def test_provenance_matches_round_stats(srv, method):
    status, raw = post(srv, body_for(method))
    assert status == 200, raw
    full = json.loads(raw)
    text = full["choices"][0]["message"]["content"]
    assert full["choices"][0]["finish_reason"] == "length"  # no round cut by an end-of-generation token

    before = accepted_counter(srv, method)
    streamed, draft, target, parts, usage = summarize(stream_events(srv, body_for(method)))
    accepted_server = accepted_counter(srv, method) - before

    assert streamed == text
    assert usage and draft + target == usage["completion_tokens"] == N
    ref = cli_stats(method)
    assert ref["n_generated"] == N
    if method == "ar":
        assert draft == 0 and parts["draft"] == ""
        assert target == N
    else:
        # The CLI's round statistics (its own loop and counters) and the server's.
        assert draft == ref["accepted"], (draft, ref)
        assert target == ref["rounds"] + 1, (target, ref)
        assert draft == accepted_server
        assert draft > 0 and target > 1, "expected both kinds of token on this prompt"
        print(f"\n{method}: {draft} draft-accepted + {target} target tokens, {ref['rounds']} rounds, "
              f"accept length {N / target:.2f}")

    # Not streamed, the response carries the same extension for the whole text.
    ext = full["specdec"]
    assert "".join(p["text"] for p in ext["provenance"]) == text
    assert ext["tokens"] == {"draft": draft, "target": target}


def test_ssd_provenance(srv):
    """SSD streams provenance too. The last round may be cut by max_tokens: the stream's drafts
    are the accepted ones less at most K."""
    n = 24
    status, raw = post(srv, body_for("ssd", n=n))
    assert status == 200, raw
    text = json.loads(raw)["choices"][0]["message"]["content"]
    before = accepted_counter(srv, "ssd")
    streamed, draft, target, _, usage = summarize(stream_events(srv, body_for("ssd", n=n)))
    # The round's figures reach /metrics just after its last event.
    deadline = time.time() + 10
    while accepted_counter(srv, "ssd") == before and time.time() < deadline:
        time.sleep(0.05)
    accepted_server = accepted_counter(srv, "ssd") - before
    assert streamed == text
    assert draft + target == usage["completion_tokens"] == n
    assert 0 < draft <= accepted_server <= draft + 4, (draft, accepted_server)


def test_default_chunks_unchanged_without_provenance(srv):
    events = stream_events(srv, body_for("chain", provenance=False, n=16))
    assert events and all("specdec" not in ev for ev in events)
    assert all(set(ev) <= {"id", "object", "created", "model", "choices", "usage"} for ev in events)
    status, raw = post(srv, body_for("chain", provenance=False, n=16))
    assert status == 200 and "specdec" not in json.loads(raw)


def test_completions_endpoint_provenance(srv):
    """/v1/completions takes the extension too: the parts are each chunk's text."""
    body = {"prompt": "The quick brown fox", "max_tokens": 16, "temperature": 0,
            "specdec": {"method": "ngram", "provenance": True}}
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=TIMEOUT)
    try:
        conn.request("POST", "/v1/completions", body=json.dumps({**body, "stream": True}),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200
        text, tokens = "", 0
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            piece = ev["choices"][0]["text"]
            text += piece
            if "specdec" in ev:
                assert "".join(p["text"] for p in ev["specdec"]["provenance"]) == piece
                tokens += ev["specdec"]["tokens"]["draft"] + ev["specdec"]["tokens"]["target"]
    finally:
        conn.close()
    status, raw = srv.request("POST", "/v1/completions", json.dumps(body), timeout=TIMEOUT)
    full = json.loads(raw)
    assert status == 200 and text == full["choices"][0]["text"]
    assert tokens == full["usage"]["completion_tokens"] == 16


def test_provenance_must_be_boolean(srv):
    body = body_for("ar")
    body["specdec"]["provenance"] = "yes"
    status, raw = post(srv, body)
    err = json.loads(raw)["error"]
    assert status == 400 and err["param"] == "specdec.provenance", err
