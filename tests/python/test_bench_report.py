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
import sys
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


def bench_cmd(prompts: Path, out: Path, *extra: str, traces: Path | None = None) -> list[str]:
    model = model_path(DEFAULT_MODEL)
    cmd = [str(BIN), "bench", "-m", str(model), "-d", str(model),
           "--method", "ar,chain,tree,ngram,ssd", "--skip-unavailable",
           "--tree-budget", "8", "--tree-depth", "3", "--draft-k", "3",
           "--ssd-k", "3", "--fanout", "geometric,uniform", "--saguaro-c", "1",
           "--prompts", str(prompts), "--chat", "-n", "8", "-t", "1",
           "--warmup", "0", "--reps", "1", "-c", "512", "-o", str(out), "-q", *extra]
    if traces is not None:
        cmd += ["--trace-dir", str(traces)]
    return cmd


def run_bench(cmd: list[str], ok: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def load_report(out: Path) -> dict:
    return json.loads((out / "bench.json").read_text())


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory):
    if not BIN.exists():
        pytest.skip(f"{BIN} is not built (set SPECDEC_BIN)")
    tmp = tmp_path_factory.mktemp("prompts")
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return prompts


@pytest.fixture(scope="module")
def report(tmp_path_factory, prompts_file):
    """The default (paired, turn-major, shared-prefill) order."""
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "out"
    p = run_bench(bench_cmd(prompts_file, out, traces=tmp / "traces"))
    return {"dir": out, "data": load_report(out), "stdout": p.stdout}


@pytest.fixture(scope="module")
def config_order(tmp_path_factory, prompts_file):
    """The older order: each configuration over every turn, prefilling for itself."""
    out = tmp_path_factory.mktemp("bench_config") / "out"
    run_bench(bench_cmd(prompts_file, out, "--order", "config"))
    return load_report(out)


def by_run(data: dict) -> dict:
    """(config label, conversation, turn) -> record."""
    return {(r["label"], r["conv_id"], r["turn"]): r for r in data["records"]}


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


