"""The Python package as a user gets it: a wheel built by `pip wheel .`
(scikit-build-core), installed into a fresh virtual environment, and checked
against the CLI: greedy text equal to `specdec generate --temp 0` for every
method, streamed pieces that concatenate to the text, llama-cpp-python's dict
shape for create_chat_completion, and clear exceptions for bad input.

The wheel is built once per session (build tree kept in build/python, so a
rebuild compiles only what changed); the engine code runs in the fresh venv
through a few scripts, each loading the model once."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import MODELS_DIR, REPO_ROOT, model_path

SPECDEC_BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))
MODEL = "smollm2-135m-instruct-q4_1"
METHODS = ["ar", "chain", "tree", "ngram", "auto"]
PROMPT = "def add(a, b):\n    return a + b\n\ndef add3(a, b, c):\n    return add(add(a, b), c)\n\ndef add4("
N = 24


def _has_build_deps() -> bool:
    try:
        import pybind11  # noqa: F401
        import scikit_build_core  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with the wheel built from this checkout installed; returns its python."""
    tmp = tmp_path_factory.mktemp("pywheel")
    wheels = tmp / "wheels"
    cmd = [sys.executable, "-m", "pip", "wheel", str(REPO_ROOT), "-w", str(wheels), "--no-deps",
           # The project's builds treat warnings as errors; so does this one.
           "--config-settings=cmake.define.SPECDEC_WERROR=ON"]
    if _has_build_deps():  # offline-friendly: no isolated env to download
        cmd.append("--no-build-isolation")
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2"))
    if shutil.which("ccache"):
        # As scripts/build.sh does: the engine's objects then come from the
        # release build's cache (same flags, paths relative to the checkout).
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CMAKE_C_COMPILER_LAUNCHER", "ccache")
        env.setdefault("CCACHE_BASEDIR", str(REPO_ROOT))
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    print(f"wheel built in {time.monotonic() - t0:.0f} s")
    (wheel,) = wheels.glob("specdec-*.whl")
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    py = env_dir / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return py


