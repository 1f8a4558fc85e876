"""specdec generate --method ssd as a user runs it: the round trace
(--trace FILE) agrees with the --json summary (rounds, accepted and emitted
tokens, cache lookups and hits per accept point, backups), the thread layout
options are reported, and bad SSD options give a clear error."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import REPO_ROOT, model_path

SPECDEC_BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))
MODEL = "smollm2-135m-instruct-q4_1"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SPECDEC_BIN), *args], capture_output=True, text=True, timeout=300)


def ssd(*args: str) -> list[str]:
    m = str(model_path(MODEL))
    return ["generate", "-m", m, "-d", m, "--method", "ssd", "--json", "--ignore-eos", *args]


def test_trace_agrees_with_json_summary(tmp_path):
    trace = tmp_path / "ssd.jsonl"
    r = run(*ssd("-p", "def fibonacci(n):", "-n", "40", "-t", "2", "--ssd-k", "3", "--trace", str(trace)))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ar = run("generate", "-m", str(model_path(MODEL)), "--json", "--ignore-eos", "-p", "def fibonacci(n):",
             "-n", "40", "-t", "2")
    assert ar.returncode == 0, ar.stderr
    assert out["tokens"] == json.loads(ar.stdout)["tokens"]  # greedy: lossless
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    head, rounds = lines[0], lines[1:]
    assert head["type"] == "header" and head["method"] == "ssd" and head["ssd_k"] == 3
    assert len(head["target_hash"]) == 16 and head["draft_hash"] == head["target_hash"]
    assert head["target_threads"] == out["target_threads"] == 1 and head["draft_threads"] == 1
    assert all(x["type"] == "ssd_round" for x in rounds)
    assert len(rounds) == out["rounds"]  # batch 1: one line per round
    assert sum(x["accepted"] for x in rounds) == out["accepted"]
    assert sum(len(x["drafts"]) for x in rounds) == out["drafted"]
    assert sum(x["n_emitted"] for x in rounds) == out["n_generated"] - 1  # the first token is the prefill's
    assert [t for x in rounds for t in x["emitted"]] == out["tokens"][1:]
    looked = [x for x in rounds if x["lookup"]]
    assert len(looked) == out["cache_lookups"] and sum(x["hit"] for x in looked) == out["cache_hits"]
    for k in range(4):
        at_k = [x for x in looked if x["lookup_k"] == k]
        assert len(at_k) == out["cache_lookups_k"][k]
        assert sum(x["hit"] for x in at_k) == out["cache_hits_k"][k]
        rate = out["cache_hit_rate_k"][k]
        assert (rate is None) if not at_k else abs(rate - sum(x["hit"] for x in at_k) / len(at_k)) < 1e-9
    misses = [x for x in rounds if not x["hit"]]
    assert len(misses) == sum(out["backups"].values())
    assert all(x["backup"] in ("jit", "ngram", "random") for x in misses)
    assert sum(x["t_stall_s"] for x in rounds) == _approx(out["stall_s"])
    assert all(len(x["fanout"]) == 4 for x in rounds)
    # The draft's build time arrives with the next reply: unknown only in the last round.
    assert rounds[-1]["draft_build_s"] is None
    assert all(x["draft_build_s"] >= 0 for x in rounds[:-1])


def _approx(v: float):
    import pytest

    return pytest.approx(v, rel=1e-6, abs=1e-9)


def test_lookup_first_matches_ar(tmp_path):
    """--lookup-min with ssd: lookup chains where the history repeats (the
    draft side adopts them), the draft side's speculations elsewhere; greedy
    equals AR, and the trace has every round, lookup ones as "source":
    "lookup"."""
    prompt = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n"
    trace = tmp_path / "ssd.jsonl"
    r = run(*ssd("-p", prompt, "-n", "48", "-t", "2", "--ssd-k", "3", "--lookup-min", "2", "--trace", str(trace)))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ar = run("generate", "-m", str(model_path(MODEL)), "--json", "--ignore-eos", "-p", prompt, "-n", "48", "-t", "2")
    assert ar.returncode == 0, ar.stderr
    assert out["tokens"] == json.loads(ar.stdout)["tokens"]
    assert out["lookup_rounds"] > 0 and out["rounds"] > out["lookup_rounds"], out
    assert out["cache_lookups"] > 0, out  # hits depend on whether a build finishes before the outcome
    rounds = [json.loads(x) for x in trace.read_text().splitlines()][1:]
    assert len(rounds) == out["rounds"]  # batch 1: one line per round, lookup rounds included
    assert sum(x["source"] == "lookup" for x in rounds) == out["lookup_rounds"]
    assert all(x["backup"] is None and not x["lookup"] for x in rounds if x["source"] == "lookup")
    assert sum(x["lookup"] for x in rounds) == out["cache_lookups"]
    assert sum(x["hit"] for x in rounds) == out["cache_hits"]
    assert [t for x in rounds for t in x["emitted"]] == out["tokens"][1:]


def test_thread_layout_options_are_reported():
    r = run(*ssd("-p", "Hello", "-n", "8", "-t", "2", "--ssd-target-threads", "2", "--ssd-draft-nice", "5"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["target_threads"] == 2 and out["draft_threads"] == 1 and out["draft_nice"] == 5


def test_bad_ssd_options_fail_cleanly():
    for bad in (["--saguaro-c", "17"], ["--ssd-draft-nice", "20"], ["--ssd-k", "0"], ["--fanout", "spiral"]):
        r = run(*ssd("-p", "Hello", "-n", "4", *bad))
        assert r.returncode != 0 and r.returncode < 128, (bad, r.returncode)
        assert r.stderr.strip(), bad