def test_eagle3_methods_need_a_head(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps(PROMPTS[0]) + "\n")
    for m in ("eagle3", "eagle3-chain", "eagle3-auto"):
        p = subprocess.run([str(BIN), "bench", "-m", str(model_path(DEFAULT_MODEL)), "--method", "ar," + m,
                            "--prompts", str(prompts), "-n", "2", "-o", str(tmp_path / "o"), "-q"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0
        assert f"method '{m}' needs an EAGLE-3 head (--eagle3 HEAD)" in p.stderr, p.stderr


def test_accepted_histogram_adds_up(report):
    """accepted_hist[i] = sequence-rounds that accepted i draft tokens: it sums to the
    rounds and its weighted sum is the accepted count, per record and per configuration."""
    data = report["data"]
    for r in data["records"]:
        if r["method"] == "ar" or r["method"].startswith("llamacpp"):
            continue
        h = r["accepted_hist"]
        assert sum(h) == r["rounds"], r["label"]
        assert sum(i * c for i, c in enumerate(h)) == r["accepted"], r["label"]
    for s in data["summary"]:
        if s["method"] == "ar" or s["method"].startswith("llamacpp"):
            continue
        h, a = s["accepted_hist"], s["acceptance_by_position"]
        assert len(a) == max(len(h) - 1, 0) and all(0 <= x <= 1 for x in a), s["label"]
        if len(h) > 1:
            assert a[0] == pytest.approx(1 - h[0] / sum(h)), s["label"]


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


def test_report_records_the_read_ceiling(report):
    """The machine's read ceiling is measured in the same run as the figures
    it qualifies: in the JSON meta and in the report's header, with how much
    of it AR decode read. The bytes one target step reads are checked against
    the gguf package's view of the file: every layer matrix, the LM head (the
    tied embedding here) and one embedding row."""
    import gguf

    data, md = report["data"], (report["dir"] / "bench.md").read_text()
    bw = data["meta"]["read_bandwidth"]["1"]
    assert bw["buffer_bytes"] == 1 << 30 and bw["bytes_per_s"] > 1e9
    tensors = {t.name: t for t in gguf.GGUFReader(str(model_path(DEFAULT_MODEL))).tensors}
    layer = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
    want = sum(int(t.n_bytes) for n, t in tensors.items() if n.startswith("blk.") and n.split(".")[2] in layer)
    embd = tensors["token_embd.weight"]
    want += int(tensors.get("output.weight", embd).n_bytes) + int(embd.n_bytes) // int(embd.shape[1])
    assert data["meta"]["target_bytes_per_token"] == want
    line = next(x for x in md.splitlines() if x.startswith("- memory read ceiling"))
    ar = next(s for s in data["summary"] if s["method"] == "ar")
    ceiling = bw["bytes_per_s"] / 1e9
    read = ar["decode_tok_s"] * want / 1e9
    share = 100.0 * ar["decode_tok_s"] * want / 1e9 / ceiling  # the report's order of operations
    assert f"{ceiling:.1f} GB/s at t=1 (AR decode at T=0, batch 1: {read:.1f} GB/s, {share:.0f} %)" in line


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
        # each round says what drafted it; the record counts the lookup ones
        assert r["lookup_rounds"] == sum(t["source"] == "lookup" for t in rounds)
        expected = {"ngram": {"lookup", "none"}}.get(r["method"], {"draft", "none"})  # no --lookup-min here
        assert {t["source"] for t in rounds} <= expected
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
    p = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "plot_bench.py"), str(report["dir"] / "bench.json"),
                        "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "speedup_vs_budget.png").exists()
    assert (tmp_path / "speedup_dist.png").exists()
    assert (tmp_path / "time_split.png").exists()


# --- Paired order, shared prefill, resume, shards (issue #7's full protocol) ---

def test_paired_order_with_shared_prefill_decodes_what_config_order_does(report, config_order):
    paired, older = by_run(report["data"]), by_run(config_order)
    assert paired.keys() == older.keys()
    assert report["data"]["meta"]["run"]["order"] == "turn" and report["data"]["meta"]["run"]["shared_prefill"]
    assert config_order["meta"]["run"]["order"] == "config" and not config_order["meta"]["run"]["shared_prefill"]
    for key, r in paired.items():
        o = older[key]
        # one prefill per turn: the same prefill time on every configuration's record of that turn
        assert r["shared_prefill"] is True and o["shared_prefill"] is False
        assert r["draft_prefill_s"] > 0 and o["draft_prefill_s"] is None
        same_turn = [x for x in report["data"]["records"] if x["conv_id"] == r["conv_id"] and x["turn"] == r["turn"]]
        assert {x["prefill_s"] for x in same_turn} == {r["prefill_s"]}
        # the decode from the shared prefix is token for token the self-prefilled one
        assert r["tokens"] == o["tokens"], key
        assert r["generated_tokens"] == o["generated_tokens"] and r["prompt_tokens"] == o["prompt_tokens"]
        assert len(r["tokens"]) == r["generated_tokens"]
        if r["method"] in ("chain", "tree", "ngram"):  # deterministic drafts: the very same rounds
            assert (r["rounds"], r["drafted"], r["accepted"]) == (o["rounds"], o["drafted"], o["accepted"]), key
        if r["method"] != "ar":
            assert r["matches_ar"] is True and o["matches_ar"] is True, key


def test_checkpoint_has_one_line_per_turn_unit(report):
    lines = (report["dir"] / "checkpoint.jsonl").read_text().splitlines()
    header, units = json.loads(lines[0]), [json.loads(l) for l in lines[1:]]
    assert "fingerprint" in header and HEX64.match(header["fingerprint"]["target_sha256"])
    n_turns = sum(len(p["turns"]) for p in PROMPTS)
    n_cfg = len(report["data"]["configs"])
    assert len(units) == n_turns  # batch 1: a unit is one conversation turn, every configuration
    for u in units:
        assert len(u["records"]) == n_cfg
        assert [r["config"] for r in u["records"]] == list(range(n_cfg))  # AR first, back to back
        # provenance: the build that made the unit, when, and how loaded the machine was
        assert u["git_revision"] == report["data"]["meta"]["git_revision"]
        assert u["started_at"].endswith("Z") and len(u["load_average"].split()) == 3
    prov = report["data"]["meta"]["provenance"]
    assert prov["git_revisions"] == {report["data"]["meta"]["git_revision"]: len(units)}
    assert prov["first_unit_at"] <= prov["last_unit_at"]
    assert prov["load_average_1m"]["min"] <= prov["load_average_1m"]["p50"] <= prov["load_average_1m"]["max"]
    assert "units by git revision" in (report["dir"] / "bench.md").read_text()


def same_decodes(a: dict, b: dict) -> None:
    ra, rb = by_run(a), by_run(b)
    assert ra.keys() == rb.keys()
    for k in ra:
        for f in ("tokens", "generated_tokens", "prompt_tokens", "matches_ar", "finish_reason"):
            assert ra[k][f] == rb[k][f], (k, f)


def test_stop_and_resume_reports_what_an_uninterrupted_run_does(report, prompts_file, tmp_path):
    out = tmp_path / "out"
    # first session: one unit (turn 1 of p0, every configuration), then stop
    run_bench(bench_cmd(prompts_file, out, "--stop-after", "1"))
    part = load_report(out)
    assert part["meta"]["run"]["stopped"] is True and part["meta"]["run"]["units_run"] == 1
    assert {(r["conv_id"], r["turn"]) for r in part["records"]} == {("p0", 0)}
    assert "stopped early" in (out / "bench.md").read_text()
    # second session: the rest
    run_bench(bench_cmd(prompts_file, out, "--resume"))
    full = load_report(out)
    assert full["meta"]["run"]["stopped"] is False
    assert (full["meta"]["run"]["units_resumed"], full["meta"]["run"]["units_run"]) == (1, 2)
    same_decodes(full, report["data"])
    # the resumed unit's records are the first session's, measured times included
    first = by_run(part)
    for k, r in by_run(full).items():
        if k in first:
            assert r["decode_s"] == first[k]["decode_s"] and r["prefill_s"] == first[k]["prefill_s"]
    # a third session has nothing left: the same report from the checkpoint alone
    run_bench(bench_cmd(prompts_file, out, "--resume"))
    again = load_report(out)
    assert (again["meta"]["run"]["units_resumed"], again["meta"]["run"]["units_run"]) == (3, 0)
    assert again["records"] == full["records"] and again["summary"] == full["summary"]


def test_resume_refuses_other_options(prompts_file, tmp_path):
    out = tmp_path / "out"
    run_bench(bench_cmd(prompts_file, out, "--stop-after", "1"))
    cmd = bench_cmd(prompts_file, out, "--resume")
    cmd[cmd.index("-n") + 1] = "7"
    p = run_bench(cmd, ok=False)
    assert p.returncode != 0
    assert "other options" in p.stderr and "n_predict" in p.stderr
    # the checkpoint is untouched
    lines = (out / "checkpoint.jsonl").read_text().splitlines()
    assert len(lines) == 2


def test_resume_refuses_another_eagle3_head_at_the_same_path(prompts_file, tmp_path):
    # A head is identified by its weights' sha256, not its path: retraining
    # one in place and resuming would otherwise mix records of two heads.
    # The head here is llama.cpp's eagle3 GGUF of a random head.
    from test_eagle3 import convert_to_gguf, target_dims, write_head

    dims = target_dims(model_path(DEFAULT_MODEL))
    head = tmp_path / "head.gguf"
    write_head(tmp_path / "a", dims, seed=1)
    convert_to_gguf(tmp_path / "a", head)
    out = tmp_path / "out"
    cmd = [str(BIN), "bench", "-m", str(model_path(DEFAULT_MODEL)), "--eagle3", str(head),
           "--method", "ar,eagle3-chain", "--draft-k", "2", "--prompts", str(prompts_file), "--chat", "-n", "8",
           "-t", "1", "--warmup", "0", "--reps", "1", "-c", "512", "-o", str(out), "-q"]
    run_bench(cmd + ["--stop-after", "1"])
    assert load_report(out)["meta"]["eagle3"]["sha256"] and HEX64.match(load_report(out)["meta"]["eagle3"]["sha256"])
    write_head(tmp_path / "b", dims, seed=2)
    convert_to_gguf(tmp_path / "b", head)
    p = run_bench(cmd + ["--resume"], ok=False)
    assert p.returncode != 0 and "other options or models" in p.stderr and "eagle3_sha256" in p.stderr, p.stderr
    # The first head back: the run resumes and completes, every record AR's tokens.
    convert_to_gguf(tmp_path / "a", head)
    run_bench(cmd + ["--resume"])
    recs = load_report(out)["records"]
    ar = {(r["conv_id"], r["turn"]): r["tokens"] for r in recs if r["method"] == "ar"}
    e3 = [r for r in recs if r["method"] == "eagle3-chain"]
    assert len(ar) == 3 and len(e3) == 3
    assert all(r["tokens"] == ar[(r["conv_id"], r["turn"])] and r["matches_ar"] for r in e3)


def test_shards_merge_into_the_full_report(report, prompts_file, tmp_path):
    out = tmp_path / "out"
    run_bench(bench_cmd(prompts_file, out, "--shard", "1/2"))
    one = load_report(out)
    assert {r["conv_id"] for r in one["records"]} == {"p0"}
    run_bench(bench_cmd(prompts_file, out, "--shard", "2/2"))
    assert (out / "checkpoint-1-of-2.jsonl").exists() and (out / "checkpoint-2-of-2.jsonl").exists()
    same_decodes(load_report(out), report["data"])
    p = run_bench(bench_cmd(prompts_file, out, "--shard", "3/2"), ok=False)
    assert p.returncode != 0 and "--shard" in p.stderr


def llamacpp_input(tokens: list[int], n_ctx: int, n_predict: int) -> dict:
    """tools/bench_llamacpp.py's input for one greedy turn on the default
    model: llama.cpp AR and prompt lookup, one thread, no warm-up."""
    return {"model": str(model_path(DEFAULT_MODEL)), "threads": [1], "n_ctx": n_ctx,
            "turns": [{"conv": 0, "turn": 0, "tokens": tokens}],
            "n_predict": n_predict, "temps": [0.0], "ignore_eos": True, "eog": [], "seed": 0, "warmup": 0,
            "reps": 1, "pld_num_pred_tokens": 3, "pld_max_ngram_size": 2}


def run_llamacpp_baseline(inp: dict, tmp_path: Path, out: str, *extra: str) -> dict:
    """Runs tools/bench_llamacpp.py on `inp`; its report, once it exits 0."""
    (tmp_path / "in.json").write_text(json.dumps(inp))
    p = subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "python"), str(REPO_ROOT / "tools" / "bench_llamacpp.py"),
                        "--input", str(tmp_path / "in.json"), "--out", str(tmp_path / out), "--quiet", *extra],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads((tmp_path / out).read_text())


