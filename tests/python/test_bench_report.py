"""`specdec bench` end to end on the tiny default model: report files, their
structure, and that the numbers agree with each other (and with the round
traces of the speculative methods)."""

from __future__ import annotations

import csv
import json
import os
import re
import statistics
import subprocess
from pathlib import Path

import pytest

from conftest import DEFAULT_MODEL, REPO_ROOT, model_path

BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))
HEX64 = re.compile(r"^[0-9a-f]{64}$")

PROMPTS = [
    {"id": "p0", "set": "humaneval",
     "turns": ["def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n"]},
    {"id": "p1", "set": "sharegpt",
     "turns": ["Name three colours.", "Now name three more, different ones."]},
]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if not BIN.exists():
        pytest.skip(f"{BIN} is not built (set SPECDEC_BIN)")
    model = model_path(DEFAULT_MODEL)
    tmp = tmp_path_factory.mktemp("bench")
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    out = tmp / "out"
    cmd = [str(BIN), "bench", "-m", str(model), "-d", str(model),
           "--method", "ar,chain,tree,ngram,ssd", "--skip-unavailable",
           "--tree-budget", "8", "--tree-depth", "3", "--draft-k", "3",
           "--ssd-k", "3", "--fanout", "geometric,uniform", "--saguaro-c", "1",
           "--prompts", str(prompts), "--chat", "-n", "8", "-t", "1",
           "--warmup", "0", "--reps", "1", "-c", "512",
           "--trace-dir", str(tmp / "traces"), "-o", str(out), "-q"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "bench.json").read_text())
    return {"dir": out, "data": data, "stdout": p.stdout}


