"""The EAGLE-3 training pipeline (tools/eagle3_*.py) on the CI model:

- the PyTorch head's forward and training-time unroll against
  test_eagle3.py's numpy reference of the head (random weights, every lane of
  a few-step unroll against a separate reference run of that lane's drafting);
- the target distribution training uses (output_norm + LM head applied to
  `dev features`' last hidden state, weights read with the `gguf` package)
  against the engine's own logits (`specdec logits`), and the features it
  stores against `dev eagle3-dump`'s float32 capture;
- the whole pipeline, tiny: prompts, regenerated responses, features,
  training, export; then `generate --eagle3 <exported>` is AR's output token
  for token, and the trained head is accepted more often than a head of the
  same shape with random weights.
The torch side runs in .venv-train (scripts/setup.sh test: Debian's
python3-torch), called as a subprocess from this .venv.
"""
from __future__ import annotations

import json
import os
import subprocess
import textwrap

import numpy as np
import pytest

from conftest import REPO_ROOT, model_path, run_specdec
from test_eagle3 import MODEL, numpy_head, target_dims, token_embeddings, write_head

TRAIN_PY = REPO_ROOT / ".venv-train" / "bin" / "python"


def torch_py(code: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    if not TRAIN_PY.exists():
        pytest.fail(f"{TRAIN_PY} is missing; scripts/setup.sh test makes it", pytrace=False)
    r = subprocess.run([str(TRAIN_PY), "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                       cwd=REPO_ROOT, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "tools")})
    assert r.returncode == 0, r.stderr[-4000:]
    return r


@pytest.fixture(scope="module")
def dims():
    return target_dims(model_path(MODEL))


UNROLL = """
import sys, numpy as np, torch
from safetensors.numpy import load_file
from eagle3_head_torch import Eagle3Head
from eagle3_target import load_target
head_dir, io_path, n_ff, dv, theta, eps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
tgt = load_target(sys.argv[7])
d = np.load(io_path)
h = Eagle3Head(hidden=tgt.n_embd, target_hidden=tgt.n_embd, n_head=tgt.n_head, n_head_kv=tgt.n_head_kv,
               n_ff=n_ff, draft_vocab=dv, eps=eps, rope_theta=theta, embed=tgt.embed)
h.load_hf(load_file(head_dir + "/model.safetensors"))
T = d["feats"].shape[0]
with torch.no_grad():
    outs = h.unroll(torch.from_numpy(d["feats"]).float(), torch.from_numpy(d["tokens"]).long(),
                    torch.arange(T), torch.zeros(T, dtype=torch.long), int(d["steps"]))
    np.save(io_path + ".out.npy", np.stack([h.logits(o).numpy() for o in outs]))
"""


def test_torch_unroll_matches_numpy_reference(tmp_path, dims):
    """Lane s of the unroll = the reference's rows for a prefix ending at s + 1 drafting tokens s + 2..."""
    head = tmp_path / "head"
    theta, n_ff, dv, steps = 50000.0, 384, 1024, 3
    t = write_head(head, dims, seed=3, draft_vocab=dv, n_ff=n_ff, rope_theta=theta)
    rng = np.random.default_rng(7)
    n = 14
    tokens = rng.integers(0, dims.n_vocab, n + steps + 1)
    feats = rng.standard_normal((n, 3 * dims.n_embd)) * 2.0
    io = tmp_path / "io.npz"
    np.savez(io, feats=feats.astype(np.float32), tokens=tokens, steps=steps)
    torch_py(UNROLL, str(head), str(io), str(n_ff), str(dv), str(theta), str(dims.eps), str(model_path(MODEL)))
    got = np.load(str(io) + ".out.npy")  # (steps + 1, n, dv)
    emb = token_embeddings(model_path(MODEL))
    for s in (0, 5, n - 2):
        ref, _ = numpy_head(t, dims, emb, feats[:s + 2].astype(np.float64), list(tokens[:s + 2]),
                            list(tokens[s + 2:s + 2 + steps]))
        # ref rows: 0..s real (lane s's step 0 is row s), then its steps 1..3.
        want = np.concatenate([ref[:s + 1], ref[s + 1:]])
        have = np.concatenate([got[0, :s + 1], got[1:, s]])
        scale = np.abs(want).max(axis=1, keepdims=True)
        assert np.abs(have - want).max() / scale.max() < 1e-4, (s, np.abs(have - want).max(axis=1) / scale[:, 0])


TARGET_LOGITS = """
import sys, json, numpy as np, torch
from eagle3_target import load_target
tgt = load_target(sys.argv[1])
h = np.fromfile(sys.argv[2], dtype=np.float16).reshape(-1, 4, tgt.n_embd)[:, 3].astype(np.float32)
tgt.set_draft(np.arange(tgt.n_vocab))
np.save(sys.argv[3], tgt.draft_logits(torch.from_numpy(h)).numpy())
"""


def test_features_and_target_distribution(tmp_path, dims):
    rng = np.random.default_rng(11)
    tokens = [int(x) for x in rng.integers(100, dims.n_vocab, 24)]
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"model": str(model_path(MODEL)), "threads": 2, "chunk": 5,
                               "sequences": [{"tokens": tokens, "out": str(tmp_path / "f.f16")}]}))
    run_specdec("dev", "features", str(req), str(tmp_path / "res.json"))
    res = json.loads((tmp_path / "res.json").read_text())
    assert res["feature_layers"] == [2, dims.n_layer // 2, dims.n_layer - 3]
    assert res["sequences"][0]["n_tokens"] == 24 and res["sequences"][0]["tokens"] == tokens
    rows = np.fromfile(tmp_path / "f.f16", dtype=np.float16).reshape(24, 4, dims.n_embd).astype(np.float32)
    # The three feature rows, chunked by 5, against eagle3-dump's single forward in float32.
    head = tmp_path / "head"
    write_head(head, dims, seed=1)
    dreq = tmp_path / "dump.json"
    dreq.write_text(json.dumps({"model": str(model_path(MODEL)), "eagle3": str(head), "tokens": tokens,
                                "draft_steps": 0, "threads": 2}))
    run_specdec("dev", "eagle3-dump", str(dreq), str(tmp_path / "dump.out"))
    ref = np.fromfile(str(tmp_path / "dump.out") + ".features", dtype=np.float32).reshape(24, 3, dims.n_embd)
    assert np.allclose(rows[:, :3], ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max(axis=2, keepdims=True).max())
    # Training's target logits from the stored last hidden state vs the engine's logits.
    torch_py(TARGET_LOGITS, str(model_path(MODEL)), str(tmp_path / "f.f16"), str(tmp_path / "lg.npy"))
    mine = np.load(tmp_path / "lg.npy")
    run_specdec("logits", "-m", str(model_path(MODEL)), "--tokens", *map(str, tokens), "-o", str(tmp_path / "lg.f32"),
                "-t", "2")
    eng = np.fromfile(tmp_path / "lg.f32", dtype=np.float32).reshape(len(tokens), -1)
    assert mine.shape == eng.shape
    assert (mine.argmax(1) == eng.argmax(1)).mean() >= 0.95
    # Two roundings stand between them: the hidden state stored as float16,
    # and the engine's own 8-bit activations in its LM-head matmul, as ggml's
    # (torch multiplies in float32). Up to ~2 % of a row's largest logit on
    # single entries, total variation ~0.025 on average and up to ~0.05 on
    # this model's flat distributions (2026-12-06: mean 0.025, max 0.051).
    err = np.abs(mine - eng).max(axis=1) / np.abs(eng).max(axis=1)
    assert err.max() < 5e-2, err

    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    tv = 0.5 * np.abs(softmax(mine.astype(np.float64)) - softmax(eng.astype(np.float64))).sum(axis=1)
    print("target distribution: total variation per position, mean %.4f max %.4f" % (tv.mean(), tv.max()))
    assert tv.mean() < 0.05 and tv.max() < 0.1, tv


def gen(prompt: str, *args: str, chat: bool = True) -> dict:
    extra = ["--chat"] if chat else []
    r = run_specdec("generate", "-m", MODEL, "--json", "-t", "2", "-p", prompt, "-n", "48", *extra, *args)
    return json.loads(r.stdout)


HELD_OUT = [
    ("Write a short poem about the sea.", True),
    ("def merge_sorted(a, b):\n    \"\"\"Merge two sorted lists into one sorted list.\"\"\"\n", False),
]


def test_pipeline_trains_a_head_better_than_random(tmp_path, dims):
    """The tiny pipeline end to end, and its head in the engine.

    30k rows of training (five epochs of ~6k tokens, ~1.5 minutes here; the
    row count, not the clock, ends it, so a slower or busier machine trains
    the same head) on ~2.6k response tokens cannot make a head
    that drafts well on new text (a real run does that: docs), but it can
    learn its own training responses, and that is what shows every link of the
    chain in place: features and tokens aligned as the engine drafts (feature
    of position t with token t + 1 predicts t + 2), the draft vocabulary's
    d2t/t2d, the export and the loader. So the check is acceptance on prompts
    the head was trained on (their greedy responses are the training
    responses), one draft token per round: ~0.4 here, and a head of the same
    shape with random weights (or one trained one position off) is near 0.
    Lossless decoding is checked on those and on held-out prompts.
    """
    out = tmp_path / "run"
    env = {**os.environ, "N_CHAT": "16", "N_CODE": "16", "MAX_NEW": "96", "DRAFT_VOCAB": "4096", "N_FF": "768",
           "TTT": "3", "LR": "1e-3", "BATCH_TOKENS": "1024", "MAX_TOKENS": "30000", "MINUTES": "5",
           "TRAIN_ARGS": "--val-every 10 --warmup 5"}
    r = subprocess.run([str(REPO_ROOT / "tools/eagle3_pipeline.sh"), MODEL, str(out)], env=env, cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    man = json.loads((out / "data/manifest.json").read_text())
    assert len(man["sequences"]) == 32 and not any("HumanEval" in s["id"] for s in man["sequences"])
    curve = json.loads((out / "train/curve.json").read_text())
    assert len(curve) >= 2 and curve[-1]["val_loss"][0] < curve[0]["val_loss"][0]
    cfg = json.loads((out / "head/config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["draft_vocab_size"] == 4096
    rand = tmp_path / "random_head"
    write_head(rand, dims, seed=5, draft_vocab=4096, n_ff=768)
    responses = [json.loads(line) for line in (out / "data/responses.jsonl").read_text().splitlines()]
    val_ids = {s["id"] for s in man["sequences"][:1]}  # eagle3_train.py's validation split: never trained on
    trained_on = [(x["prompt"], x["chat"]) for x in responses if x["id"] not in val_ids][:4]
    acc = {"trained": [0, 0], "random": [0, 0], "held-out": [0, 0]}
    for prompt, chat in trained_on + HELD_OUT:
        ar = gen(prompt, "--method", "ar", chat=chat)
        for name, h in (("trained", out / "head"), ("random", rand)):
            e = gen(prompt, "--method", "chain", "--draft-k", "1", "--eagle3", str(h), chat=chat)
            assert e["tokens"] == ar["tokens"], name
            key = name if (prompt, chat) in trained_on or name == "random" else "held-out"
            acc[key][0] += e["accepted"]
            acc[key][1] += e["drafted"]
        t = gen(prompt, "--method", "tree", "--tree-topk", "2", "--tree-depth", "3", "--tree-budget", "6",
                "--eagle3", str(out / "head"), chat=chat)
        assert t["tokens"] == ar["tokens"]
    rate = {k: a / max(d, 1) for k, (a, d) in acc.items()}
    print("acceptance, one draft token per round:", rate)
    assert rate["trained"] >= 0.2 and rate["trained"] > rate["random"] + 0.15, rate

    # The same head in `specdec bench` (--eagle3, methods eagle3, eagle3-chain
    # and eagle3-auto), on trained-on chat prompts: lossless, and acceptance at
    # each draft position in its summary.
    chats = [x for x in responses if x["id"] not in val_ids and x["chat"]][:3]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": x["id"], "set": "trained", "turns": [x["prompt"]]}) + "\n"
                               for x in chats))
    bench = tmp_path / "bench"
    run_specdec("bench", "-m", MODEL, "--prompts", str(prompts), "--chat", "-n", "32", "-t", "2", "--quiet",
                "--method", "ar,eagle3,eagle3-chain,eagle3-auto", "--eagle3", str(out / "head"), "--draft-k", "1",
                "--tree-budget", "6", "--tree-depth", "3", "--tree-topk", "2", "-o", str(bench))
    summary = {s["method"]: s for s in json.loads((bench / "bench.json").read_text())["summary"]}
    for m in ("eagle3", "eagle3-chain", "eagle3-auto"):
        assert summary[m]["greedy_matches_ar"] == summary[m]["greedy_compared"] == len(chats), summary[m]
    assert summary["eagle3-chain"]["acceptance_by_position"][0] >= 0.2, summary["eagle3-chain"]
    assert "### Acceptance by draft position" in (bench / "bench.md").read_text()


def test_text_source_reads_answers_as_they_are_and_trains_beside_regenerated_data(tmp_path):
    """eagle3_data.py --source text: no generation; each sequence is the
    prompt as `generate` tokenizes it, then the data's own answer (ShareGPT's
    first reply, the standard library's code) tokenized as plain text by
    llama.cpp's tokenizer too (llama-cpp-python, no BOS, no special tokens),
    cut at --max-new; never a conversation the bench can use. Then one
    training run reads a regenerated and a text directory together and
    reports validation acceptance per source."""
    import llama_cpp

    import prompts as prompt_sets

    text_dir, regen_dir = tmp_path / "text", tmp_path / "regen"
    py = str(REPO_ROOT / ".venv/bin/python")
    r = subprocess.run([py, "tools/eagle3_data.py", "--model", MODEL, "--out", str(text_dir), "--source", "text",
                        "--n-chat", "5", "--n-code", "5", "--max-new", "40", "--max-prompt-chars", "800",
                        "--exclude-first", "200", "--threads", "2"], cwd=REPO_ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (text_dir / "responses.jsonl").read_text().strip()  # nothing was generated
    man = json.loads((text_dir / "manifest.json").read_text())
    assert len(man["sequences"]) == 10 and all(s["source"] == "text" for s in man["sequences"])
    bench_ids = {f"sharegpt:{c['id']}:text" for c in prompt_sets.load_set("sharegpt", limit=200)}
    assert not bench_ids & {s["id"] for s in man["sequences"]}
    tokens = np.fromfile(text_dir / "tokens.i32", dtype=np.int32)
    llm = llama_cpp.Llama(model_path=str(model_path(MODEL)), vocab_only=True, verbose=False)
    sys_path = str(REPO_ROOT / "tools")
    code = ("import sys, json, random; sys.path.insert(0, %r); import eagle3_data as d; rng = random.Random(0); "
            "p = d.chat_prompts(5, 200, rng, 800, with_reply=True) + d.code_prompts(5, rng, 800, with_text=True); "
            "print(json.dumps(p))" % sys_path)
    answers = {p["id"]: p for p in json.loads(subprocess.run([py, "-c", code], cwd=REPO_ROOT, capture_output=True,
                                                             text=True, timeout=300, check=True).stdout)}
    kinds = set()
    for s in man["sequences"]:
        p = answers[s["id"]]
        seq = tokens[s["offset"]:s["offset"] + s["n_tokens"]].tolist()
        want = llm.tokenize(p["text"].encode(), add_bos=False, special=False)[:40]
        assert seq[s["n_prompt"]:] == want, s["id"]
        gen = json.loads(run_specdec("generate", "-m", MODEL, "--json", "-n", "1", "--temp", "0",
                                     *(["--chat"] if p["chat"] else []), "-p", p["prompt"]).stdout)
        assert s["n_prompt"] == gen["n_prompt"], s["id"]
        kinds.add((s["id"].split(":")[0], p["chat"]))
    assert ("sharegpt", True) in kinds and any(k[0] == "stdlib" for k in kinds)

    r = subprocess.run([py, "tools/eagle3_data.py", "--model", MODEL, "--out", str(regen_dir), "--n-chat", "4",
                        "--n-code", "4", "--max-new", "24", "--threads", "2"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    if not TRAIN_PY.exists():
        pytest.fail(f"{TRAIN_PY} is missing; scripts/setup.sh test makes it", pytrace=False)
    train = tmp_path / "train"
    r = subprocess.run([str(TRAIN_PY), "tools/eagle3_train.py", "--data", str(regen_dir), str(text_dir), "--out",
                        str(train), "--draft-vocab", "1024", "--n-ff", "256", "--max-tokens", "1500",
                        "--batch-tokens", "512", "--val-frac", "0.5", "--threads", "2"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "9 train / 9 val sequences" in r.stdout, r.stdout[-2000:]
    curve = json.loads((train / "curve.json").read_text())
    assert set(curve[-1]["val_acc_by_source"]) == {"regen", "text"}, curve[-1]

    # Continued on more data: the head starts where that run ended, and with
    # --init-seen-dirs 1 the directory it saw whole goes to training only.
    more = [str(TRAIN_PY), "tools/eagle3_train.py", "--data", str(regen_dir), str(text_dir), "--out",
            str(tmp_path / "more"), "--max-tokens", "600", "--batch-tokens", "512", "--val-frac", "0.5",
            "--threads", "2", "--init-from", str(train / "checkpoint.pt")]
    r = subprocess.run(more + ["--init-seen-dirs", "1"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "rows trained)" in r.stdout and "13 train / 5 val sequences" in r.stdout, r.stdout[-2000:]
    r = subprocess.run(more + ["--init-seen-dirs", "2"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "must leave at least one" in r.stderr, r.stderr[-2000:]


def test_more_data_from_other_code_roots_leaves_out_what_a_directory_holds(tmp_path):
    """--code-root reads every folder below a root (ids name the file's path
    under it); --exclude-seen leaves out the ShareGPT conversations and the
    functions another data directory already holds, however they were asked
    (raw or in chat), so a second directory adds only new data."""
    src = tmp_path / "src"
    for k, rel in enumerate(["top.py", "pkg/mid.py", "pkg/sub/low.py"]):
        f = src / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(f"""\
            def step_{k}(x, y):
                \"\"\"Add, then scale.\"\"\"
                total = x + y
                total *= {k + 2}
                if total > 100:
                    total -= 100
                return total
            """))
    py = str(REPO_ROOT / ".venv/bin/python")

    def run(out, *extra):
        r = subprocess.run([py, "tools/eagle3_data.py", "--model", MODEL, "--out", str(out), "--source", "text",
                            "--n-chat", "3", "--n-code", "2", "--max-new", "16", "--max-prompt-chars", "600",
                            "--exclude-first", "200", "--code-root", f"mine={src}", "--threads", "2", *extra],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        return [s["id"] for s in json.loads((out / "manifest.json").read_text())["sequences"]]

    first = run(tmp_path / "a")
    second = run(tmp_path / "b", "--exclude-seen", str(tmp_path / "a"))
    key = lambda i: i.split(":")[1] if i.startswith("sharegpt:") else ":".join(i.split(":")[1:3])  # noqa: E731
    code_a = {key(i) for i in first if i.startswith("mine:")}
    code_b = {key(i) for i in second if i.startswith("mine:")}
    chat_a = {key(i) for i in first if i.startswith("sharegpt:")}
    chat_b = {key(i) for i in second if i.startswith("sharegpt:")}
    assert len(code_a) == 2 and len(chat_a) == 3, first
    # Only one function is left for the second directory; three new conversations.
    assert len(code_b) == 1 and not code_a & code_b and len(chat_b) == 3 and not chat_a & chat_b, second
    assert code_a | code_b == {"top.py:step_0", "pkg/mid.py:step_1", "pkg/sub/low.py:step_2"}

    r = subprocess.run([py, "tools/eagle3_data.py", "--model", MODEL, "--out", str(tmp_path / "c"),
                        "--code-root", f"mine={tmp_path / 'nowhere'}"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "expected LABEL=DIR with an existing DIR" in r.stderr, r.stderr
