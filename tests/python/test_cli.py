"""specdec generate as a user runs it: JSON fields, chat, sampling
reproducibility, stop strings, and bad input that must give a clear error and
a non-zero exit (never a crash or a hang)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, model_path

SPECDEC_BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))
MODEL = "smollm2-135m-instruct-q4_1"


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([str(SPECDEC_BIN), *args], capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def gen_json(*args: str) -> dict:
    return json.loads(run("generate", "-m", str(model_path(MODEL)), "--json", "-t", "2", *args).stdout)


def test_json_fields_and_default_model():
    out = gen_json("-p", "Hello", "-n", "8")
    for key in ("text", "tokens", "n_prompt", "n_generated", "prefill_s", "decode_s", "decode_tok_s", "method"):
        assert key in out, key
    # Greedy: auto by default (the cost model picks each round's shape).
    assert out["method"] == "auto" and out["n_generated"] == len(out["tokens"]) <= 8
    # No -m: the manifest's default model (the same SmolLM2 here).
    default = json.loads(run("generate", "-p", "Hello", "-n", "8", "--json", "-t", "2").stdout)
    assert default["tokens"] == out["tokens"]
    # Sampling: AR by default, so that a seed reproduces the text.
    assert gen_json("-p", "Hello", "-n", "4", "--temp", "0.7")["method"] == "ar"


def test_auto_is_ar_token_for_token_and_caches_its_costs(tmp_path):
    """Greedy auto emits AR's tokens; its cost curves are calibrated by the
    first process and read from the cache file by the next; a corrupt cache
    file means calibrating again, not an error."""
    env = dict(os.environ, SPECDEC_CACHE_DIR=str(tmp_path))
    # Code with repeated identifiers: prompt lookup finds matches to choose from.
    prompt = "def add(a, b):\n    return a + b\n\ndef add3(a, b, c):\n    return add(add(a, b), c)\n\ndef add4("

    def gen(*extra):
        r = subprocess.run([str(SPECDEC_BIN), "generate", "-m", str(model_path(MODEL)), "--json", "-t", "2",
                            "-p", prompt, "-n", "48", "--ignore-eos", *extra],
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    ar = gen("--method", "ar")
    first = gen("--method", "auto")
    assert first["tokens"] == ar["tokens"]
    a = first["auto"]
    assert a["costs_from"] == "calibrated" and a["calibration_s"] > 0
    assert a["rounds_none"] + a["rounds_lookup"] + a["rounds_draft"] == first["rounds"]
    assert a["rounds_draft"] == 0  # no draft model given
    assert a["predicted_s"] > 0 and a["measured_s"] > 0
    cache = json.loads((tmp_path / "row-costs.json").read_text())
    assert any(MODEL in k for k in cache)
    second = gen()
    assert second["method"] == "auto" and second["tokens"] == ar["tokens"]
    assert second["auto"]["costs_from"] == "file" and second["auto"]["calibration_s"] == 0
    # Traces carry the cost model's prediction of every round next to its measured times.
    trace = tmp_path / "auto.jsonl"
    traced = gen("--trace", str(trace))
    rounds = [json.loads(line) for line in trace.read_text().splitlines() if '"round"' in line]
    rounds = [r for r in rounds if r.get("type") == "round"]
    assert len(rounds) == traced["rounds"] and all(r["t_predicted_s"] > 0 for r in rounds)
    (tmp_path / "row-costs.json").write_text("{not json")
    third = gen()
    assert third["auto"]["costs_from"] == "calibrated" and third["tokens"] == ar["tokens"]


def test_mmap_and_the_huge_page_copy_give_the_same_tokens():
    # The default holds the weights in a huge-page copy; --mmap uses the file
    # mapping. Only where the bytes live differs, never a token.
    args = ("-p", "def fib(n):", "-n", "24", "--method", "ar")
    assert gen_json(*args, "--mmap")["tokens"] == gen_json(*args)["tokens"]
    bad = run("generate", "--mmap", "-m", "/nonexistent/model.gguf", "-p", "x", check=False)
    assert bad.returncode == 1 and "cannot open" in bad.stderr


def test_chat_template_answers():
    out = gen_json("--chat", "-p", "What is the capital of France? Answer in one word.", "-n", "16")
    assert out["n_prompt"] > 20  # system prompt and turn markers were added
    assert "Paris" in out["text"]


def test_chat_template_file_overrides_the_models(tmp_path):
    """--chat-template FILE renders the prompt with that template instead of the
    GGUF's: a template that writes plain text gives exactly the plain prompt's
    tokens; one the interpreter cannot parse is refused, naming its line."""
    tmpl = tmp_path / "plain.jinja"
    tmpl.write_text("{% for m in messages %}Question: {{ m['content'] | trim }}\n{% endfor %}"
                    "{% if add_generation_prompt %}Answer:{% endif %}\n")
    chat = gen_json("--chat", "--chat-template", str(tmpl), "-p", "  What is 2+2? ", "-n", "8")
    plain = gen_json("-p", "Question: What is 2+2?\nAnswer:", "-n", "8")
    assert chat["n_prompt"] == plain["n_prompt"] and chat["tokens"] == plain["tokens"]
    bad = tmp_path / "bad.jinja"
    bad.write_text("line one\n{% include 'other.jinja' %}\n")
    r = run("generate", "-m", str(model_path(MODEL)), "--chat", "--chat-template", str(bad), "-p", "Hi", check=False)
    assert r.returncode != 0 and "line 2" in r.stderr and "include" in r.stderr, r.stderr


def test_seeded_sampling_is_reproducible():
    a = gen_json("-p", "Once upon a time", "-n", "24", "--temp", "0.9", "--seed", "7", "--ignore-eos")
    b = gen_json("-p", "Once upon a time", "-n", "24", "--temp", "0.9", "--seed", "7", "--ignore-eos")
    c = gen_json("-p", "Once upon a time", "-n", "24", "--temp", "0.9", "--seed", "8", "--ignore-eos")
    assert a["tokens"] == b["tokens"]
    assert a["tokens"] != c["tokens"]


def test_stop_string_cuts_the_text():
    full = gen_json("-p", "The capital of France is", "-n", "40")
    assert "\n" in full["text"]
    cut = gen_json("-p", "The capital of France is", "-n", "40", "--stop", "\n")
    assert cut["finish_reason"] == "stop"
    assert cut["text"] == full["text"][: full["text"].index("\n")]


def test_streaming_text_equals_json_text():
    plain = run("generate", "-m", str(model_path(MODEL)), "-p", "The capital of France is", "-n", "30", "-t", "2")
    js = gen_json("-p", "The capital of France is", "-n", "30")
    assert plain.stdout.rstrip("\n") == js["text"].rstrip("\n")


@pytest.mark.parametrize("args, needle", [
    (["generate", "-m", "/nonexistent/model.gguf", "-p", "hi"], "/nonexistent/model.gguf"),
    (["generate", "-m", "no-such-model", "-p", "hi"], "unknown model"),
    (["generate", "--no-such-option"], "no-such-option"),
    (["generate", "-p", "hi", "--temp", "-1"], "temp"),
    (["frobnicate"], "unknown command"),
])
def test_bad_input_is_a_clear_error(args, needle):
    r = run(*args, check=False)
    assert r.returncode != 0
    assert needle in (r.stderr + r.stdout)
    assert "internal error" not in r.stderr and r.returncode < 128  # no crash


def test_corrupt_and_truncated_model_files(tmp_path):
    src = model_path(MODEL).read_bytes()[: 1 << 20]
    trunc = tmp_path / "truncated.gguf"
    trunc.write_bytes(src)
    r = run("generate", "-m", str(trunc), "-p", "hi", check=False)
    assert r.returncode == 1 and "truncated.gguf" in r.stderr and "truncated" in r.stderr
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all" * 100)
    r = run("generate", "-m", str(junk), "-p", "hi", check=False)
    assert r.returncode == 1 and "not a GGUF file" in r.stderr


def test_prompt_longer_than_context_is_an_error():
    r = run("generate", "-m", str(model_path(MODEL)), "-p", "word " * 200, "--ctx", "64", check=False)
    assert r.returncode == 1 and "context" in r.stderr


def test_generation_stops_at_the_context_limit():
    out = gen_json("-p", "Count: 1 2 3", "-n", "500", "--ctx", "32", "--ignore-eos")
    assert out["finish_reason"] == "length"
    assert out["n_prompt"] + out["n_generated"] <= 33


# Draft/target pairs: a draft whose token ids mean other texts is refused
# before anything runs (runtime/draft_vocab.h), whichever command loads it.
QWEN_DRAFT = "qwen2.5-coder-0.5b-instruct-q4_k_m"
QWEN_TARGET = "qwen2.5-coder-1.5b-instruct-q4_k_m"


@pytest.mark.parametrize("target, draft, needle", [
    # SmolLM2's 49152 tokens against Qwen's 151936: different texts from id 0.
    (MODEL, QWEN_DRAFT, "their vocabularies differ at token id 0"),
    (QWEN_DRAFT, MODEL, "has 49152 tokens, fewer than the target's 151936"),
])
def test_mismatched_draft_is_refused(target, draft, needle, tmp_path):
    t, d = str(model_path(target)), str(model_path(draft))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "a", "set": "x", "turns": ["hi"]}\n')
    for cmd in (["generate", "-m", t, "-d", d, "--method", "chain", "-p", "hi", "-n", "4"],
                ["generate", "-m", t, "-d", d, "--method", "ssd", "-p", "hi", "-n", "4"],
                ["serve", "-m", t, "-d", d, "--method", "chain", "--port", "0"],
                ["bench", "-m", t, "-d", d, "--method", "chain", "-n", "4", "--prompts", str(prompts),
                 "-o", str(tmp_path / "bench")]):
        r = run(*cmd, check=False)
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        assert f"draft model '{d}' cannot draft for target model '{t}'" in r.stderr, r.stderr
        assert needle in r.stderr, r.stderr


def test_matching_draft_is_accepted():
    # The packaged pair shares one vocabulary (151936 ids, same texts).
    out = json.loads(run("generate", "-m", str(model_path(QWEN_TARGET)), "-d", str(model_path(QWEN_DRAFT)),
                         "--method", "chain", "-p", "def add(a, b):", "-n", "8", "--json", "-t", "2").stdout)
    assert out["method"] == "chain" and out["n_generated"] == 8


def inspect_json(target: str) -> dict:
    return json.loads(run("models", "inspect", target, "--json").stdout)


def test_models_inspect_packaged_model_matches_llama_cpp():
    """A packaged model by name: what it is, against llama.cpp's own reading of
    the file, and that specdec can run it."""
    import llama_cpp

    path = model_path(QWEN_DRAFT)
    r = inspect_json(QWEN_DRAFT)
    assert r["file"] == str(path) or Path(r["file"]).resolve() == path.resolve()
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, verbose=False)
    m = llm.model
    assert r["parameters"] == llama_cpp.llama_model_n_params(m)
    h = r["hyperparameters"]
    assert h["block_count"] == llama_cpp.llama_model_n_layer(m)
    assert h["embedding_length"] == llama_cpp.llama_model_n_embd(m)
    assert h["attention.head_count"] == llama_cpp.llama_model_n_head(m)
    assert h["context_length"] == llama_cpp.llama_model_n_ctx_train(m)
    assert r["tokenizer"]["n_tokens"] == llm.n_vocab()
    assert r["architecture"] == llm.metadata["general.architecture"] == "qwen2"
    assert r["tokenizer"]["model"] == "gpt2" and r["tokenizer"]["pre"] == "qwen2"
    del llm
    types = {t["type"]: t for t in r["tensor_types"]}
    assert {"Q4_K", "Q6_K", "F32"} <= set(types)
    assert sum(t["tensors"] for t in types.values()) == r["n_tensors"]
    assert sum(t["bytes"] for t in types.values()) < r["file_bytes"]
    assert r["chat_template"]["present"] and r["chat_template"]["parses"]
    assert r["runnable"] and r["problems"] == []
    text = run("models", "inspect", str(path)).stdout
    for needle in ("architecture  qwen2", "tokenizer     gpt2, pre-tokenizer qwen2, 151936 tokens",
                   "chat template yes (", "runs          yes"):
        assert needle in text, text


def test_models_inspect_random_weight_files(tmp_path):
    """Files written with the gguf package: one specdec runs, and ones it cannot
    with the loader's reason (architecture, tensor type, pre-tokenizer)."""
    from test_arch_random import ARCHS, write_model
    import dataclasses

    ok = tmp_path / "qwen3.gguf"
    write_model(ok, ARCHS["qwen3"], "Q4_K_M")
    r = inspect_json(str(ok))
    assert r["architecture"] == "qwen3" and r["runnable"], r["problems"]
    assert r["hyperparameters"]["attention.key_length"] == 128
    assert {t["type"] for t in r["tensor_types"]} == {"Q4_K", "Q6_K", "F32"}
    assert not r["chat_template"]["present"]

    other = tmp_path / "starcoder2.gguf"
    write_model(other, dataclasses.replace(ARCHS["qwen3"], arch="starcoder2"))
    r = inspect_json(str(other))
    assert not r["runnable"]
    assert any("architecture 'starcoder2' is not supported" in p for p in r["problems"]), r["problems"]
    text = run("models", "inspect", str(other)).stdout
    assert "runs          no" in text and "architecture 'starcoder2' is not supported" in text

    iq = tmp_path / "iq3_s.gguf"
    write_model(iq, ARCHS["qwen3"], "IQ3_S")
    r = inspect_json(str(iq))
    assert not r["runnable"] and {t["type"] for t in r["tensor_types"]} == {"IQ3_S", "F32"}
    assert any("has type IQ3_S which has no matmul kernel" in p for p in r["problems"]), r["problems"]

    tekken = tmp_path / "tekken.gguf"
    write_model(tekken, dataclasses.replace(ARCHS["qwen3"], pre="tekken"))
    r = inspect_json(str(tekken))
    assert not r["runnable"] and r["tokenizer"]["pre"] == "tekken"
    assert any("unsupported pre-tokenizer 'tekken'" in p for p in r["problems"]), r["problems"]