def test_llamacpp_baseline_resumes_from_its_checkpoint(tmp_path):
    inp = llamacpp_input([504, 3300, 30, 1848, 314], n_ctx=256, n_predict=4)
    ckpt = tmp_path / "ck.jsonl"
    first = run_llamacpp_baseline(inp, tmp_path, "a.json", "--checkpoint", str(ckpt))
    assert [r["method"] for r in first["runs"]] == ["llamacpp-ar", "llamacpp-pld"]
    assert len(ckpt.read_text().splitlines()) == 2  # one record per method, appended as it finished
    # nothing left to run: the stored records, times included
    again = run_llamacpp_baseline(inp, tmp_path, "b.json", "--checkpoint", str(ckpt))
    assert again["runs"] == first["runs"]
    assert len(ckpt.read_text().splitlines()) == 2


def test_llamacpp_prompt_lookup_runs_past_one_batch(tmp_path):
    """llama.cpp's prompt lookup on a turn longer than its 512-token batch:
    every turn is measured (none skipped) and equals llama.cpp's AR output."""
    out = run_llamacpp_baseline(llamacpp_input([504, 3300, 30, 1848, 314] * 120, n_ctx=1024, n_predict=8),
                                tmp_path, "out.json")
    assert "skipped" not in out, out.get("skipped")
    by = {r["method"]: r["records"] for r in out["runs"]}
    assert by["llamacpp-pld"][0]["n_generated"] == 8
    assert by["llamacpp-pld"][0]["tokens"] == by["llamacpp-ar"][0]["tokens"]
    assert by["llamacpp-pld"][0]["matches_llamacpp_ar"] is True