def test_unavailable_method_fails_without_flag(tmp_path):
    if not BIN.exists():
        pytest.skip(f"{BIN} is not built")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps(PROMPTS[0]) + "\n")
    # ssd without a draft model cannot run
    p = subprocess.run([str(BIN), "bench", "-m", str(model_path(DEFAULT_MODEL)), "--method", "ar,ssd",
                        "--prompts", str(prompts), "-n", "2", "-o", str(tmp_path / "o"), "-q"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "ssd" in p.stderr and "needs a draft model" in p.stderr


def test_files_and_meta(report):
    d, data = report["dir"], report["data"]
    for f in ("bench.md", "bench.csv", "bench.json"):
        assert (d / f).stat().st_size > 0, f
    meta = data["meta"]
    assert HEX64.match(meta["target"]["sha256"])
    assert HEX64.match(meta["draft"]["sha256"])
    assert meta["cpu_model"] and meta["git_revision"]
    assert meta["options"]["n_predict"] == 8 and meta["options"]["chat"] is True
    assert meta["options"]["threads"] == [1] and "sampling" in meta["seeds"]
    assert set(data) >= {"configs", "records", "summary", "unavailable", "skipped"}
    assert data["unavailable"] == {}
    methods = {c["method"] for c in data["configs"]}
    assert methods == {"ar", "chain", "tree", "ngram", "ssd"}
    ssd = [c for c in data["configs"] if c["method"] == "ssd"]
    assert sorted(c["fanout"] for c in ssd) == ["geometric", "uniform"]
    assert all(c["ssd_k"] == 3 and c["saguaro_c"] == 1 for c in ssd)
    assert meta["options"]["fanout"] == ["geometric", "uniform"] and meta["options"]["ssd_k"] == [3]
    assert "| config |" in (d / "bench.md").read_text() and "| config |" in report["stdout"]


def test_records_cover_every_turn(report):
    data = report["data"]
    n_turns = sum(len(p["turns"]) for p in PROMPTS)
    for ci, c in enumerate(data["configs"]):
        recs = [r for r in data["records"] if r["config"] == ci]
        assert len(recs) == n_turns, c["label"]
        for r in recs:
            assert r["prompt_tokens"] > 0 and 1 <= r["generated_tokens"] <= 8
            assert r["prefill_s"] > 0 and r["decode_s"] > 0
            assert r["decode_tok_s"] == pytest.approx(r["generated_tokens"] / r["decode_s"], rel=1e-9)
            if r["method"] == "ssd":
                assert 0 <= r["ssd_hit_rate"] <= 1 and 0 <= r["stall_s"] <= r["decode_s"]
            else:
                assert r["ssd_hit_rate"] is None and r["stall_s"] is None
    for s in data["summary"]:
        recs = [r for r in data["records"] if r["config"] == s["config"]]
        if s["method"] == "ssd":
            assert s["ssd_hit_rate"] == pytest.approx(statistics.fmean(r["ssd_hit_rate"] for r in recs), rel=1e-9)
            assert s["stall_s"] == pytest.approx(sum(r["stall_s"] for r in recs), rel=1e-9)
        else:
            assert s["ssd_hit_rate"] is None
    rows = list(csv.DictReader((report["dir"] / "bench.csv").open()))
    assert len(rows) == len(data["records"])
    assert {"speedup", "mean_accept_len", "draft_s", "verify_s"} <= set(rows[0])


def test_second_turn_contains_first_answer(report):
    data = report["data"]
    ar = [r for r in data["records"] if r["method"] == "ar" and r["conv_id"] == "p1"]
    t0, t1 = sorted(ar, key=lambda r: r["turn"])
    # turn 2 = turn 1 prompt + answer (assistant message) + the new user turn
    assert t1["prompt_tokens"] >= t0["prompt_tokens"] + t0["generated_tokens"]
    # every method saw the same prompt tokens
    for r in data["records"]:
        same = [a for a in ar if a["turn"] == r["turn"]] if r["conv_id"] == "p1" else []
        for a in same:
            assert r["prompt_tokens"] == a["prompt_tokens"]


def test_speedup_is_ratio_to_ar_of_same_turn(report):
    data = report["data"]
    ar = {(r["conv"], r["turn"], r["threads"], r["temp"], r["batch"]): r
          for r in data["records"] if r["method"] == "ar"}
    for r in data["records"]:
        base = ar[(r["conv"], r["turn"], r["threads"], r["temp"], r["batch"])]
        assert r["speedup"] == pytest.approx(r["decode_tok_s"] / base["decode_tok_s"], rel=1e-9)
    for s in data["summary"]:
        sp = [r["speedup"] for r in data["records"] if r["config"] == s["config"]]
        assert s["speedup_mean"] == pytest.approx(statistics.fmean(sp), rel=1e-9)
        assert s["speedup_p50"] == pytest.approx(statistics.median(sp), rel=1e-9)
        recs = [r for r in data["records"] if r["config"] == s["config"]]
        gen = sum(r["generated_tokens"] for r in recs)
        dec = sum(r["decode_s"] for r in recs)
        assert s["decode_tok_s"] == pytest.approx(gen / dec, rel=1e-9)


def test_accept_length_consistent_with_rounds_and_trace(report):
    data = report["data"]
    for r in data["records"]:
        if r["method"] == "ar":
            assert r["mean_accept_len"] == 1.0 and r["rounds"] == r["emitted"]
            assert r["generated_tokens"] - 1 <= r["rounds"] <= r["generated_tokens"]
            continue
        assert r["rounds"] >= 1 or r["generated_tokens"] == 1
        if r["rounds"]:
            assert r["mean_accept_len"] == pytest.approx(r["emitted"] / r["rounds"], rel=1e-9)
        # the prefill yields the first token, the rounds the rest (a round may
        # overshoot the stop by the rest of its accepted path, plus an EOS)
        max_path = {"tree": r["tree_depth"] + 1, "ssd": 4}.get(r["method"], 4)
        assert r["generated_tokens"] - 1 <= r["emitted"] <= r["generated_tokens"] - 1 + max_path + 1
        assert r["matches_ar"] is True, f"{r['label']} {r['conv_id']} turn {r['turn']}: greedy output differs from AR"
        if r["method"] == "ssd":
            assert r["trace_file"] is None  # SSD writes no round trace
            continue
        # the round trace says the same
        trace = [json.loads(l) for l in Path(r["trace_file"]).read_text().splitlines()]
        rounds = [t for t in trace if t["type"] == "round"]
        assert len(rounds) == r["rounds"]
        assert sum(len(t["accepted_tokens"]) + 1 for t in rounds) == r["emitted"]
        if rounds:
            tau = statistics.fmean(len(t["accepted_tokens"]) + 1 for t in rounds)
            assert r["mean_accept_len"] == pytest.approx(tau, rel=1e-9)
    for s in data["summary"]:
        recs = [r for r in data["records"] if r["config"] == s["config"]]
        if s["method"] != "ar":
            rounds = sum(r["rounds"] for r in recs)
            assert s["mean_accept_len"] == pytest.approx(sum(r["emitted"] for r in recs) / rounds, rel=1e-9)
            split = s["time_split_s"]
            parts = sum(split[k] for k in ("draft", "tree_mask", "verify", "commit"))
            assert all(v >= 0 for v in split.values())
            assert parts <= s["decode_s"] * 1.0001 + 1e-6  # the stages happen inside the decode time
            assert parts + split["other"] == pytest.approx(s["decode_s"], rel=1e-6)


def test_plot_script_runs(report, tmp_path):
    p = subprocess.run(["python3", str(REPO_ROOT / "tools" / "plot_bench.py"), str(report["dir"] / "bench.json"),
                        "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "speedup_vs_budget.png").exists()
    assert (tmp_path / "speedup_dist.png").exists()
    assert (tmp_path / "time_split.png").exists()