def test_models_inspect_missing_and_corrupt_files(tmp_path):
    for target, needle in [(str(tmp_path / "absent.gguf"), "absent.gguf"), ("no-such-model", "unknown model")]:
        r = run("models", "inspect", target, check=False)
        assert r.returncode == 1 and needle in r.stderr, r.stderr
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all" * 100)
    r = run("models", "inspect", str(junk), check=False)
    assert r.returncode == 1 and "not a GGUF file" in r.stderr, r.stderr
    trunc = tmp_path / "truncated.gguf"
    trunc.write_bytes(model_path(MODEL).read_bytes()[: 1 << 20])
    r = run("models", "inspect", str(trunc), "--json", check=False)
    assert r.returncode == 1 and "truncated" in r.stderr and r.stdout == "", r.stderr


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_kernel_choice_is_measured_once_then_read_from_its_cache(tmp_path):
    """The per-type kernel calibration (kernels/kernel_choice_cache.h) runs
    only where the CPU has two SIMD levels (AVX2 and AVX-512 here); its result
    goes to kernel-choice.json, the next process reads it without rewriting it,
    a corrupt file is measured and rewritten, and SPECDEC_KERNEL_CACHE=off or
    a forced SPECDEC_ISA leaves no file."""
    flags = _cpu_flags()
    two_levels = {"avx2", "fma", "f16c"} <= flags and {
        "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"} <= flags

    def gen(cache_dir: Path, **env_extra: str) -> list[int]:
        env = {k: v for k, v in os.environ.items() if k not in ("SPECDEC_ISA", "SPECDEC_KERNEL_CACHE")}
        env.update(SPECDEC_CACHE_DIR=str(cache_dir), **env_extra)
        r = subprocess.run([str(SPECDEC_BIN), "generate", "-m", str(model_path(MODEL)), "--json", "-t", "2",
                            "--method", "ar", "-p", "Hello", "-n", "4"],
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["tokens"]

    d = tmp_path / "default"
    tokens = gen(d)
    f = d / "kernel-choice.json"
    assert f.exists() == two_levels
    if two_levels:
        data = json.loads(f.read_text())
        (entry,) = data["entries"].values()
        assert entry["key"]["max_isa"] == "avx512" and entry["key"]["build"]
        assert entry["types"]
        for t in entry["types"].values():
            assert len(t["isa"]) == 6 and set(t["isa"]) <= set(t["levels"]) == {"avx2", "avx512"}
            assert all(len(ns) == 6 and min(ns) > 0 for ns in t["ns_per_row"])
        written = f.read_bytes()
        assert gen(d) == tokens
        assert f.read_bytes() == written  # a hit reads, never rewrites
        f.write_text('{"format": 1, "entries": {')
        assert gen(d) == tokens
        assert json.loads(f.read_text())["entries"].keys() == data["entries"].keys()
        moved = tmp_path / "elsewhere" / "choice.json"
        assert gen(tmp_path / "moved", SPECDEC_KERNEL_CACHE=str(moved)) == tokens
        assert moved.exists() and not (tmp_path / "moved" / "kernel-choice.json").exists()
    assert gen(tmp_path / "off", SPECDEC_KERNEL_CACHE="off") == tokens
    assert not (tmp_path / "off" / "kernel-choice.json").exists()
    # (A forced level also changes the float types' kernels, so its tokens may differ.)
    gen(tmp_path / "forced", SPECDEC_ISA="avx2")
    assert not (tmp_path / "forced" / "kernel-choice.json").exists()