def test_shard_reports_merge_skipped_turns(report, prompts_file, tmp_path):
    recs = [r for r in report["data"]["records"] if r["method"] == "ar"]
    second = next(r["prompt_tokens"] for r in recs if r["conv_id"] == "p1" and r["turn"] == 1)
    first = max(r["prompt_tokens"] for r in recs if r["turn"] == 0)
    assert first < second
    out = tmp_path / "out"
    def cmd(*extra: str) -> list[str]:
        c = bench_cmd(prompts_file, out, "--max-prompt-tokens", str(second - 1), *extra)
        c[c.index("--method") + 1] = "ar,ngram"
        return c

    run_bench(cmd("--shard", "2/2"))  # p1: its second turn does not fit
    run_bench(cmd("--shard", "1/2"))  # p0, then the merged report
    data = load_report(out)
    assert [(s["conv"], s["turn"]) for s in data["skipped"]] == [("p1", 1)]
    assert {(r["conv_id"], r["turn"]) for r in data["records"]} == {("p0", 0), ("p1", 0)}
    # resuming does not list it twice
    run_bench(cmd("--shard", "1/2", "--resume"))
    assert len(load_report(out)["skipped"]) == 1


def test_self_speculation_draft_layers(prompts_file, tmp_path):
    """--draft-layers: the draft is the target running its first L layers. With
    every layer kept, draft and target agree on every token, so every drafted
    token is accepted; -d together with --draft-layers is refused."""
    model = str(model_path(DEFAULT_MODEL))
    common = ["--method", "ar,chain", "--draft-k", "3", "--prompts", str(prompts_file), "--chat", "-n", "8",
              "-t", "1", "--warmup", "0", "-c", "512", "-q"]
    out = tmp_path / "o"
    run_bench([str(BIN), "bench", "-m", model, "--draft-layers", "30", *common, "-o", str(out)])
    data = load_report(out)
    assert data["meta"]["options"]["draft_layers"] == list(range(30))
    chain = [r for r in data["records"] if r["method"] == "chain"]
    assert len(chain) == 3 and all(r["matches_ar"] for r in chain)
    assert all(r["drafted"] > 0 and r["accepted"] == r["drafted"] for r in chain)
    # A 2-layer draft really runs 2 layers: it misses tokens the full model gets.
    shallow = tmp_path / "shallow"
    run_bench([str(BIN), "bench", "-m", model, "--draft-layers", "2", *common, "-o", str(shallow)])
    chain2 = [r for r in load_report(shallow)["records"] if r["method"] == "chain"]
    assert all(r["matches_ar"] for r in chain2)
    assert sum(r["accepted"] for r in chain2) < sum(r["drafted"] for r in chain2)
    p = run_bench([str(BIN), "bench", "-m", model, "-d", model, "--draft-layers", "3", *common,
                   "-o", str(tmp_path / "bad")], ok=False)
    assert p.returncode != 0 and "not both" in p.stderr


