"""The newer weight types (Q2_K, Q3_K, IQ4_NL, IQ4_XS) end to end, on real files made
by llama.cpp's own quantizer.

llama.cpp's llama_model_quantize (through llama-cpp-python, the same build the
other parity tests run against) requantizes the smallest packaged model,
smollm2-135m-instruct (Q4_1 with Q8_0 embeddings; allow_requantize is set
because no float source is packaged), into each file type in the test's
tmp_path. Its rows of 576 are not a multiple of the K-quants' 256, so
llama.cpp demotes those tensors to Q4_0 and only the 1536-wide ffn_down rows
keep the K-quant type: the test checks that the file really holds tensors of
the type under test before comparing.

Checks against llama-cpp-python on the same file: logits at every prompt
position with test_model_parity.py's tolerances, and a short greedy
continuation that must be token-identical or, as in test_model_parity.py,
part only where llama.cpp's own top-2 margin is a near-tie (llama.cpp runs
the Q4_0 fallback tensors through its repacked kernels, another float order).
"""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, model_path
from test_model_parity import MAX_REL_MEAN_DIFF, MIN_TOP1, NEAR_TIE, logits_vs_llama

sys.path.insert(0, str(REPO_ROOT / "tools" / "reference"))
import llama_ref  # noqa: E402

llama_cpp = pytest.importorskip("llama_cpp")
gguf = pytest.importorskip("gguf")

SPECDEC_BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))
SOURCE = "smollm2-135m-instruct-q4_1"
# name -> (llama_ftype, pure, the ggml type that must appear in the file).
# Q2_K is "pure": llama.cpp's Q2_K mix gives ffn_down Q3_K/Q4_K, which would
# leave no Q2_K tensor in this model.
FTYPES = {
    "Q2_K": (llama_cpp.LLAMA_FTYPE_MOSTLY_Q2_K, True, gguf.GGMLQuantizationType.Q2_K),
    "Q3_K_S": (llama_cpp.LLAMA_FTYPE_MOSTLY_Q3_K_S, False, gguf.GGMLQuantizationType.Q3_K),
    "IQ4_NL": (llama_cpp.LLAMA_FTYPE_MOSTLY_IQ4_NL, False, gguf.GGMLQuantizationType.IQ4_NL),
    # IQ4_XS: the 576-wide rows fall back to IQ4_NL, ffn_down keeps IQ4_XS.
    "IQ4_XS": (llama_cpp.LLAMA_FTYPE_MOSTLY_IQ4_XS, False, gguf.GGMLQuantizationType.IQ4_XS),
}
PROMPTS = [
    "def quicksort(arr):\n    if len(arr) <= 1:\n        return arr\n",
    "The history of the printing press begins in the fifteenth century, when",
]
N_GREEDY = 16


def _specdec(*args: str) -> subprocess.CompletedProcess:
    assert SPECDEC_BIN.exists(), f"{SPECDEC_BIN} missing: build it with scripts/build.sh release"
    return subprocess.run([str(SPECDEC_BIN), *args], capture_output=True, text=True, timeout=300, check=True)


@pytest.fixture(scope="module", params=list(FTYPES), ids=list(FTYPES))
def quantized(request, tmp_path_factory):
    ftype, pure, want = FTYPES[request.param]
    src = model_path(SOURCE)
    out = tmp_path_factory.mktemp("quant") / f"smollm2-135m-{request.param}.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.pure = pure
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(out).encode(), ctypes.byref(params))
    assert rc == 0, f"llama_model_quantize to {request.param} failed ({rc})"
    types = [int(t.tensor_type) for t in gguf.GGUFReader(str(out)).tensors]
    assert types.count(int(want)) > 0, f"{request.param}: no {want.name} tensor in the quantized file"
    llm = llama_ref.load_model(out, n_ctx=256)
    yield request.param, out, llm
    del llm


def test_logits_match_llama_cpp(quantized, tmp_path):
    name, path, llm = quantized
    r = logits_vs_llama(path, llm, PROMPTS, tmp_path / "logits.bin")
    rel, agree = r["rel_mean_abs_diff"], r["top1_agreement"]
    print(f"{name}: {r['positions']} positions, mean|d|/std {rel:.4f}, top-1 {agree:.3f}")
    assert rel <= MAX_REL_MEAN_DIFF, f"{name}: logits drift from llama.cpp: mean|d|/std {rel:.4f}"
    assert agree >= MIN_TOP1, f"{name}: top-1 agreement {agree:.3f} below {MIN_TOP1}"


def test_greedy_matches_llama_cpp(quantized):
    name, path, llm = quantized
    prompt = PROMPTS[0]
    ids = llama_ref.tokenize(llm, prompt)
    ref = llama_ref.greedy(llm, ids, N_GREEDY, stop_at_eos=False)
    ours = json.loads(_specdec("generate", "-m", str(path), "-p", prompt, "-n", str(N_GREEDY),
                               "--ignore-eos", "--json", "-t", "2").stdout)
    assert ours["n_prompt"] == len(ids), "prompt tokenization differs from llama.cpp"
    parted = llama_ref.greedy_split(ours["tokens"], ref)
    if parted is None:
        return
    split, margin = parted
    print(f"{name}: greedy parts from llama.cpp at step {split}, llama.cpp top-2 margin {margin:.3f}")
    assert margin < NEAR_TIE, (f"{name}: greedy output parts from llama.cpp at step {split} where its "
                               f"top-2 margin is {margin:.3f} (not a near-tie): ours {ours['tokens'][split:split + 1]} "
                               f"vs {ref['tokens'][split:split + 1]}")