def run_py(py: Path, body: str, timeout: int = 300) -> dict:
    """Runs `body` in the fresh venv (outside the source tree); it prints one JSON line last."""
    script = "import json, specdec\nMODEL = " + repr(str(model_path(MODEL))) + "\n" + textwrap.dedent(body)
    # Model names resolve through the manifest, as the CLI's do ($SPECDEC_MODELS_DIR).
    env = dict(os.environ, SPECDEC_MODELS_DIR=str(MODELS_DIR))
    r = subprocess.run([str(py), "-c", script], capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=py.parent.parent)  # the venv's folder: outside the source tree
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def cli_json(*args: str) -> dict:
    if not SPECDEC_BIN.exists():
        pytest.fail(f"{SPECDEC_BIN} is missing: build it with scripts/build.sh release", pytrace=False)
    r = subprocess.run([str(SPECDEC_BIN), "generate", "-m", str(model_path(MODEL)), "--json", "-t", "2", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def py_runs(venv) -> dict:
    """Every method greedy, plain and streamed, from one engine (the model drafts for itself)."""
    return run_py(venv, f"""
        e = specdec.Engine(MODEL, draft=MODEL, threads=2)
        out = {{"module": specdec._core.__file__}}
        for m in {METHODS!r}:
            g = e.generate({PROMPT!r}, method=m, max_tokens={N}, temperature=0)
            s = e.generate({PROMPT!r}, method=m, max_tokens={N}, temperature=0, stream=True)
            pieces = list(s)
            out[m] = {{"text": g.text, "tokens": g.tokens, "finish": g.finish_reason, "stats": g.stats,
                      "pieces": pieces, "stream_stats": s.stats}}
        print(json.dumps(out))
    """)


def test_wheel_installs_into_a_fresh_venv(venv, py_runs):
    # The module imported is the installed one, not something from the source tree.
    assert Path(py_runs["module"]).resolve().is_relative_to(venv.parent.parent.resolve())


@pytest.mark.parametrize("method", METHODS)
def test_greedy_text_equals_the_cli(py_runs, method):
    extra = ["-d", str(model_path(MODEL))] if method in ("chain", "tree") else []
    cli = cli_json("-p", PROMPT, "-n", str(N), "--temp", "0", "--method", method, *extra)
    got = py_runs[method]
    assert got["tokens"] == cli["tokens"]
    assert got["text"] == cli["text"]
    assert got["finish"] == cli["finish_reason"]
    st = got["stats"]
    assert st["method"] == method and st["n_generated"] == len(got["tokens"])
    for k in ("rounds", "mean_accept_len", "prefill_s", "decode_s"):
        assert k in st
    if method != "ar":
        for k in ("drafted", "accepted", "draft_s", "verify_s"):
            assert k in st
    if method in ("chain", "tree"):
        assert st["drafted"] > 0 and st["mean_accept_len"] > 1.0


@pytest.mark.parametrize("method", METHODS)
def test_streamed_pieces_concatenate_to_the_text(py_runs, method):
    got = py_runs[method]
    assert "".join(got["pieces"]) == got["text"]
    assert len(got["pieces"]) > 1
    assert got["stream_stats"]["n_generated"] == got["stats"]["n_generated"]


def _keys(d, prefix=""):
    """Key paths of a response dict (into choices[0] and nested dicts)."""
    out = set()
    for k, v in d.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, prefix + k + ".")
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            out |= _keys(v[0], prefix + k + "[0].")
    return out


def test_openai_dicts_have_llama_cpp_python_shape(venv):
    msgs = [{"role": "user", "content": "Name a fruit."}]
    ours = run_py(venv, f"""
        e = specdec.Engine(MODEL, threads=2)
        chat = e.create_chat_completion({msgs!r}, max_tokens=12, temperature=0)
        chunks = list(e.create_chat_completion({msgs!r}, max_tokens=12, temperature=0, stream=True))
        comp = e.create_completion("The capital of France is", max_tokens=8, temperature=0)
        comp_chunks = list(e.create_completion("The capital of France is", max_tokens=8, temperature=0,
                                               stream=True))
        print(json.dumps({{"chat": chat, "chunks": chunks, "comp": comp, "comp_chunks": comp_chunks}}))
    """)
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(model_path(MODEL)), n_ctx=512, n_threads=2, verbose=False)
    ref = llm.create_chat_completion(msgs, max_tokens=12, temperature=0)
    ref_chunks = list(llm.create_chat_completion(msgs, max_tokens=12, temperature=0, stream=True))
    ref_comp = llm.create_completion("The capital of France is", max_tokens=8, temperature=0)

    # Every field llama-cpp-python returns is there (specdec adds "specdec").
    assert _keys(ref) <= _keys(ours["chat"]), _keys(ref) - _keys(ours["chat"])
    assert _keys(ref_comp) <= _keys(ours["comp"]), _keys(ref_comp) - _keys(ours["comp"])
    assert ours["chat"]["object"] == ref["object"] == "chat.completion"
    assert ours["comp"]["object"] == ref_comp["object"] == "text_completion"
    for r in (ours["chat"], ours["comp"]):
        st = r["specdec"]
        assert {"method", "rounds", "mean_accept_len"} <= set(st)
        assert r["usage"]["completion_tokens"] == st["n_generated"]
    # Chunks: the same fields per chunk; the last one carries finish_reason and the stats.
    for c in ref_chunks:
        assert {"id", "object", "created", "model", "choices"} <= set(c)
    for c in ours["chunks"]:
        assert {"id", "object", "created", "model", "choices"} <= set(c)
        assert c["object"] == ref_chunks[0]["object"] == "chat.completion.chunk"
        assert set(c["choices"][0]) >= {"index", "delta", "finish_reason"}
    assert ours["chunks"][0]["choices"][0]["delta"]["role"] == "assistant"
    assert ours["chunks"][-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert "specdec" in ours["chunks"][-1]
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in ours["chunks"])
    assert streamed == ours["chat"]["choices"][0]["message"]["content"]
    comp_streamed = "".join(c["choices"][0]["text"] for c in ours["comp_chunks"])
    assert comp_streamed == ours["comp"]["choices"][0]["text"]
    # The chat template is the CLI's: greedy chat text equals `specdec generate --chat`.
    cli = cli_json("-p", msgs[0]["content"], "--chat", "-n", "12", "--temp", "0")
    assert ours["chat"]["choices"][0]["message"]["content"] == cli["text"]