@pytest.fixture(scope="module")
def llamacpp_spec_bin():
    """llama.cpp's speculative example, built by tools/build_llamacpp.sh
    (a no-op once built; scripts/test.sh builds it before the tests)."""
    p = subprocess.run([str(REPO_ROOT / "tools" / "build_llamacpp.sh")], capture_output=True, text=True,
                       timeout=7200)
    assert p.returncode == 0, p.stderr[-3000:]
    path = Path(p.stdout.strip().splitlines()[-1])
    return path if path.is_absolute() else REPO_ROOT / path


@pytest.fixture(scope="module")
def llamacpp_report(tmp_path_factory, prompts_file, llamacpp_spec_bin):
    """AR and chain with the llama.cpp baselines, the draft model's included."""
    out = tmp_path_factory.mktemp("bench_llamacpp") / "out"
    model = str(model_path(DEFAULT_MODEL))
    cmd = [str(BIN), "bench", "-m", model, "-d", model, "--method", "ar,chain", "--draft-k", "3",
           "--prompts", str(prompts_file), "--chat", "-n", "8", "--ignore-eos", "-t", "1", "--warmup", "0",
           "-c", "512", "--llamacpp", "-o", str(out), "-q"]
    env = dict(os.environ, SPECDEC_LLAMACPP_SPEC_BIN=str(llamacpp_spec_bin))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr
    return {"dir": out, "data": load_report(out), "cmd": cmd, "env": env}


def test_llamacpp_draft_baseline_records(llamacpp_report):
    data = llamacpp_report["data"]
    assert data["unavailable"] == {} and data["skipped"] == []
    labels = {c["label"] for c in data["configs"]}
    assert {"llamacpp-ar t=1", "llamacpp-pld t=1", "llamacpp-draft k=3 t=1"} <= labels
    recs = by_run(data)
    ar = {(r["conv_id"], r["turn"]): r for r in data["records"] if r["method"] == "ar"}
    lar = {(r["conv_id"], r["turn"]): r for r in data["records"] if r["method"] == "llamacpp-ar"}
    draft = [r for r in data["records"] if r["method"] == "llamacpp-draft"]
    assert len(draft) == len(ar) == len(lar) == sum(len(p["turns"]) for p in PROMPTS)
    for r in draft:
        key = (r["conv_id"], r["turn"])
        # the example read exactly specdec's prompt tokens (its own count is checked) and decoded at
        # least -n tokens (its last round may run up to K past it)
        assert r["prompt_tokens"] == ar[key]["prompt_tokens"] == lar[key]["prompt_tokens"]
        assert 8 <= r["generated_tokens"] <= 8 + 3 and r["finish_reason"] == "length"
        assert r["prefill_s"] > 0 and r["decode_s"] > 0 and r["draft_k"] == 3
        assert 0 < r["drafted"] and 0 <= r["accepted"] <= r["drafted"]
        assert r["rounds"] is None and r["mean_accept_len"] is None
        assert isinstance(r["matches_ar"], bool)  # greedy output vs llama.cpp AR's
        assert r["speedup"] == pytest.approx(r["decode_tok_s"] / ar[key]["decode_tok_s"], rel=1e-9)
        assert r["speedup_llamacpp_ar"] == pytest.approx(r["decode_tok_s"] / lar[key]["decode_tok_s"], rel=1e-9)
    for r in lar.values():
        assert r["speedup_llamacpp_ar"] == pytest.approx(1.0) and r["matches_ar"] is None
    pld = [r for r in data["records"] if r["method"] == "llamacpp-pld"]
    assert all(isinstance(r["matches_ar"], bool) for r in pld)
    s = next(s for s in data["summary"] if s["method"] == "llamacpp-draft")
    assert s["drafted"] == sum(r["drafted"] for r in draft) and s["accepted"] == sum(r["accepted"] for r in draft)
    assert s["greedy_compared"] == len(draft)
    assert s["speedup_llamacpp_ar_mean"] == pytest.approx(statistics.fmean(r["speedup_llamacpp_ar"] for r in draft))
    md = (llamacpp_report["dir"] / "bench.md").read_text()
    assert "## llama.cpp baselines" in md
    section = md.split("## llama.cpp baselines")[1]
    row = next(l for l in section.splitlines() if l.startswith("| llamacpp-draft k=3 t=1 |"))
    assert f"| {s['drafted']} | {s['accepted']} |" in row
    assert recs[("llamacpp-draft k=3 t=1", "p1", 1)]["prompt_tokens"] > recs[("llamacpp-draft k=3 t=1", "p1", 0)][
        "prompt_tokens"]


NGRAM_TYPES = ["ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"]


def test_llamacpp_ngram_types_have_rows(llamacpp_report):
    """Every n-gram speculative type of llama.cpp runs by its own example on every turn, with its
    counts and its greedy output checked against llama.cpp AR's."""
    data = llamacpp_report["data"]
    ar = {(r["conv_id"], r["turn"]): r for r in data["records"] if r["method"] == "ar"}
    md = (llamacpp_report["dir"] / "bench.md").read_text().split("## llama.cpp baselines")[1]
    for t in NGRAM_TYPES:
        method = "llamacpp-" + t
        rows = [r for r in data["records"] if r["method"] == method]
        assert len(rows) == len(ar), method
        for r in rows:
            assert r["label"] == f"{method} t=1" and r["prompt_tokens"] == ar[(r["conv_id"], r["turn"])]["prompt_tokens"]
            # -n 8: at least 8 decoded; an n-gram draft (up to 64) may run past it in the last round
            assert 8 <= r["generated_tokens"] <= 8 + 64 and r["decode_s"] > 0
            assert 0 <= r["accepted"] <= r["drafted"] and r["rounds"] is None
            assert isinstance(r["matches_ar"], bool)
        assert any(l.startswith(f"| {method} t=1 |") for l in md.splitlines()), method
    run = json.loads((llamacpp_report["dir"] / "llamacpp_checkpoint.jsonl").read_text().splitlines()[-1])
    assert run["impl"] == "llama-speculative-simple" and run["spec_type"] in NGRAM_TYPES