def test_bad_input_raises_clear_exceptions(venv):
    out = run_py(venv, """
        def err(f):
            try:
                f()
            except Exception as ex:
                return [type(ex).__name__, str(ex), isinstance(ex, specdec.SpecdecError)]
            return None
        e = specdec.Engine(MODEL, threads=2, ctx=64)
        print(json.dumps({
            "missing_file": err(lambda: specdec.Engine("/nonexistent/model.gguf")),
            "unknown_model": err(lambda: specdec.Engine("no-such-model")),
            "unknown_method": err(lambda: e.generate("hi", method="bogus")),
            "chain_no_draft": err(lambda: e.generate("hi", method="chain")),
            "too_long": err(lambda: e.generate("word " * 200)),
            "bad_temp": err(lambda: e.generate("hi", temperature=-1)),
            "bad_messages": err(lambda: e.create_chat_completion([{"role": "user", "content": 5}])),
            "unsupported": err(lambda: e.create_chat_completion([{"role": "user", "content": "hi"}], logprobs=True)),
            "bad_openai_method": err(lambda: e.create_chat_completion([{"role": "user", "content": "hi"}],
                                                                      method="tree")),
            "still_works": e.generate("Hello", max_tokens=3, method="ar").stats["n_generated"],
        }))
    """)
    assert out["missing_file"][2] and "/nonexistent/model.gguf" in out["missing_file"][1]
    assert out["unknown_model"][2] and "unknown model" in out["unknown_model"][1]
    assert out["unknown_method"][2] and "unknown method 'bogus'" in out["unknown_method"][1]
    assert out["chain_no_draft"][2] and "needs a draft model" in out["chain_no_draft"][1]
    assert out["too_long"][2] and "context" in out["too_long"][1]
    assert out["bad_temp"][2] and "temp" in out["bad_temp"][1]
    assert out["bad_messages"][0] == "ValueError" and "content" in out["bad_messages"][1]
    assert out["unsupported"][0] == "ValueError" and "logprobs" in out["unsupported"][1]
    assert out["bad_openai_method"][0] == "ValueError" and "draft model" in out["bad_openai_method"][1]
    assert out["still_works"] == 3


def test_keyboard_interrupt_stops_decoding_and_the_gil_is_released(venv):
    out = run_py(venv, """
        import _thread, signal, threading, time
        # Python's own Ctrl-C handler, as an interactive session has it: a
        # process started in the background by a non-interactive shell (a CI
        # runner's `cmd &`) inherits SIGINT ignored, and interrupt_main() then
        # does nothing (the test decoded all 4000 tokens and failed).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        e = specdec.Engine(MODEL, threads=2)
        ticks = [0]
        stop = threading.Event()
        def tick():  # runs only if decoding releases the GIL
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.005)
        threading.Thread(target=tick, daemon=True).start()
        g = e.generate("Once upon a time", max_tokens=48, method="ar", ignore_eos=True)
        ticks_during = ticks[0]
        stop.set()
        threading.Timer(1.0, _thread.interrupt_main).start()
        t0 = time.monotonic()
        interrupted = False
        try:
            e.generate("Once upon a time", max_tokens=4000, method="ar", ignore_eos=True)
        except KeyboardInterrupt:
            interrupted = True
        waited = time.monotonic() - t0
        # A stream closed early stops too, and the engine takes the next request.
        s = e.generate("Once upon a time", max_tokens=4000, method="ar", ignore_eos=True, stream=True)
        next(s); s.close()
        after = e.generate("Hello", max_tokens=4, method="ar", ignore_eos=True)
        print(json.dumps({"ticks": ticks_during, "decode_s": g.stats["decode_s"], "interrupted": interrupted,
                          "waited": waited, "after": after.stats["n_generated"]}))
    """)
    assert out["interrupted"] and out["waited"] < 30
    assert out["after"] == 4
    # The ticker thread ran while the engine decoded (≈ one tick per 5 ms of decoding).
    assert out["ticks"] >= min(10, out["decode_s"] / 0.005 / 4)