def test_llamacpp_spec_option_picks_types_and_refuses_unknown(prompts_file, tmp_path):
    model = str(model_path(DEFAULT_MODEL))
    base = [str(BIN), "bench", "-m", model, "--method", "ar", "--prompts", str(prompts_file), "--max-turns", "1",
            "--limit", "1", "-n", "2", "-t", "1", "--warmup", "0", "-c", "512", "--llamacpp", "-q"]
    p = subprocess.run(base + ["--llamacpp-spec", "ngram-simple,bogus", "-o", str(tmp_path / "bad")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "unknown llama.cpp speculative type 'bogus'" in p.stderr
    assert not (tmp_path / "bad" / "bench.json").exists()
    p = subprocess.run(base + ["--llamacpp-spec", "none", "-o", str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    data = load_report(tmp_path / "none")
    assert {r["method"] for r in data["records"]} == {"ar", "llamacpp-ar", "llamacpp-pld"}
    assert data["unavailable"] == {}


def test_llamacpp_draft_baseline_resumes(llamacpp_report):
    ck = llamacpp_report["dir"] / "llamacpp_checkpoint.jsonl"
    before = ck.read_text()
    assert sum('"llamacpp-draft"' in l for l in before.splitlines()) == sum(len(p["turns"]) for p in PROMPTS)
    p = subprocess.run(llamacpp_report["cmd"] + ["--resume"], capture_output=True, text=True, timeout=900,
                       env=llamacpp_report["env"])
    assert p.returncode == 0, p.stderr
    assert ck.read_text() == before  # every llama.cpp record came from the checkpoint
    again = load_report(llamacpp_report["dir"])
    key = lambda d: sorted((r["label"], r["conv_id"], r["turn"], r["decode_s"], r["drafted"])  # noqa: E731
                           for r in d["records"] if r["method"] == "llamacpp-draft")
    assert key(again) == key(llamacpp_report["data"])


def run_llamacpp_eagle3_bench(model: Path, prompts_file: Path, out: Path, spec_bin: Path, *, seed: int, k: int,
                              n: int, **head_kw) -> dict:
    """specdec bench with a random head for `model`: ar and eagle3-chain, plus llama.cpp's
    draft-eagle3 with the same head; returns the report."""
    from test_eagle3 import target_dims, write_head

    dims = target_dims(model)
    head = out.parent / (out.name + "-head")
    write_head(head, dims, seed=seed, layer_ids=[2, dims.n_layer // 2, dims.n_layer - 3], **head_kw)
    cmd = [str(BIN), "bench", "-m", str(model), "--eagle3", str(head), "--method", "ar,eagle3-chain",
           "--draft-k", str(k), "--prompts", str(prompts_file), "--max-turns", "1", "--limit", "2", "-n", str(n),
           "--ignore-eos", "-t", "1", "--warmup", "0", "-c", "512", "--llamacpp", "--llamacpp-spec",
           "draft-eagle3", "-o", str(out), "-q"]
    env = dict(os.environ, SPECDEC_LLAMACPP_SPEC_BIN=str(spec_bin))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr
    return {"cmd": cmd, "env": env, "head": head, "data": load_report(out)}


def test_llamacpp_eagle3_baseline_runs_the_same_head(prompts_file, tmp_path, llamacpp_spec_bin):
    """llama.cpp's draft-eagle3 drafts with the head specdec's eagle3-chain uses: the Hugging Face
    layout is converted once to llama.cpp's eagle3 GGUF (float16 matrices) and reused; without
    --eagle3 the type is left out. (A random head: llama.cpp drafts, but few drafts are accepted.)"""
    import gguf

    out = tmp_path / "out"
    run = run_llamacpp_eagle3_bench(model_path(DEFAULT_MODEL), prompts_file, out, llamacpp_spec_bin, seed=3, k=3, n=8)
    cmd, env, head, data = run["cmd"], run["env"], run["head"], run["data"]
    assert data["unavailable"] == {} and data["skipped"] == []
    ar = {(r["conv_id"], r["turn"]): r for r in data["records"] if r["method"] == "ar"}
    rows = [r for r in data["records"] if r["method"] == "llamacpp-eagle3"]
    assert len(rows) == len(ar) == 2
    for r in rows:
        assert r["label"] == "llamacpp-eagle3 k=3 t=1" and r["draft_k"] == 3
        assert r["prompt_tokens"] == ar[(r["conv_id"], r["turn"])]["prompt_tokens"]
        assert 8 <= r["generated_tokens"] <= 8 + 3 and r["decode_s"] > 0
        assert 0 < r["drafted"] and 0 <= r["accepted"] <= r["drafted"]
        assert isinstance(r["matches_ar"], bool)
    g = gguf.GGUFReader(str(out / "llamacpp_eagle3_head.gguf"))
    types = {t.name: t.tensor_type for t in g.tensors}
    assert types["fc.weight"] == gguf.GGMLQuantizationType.F16
    assert types["blk.0.attn_norm.weight"] == gguf.GGMLQuantizationType.F32
    made = (out / "llamacpp_eagle3_head.gguf").stat().st_mtime_ns
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr
    assert (out / "llamacpp_eagle3_head.gguf").stat().st_mtime_ns == made  # converted once
    no_head = [a for a in cmd if a not in ("--eagle3", str(head))]
    no_head[no_head.index("ar,eagle3-chain")] = "ar"
    no_head[no_head.index(str(out))] = str(tmp_path / "nohead")
    p = subprocess.run(no_head, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr
    assert "llamacpp-eagle3" not in {r["method"] for r in load_report(tmp_path / "nohead")["records"]}


def test_llamacpp_draft_not_built_is_reported(prompts_file, tmp_path):
    out = tmp_path / "out"
    model = str(model_path(DEFAULT_MODEL))
    p = subprocess.run([str(BIN), "bench", "-m", model, "-d", model, "--method", "ar", "--prompts", str(prompts_file),
                        "--max-turns", "1", "--limit", "1", "-n", "2", "-t", "1", "--warmup", "0", "-c", "512",
                        "--llamacpp", "-o", str(out), "-q"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, SPECDEC_LLAMACPP_SPEC_BIN=str(tmp_path / "missing")))
    assert p.returncode == 0, p.stderr
    data = load_report(out)
    assert set(data["unavailable"]) == {"llamacpp-draft"} | {"llamacpp-" + t for t in NGRAM_TYPES}
    assert all("build_llamacpp.sh" in why for why in data["unavailable"].values())
    assert {r["method"] for r in data["records"]} == {"ar", "llamacpp-ar", "llamacpp-pld"}
    assert "llamacpp-draft" in (out / "bench.md").read_text()  # under "Not measured"


def test_auto_min_gain_sweeps_and_refuses_bad_values(prompts_file, tmp_path):
    """--auto-min-gain gives one auto configuration per margin (the default one keeps its old
    label), each greedy-identical to AR; a margin outside [0, 1] is refused."""
    model = str(model_path(DEFAULT_MODEL))
    base = [str(BIN), "bench", "-m", model, "--method", "ar,auto", "--prompts", str(prompts_file), "--max-turns", "1",
            "--limit", "2", "-n", "8", "-t", "1", "--warmup", "0", "-c", "512", "-q"]
    p = subprocess.run(base + ["--auto-min-gain", "0.02,0.5", "-o", str(tmp_path / "ok")], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    data = load_report(tmp_path / "ok")
    labels = {c["label"] for c in data["configs"]}
    assert {"auto k=5 t=1", "auto k=5 gain=0.5 t=1"} <= labels, labels
    gains = sorted(c["auto_min_gain"] for c in data["configs"] if c["method"] == "auto")
    assert gains == [0.02, 0.5]
    assert all(r["matches_ar"] is True for r in data["records"] if r["method"] == "auto")
    p = subprocess.run(base + ["--auto-min-gain", "1.5", "-o", str(tmp_path / "bad")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode != 0 and "--auto-min-gain 1.5 is outside [0, 1]" in p.stderr


def test_llamacpp_eagle3_on_a_target_llama_cpp_cannot_feed_is_unavailable(prompts_file, tmp_path, llamacpp_spec_bin):
    """The vendored llama.cpp captures EAGLE-3 features for some architectures only (not qwen2): its
    example then aborts on every turn, so the row is reported unavailable with the reason once,
    after the first turn, instead of a skipped entry per turn; specdec's own eagle3 rows still run."""
    out = tmp_path / "out"
    data = run_llamacpp_eagle3_bench(model_path("qwen2.5-coder-0.5b-instruct-q4_k_m"), prompts_file, out,
                                     llamacpp_spec_bin, seed=5, k=2, n=4, draft_vocab=1024, n_ff=256)["data"]
    why = data["unavailable"].get("llamacpp-eagle3", "")
    assert "qwen2" in why and "EAGLE-3 features" in why, data["unavailable"]
    assert data["skipped"] == []
    assert not [r for r in data["records"] if r["method"] == "llamacpp-eagle3"]
    assert len([r for r in data["records"] if r["method"] == "eagle3-chain"]) == 2
    assert "llamacpp-eagle3" in (out / "bench.md").read_text()


def test_micro_mode_times_verification_forwards_on_llama_cpp(tmp_path):
    # The AR micro-mode's verification-shaped forwards on llama.cpp too: the
    # same sizes, each past the same prefix with the cache rolled back, so the
    # report sets specdec's fwd(N) beside llama.cpp's. A size past llama.cpp's
    # batch (512 tokens) has no llama.cpp row rather than failing the baseline.
    out = tmp_path / "out"
    p = subprocess.run([str(BIN), "bench", "--method", "ar", "-m", str(model_path(DEFAULT_MODEL)), "--prefill", "16",
                        "--decode", "4", "--forward-sizes", "1,2,4,520", "--forward-reps", "2", "--reps", "1", "-t",
                        "1", "--llamacpp", "-o", str(out), "-q"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "bench.json").read_text())
    assert [f["n"] for f in data["micro"][0]["forward"]] == [1, 2, 4, 520]
    (lc,) = data["llamacpp"]["micro"]
    fwd = lc["forward"]
    assert [f["n"] for f in fwd] == [1, 2, 4]
    assert fwd[0]["ratio"] == 1.0
    for f in fwd:
        assert len(f["rep_seconds"]) == 2 and f["seconds"] > 0
        assert abs(f["ratio"] - f["seconds"] / fwd[0]["seconds"]) < 1e-9
    md = (out / "bench.md").read_text()
    assert "Verification-shaped forwards against llama.cpp" in md
    table = md.split("Verification-shaped forwards against llama.cpp")[1]
    rows = [l for l in table.splitlines() if l.startswith("| 1 |")]
    assert [l.split("|")[2].strip() for l in rows] == ["1", "2", "4"], table
