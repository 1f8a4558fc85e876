"""Bit-level kernel parity with ggml's CPU backend (the one llama.cpp runs here).

ggml is called directly through ctypes from llama-cpp-python's bundled
libggml-base.so / libggml-cpu.so: for each weight type, the activation rows
are quantized with the CPU trait's from_float of the type's vec_dot_type (on
x86 that is the AVX path of quantize_row_q8_0/q8_1: id = 127/amax and
round-half-even, not the generic 1/d + roundf) and every output is ggml's
vec_dot. Our side comes from `specdec dev kernel-dump IN OUT`
(apps/cmd_dev.cpp), which writes our
quantized activation rows and the matmul output at every ISA level.

Checks:
  * quantized activation bytes identical to ggml's (d, s, qs, bsums);
  * every ISA level's dot equal to ggml's up to float summation order
    (bounded by a few ulp of the sum of |block contributions|);
  * our dequantized weight rows identical to the `gguf` package's
    dequantize (gguf.quants, an implementation independent of ggml's C).

Weight rows are real rows of the GGUF models (Q4_1, Q5_0, Q8_0, Q4_K, Q6_K);
the other types (Q4_0, Q5_1, Q5_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4, F16, BF16) are made
with ggml_quantize_chunk from random floats. Activations are random (with outliers and exact ties to
exercise rounding) and include rows that put a value exactly on .5 after
scaling.

Env: SPECDEC_BIN (default build/release/specdec).

Note (not checked here): llama.cpp repacks Q4_0/Q4_K weights on AVX2 CPUs
(CPU_REPACK buffer, 8x8 interleave) and multiplies them with gemv/gemm
kernels whose float accumulation order differs from vec_dot; the integer
parts and the activation quantization (quantize_row_q8_K for single rows)
are the same.
"""
from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, model_path

llama_cpp = pytest.importorskip("llama_cpp")
gguf = pytest.importorskip("gguf")

BIN = os.environ.get("SPECDEC_BIN", str(REPO_ROOT / "build/release/specdec"))
LIB_DIR = Path(llama_cpp.__file__).resolve().parent / "lib"

F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 = 0, 1, 2, 3, 6, 7, 8, 9
Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, BF16 = 10, 11, 12, 13, 14, 15, 20, 30
IQ4_XS, MXFP4 = 23, 39
NAMES = {F16: "F16", Q4_0: "Q4_0", Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_1: "Q5_1", Q8_0: "Q8_0",
         Q2_K: "Q2_K", Q3_K: "Q3_K", Q4_K: "Q4_K", Q5_K: "Q5_K", Q6_K: "Q6_K", IQ4_NL: "IQ4_NL",
         IQ4_XS: "IQ4_XS", MXFP4: "MXFP4", BF16: "BF16"}

# Real weights: (model file, tensor name) per type.
REAL = {
    Q4_1: ("smollm2-135m-instruct-q4_1", "blk.0.ffn_down.weight"),
    Q8_0: ("smollm2-135m-instruct-q4_1", "token_embd.weight"),
    Q5_0: ("qwen2.5-coder-0.5b-instruct-q4_k_m", "blk.0.attn_q.weight"),
    Q4_K: ("qwen2.5-coder-0.5b-instruct-q4_k_m", None),
    Q6_K: ("qwen2.5-coder-0.5b-instruct-q4_k_m", None),
}
SYNTH = [Q4_0, Q5_1, Q5_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4, F16, BF16]
# Bit-equal to ggml's vec_dot: every quantized type. ggml's x86 kernels for
# IQ4_XS (x Q8_K) and MXFP4 (x Q8_0) have only AVX2 paths (also what an
# AVX-512 build runs): integer lanes, then one fmadd per block (super-block)
# into 8 float lanes, which the scalar references reproduce. F16/BF16 are
# checked to a bound.
EXACT = {Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4}
N_ROWS = 48
N_TOK = 7


# ---- ggml through ctypes --------------------------------------------------------

FROM_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
VEC_DOT = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                           ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class TraitsCpu(ctypes.Structure):  # ggml-cpu.h: struct ggml_type_traits_cpu
    _fields_ = [("from_float", ctypes.c_void_p), ("vec_dot", ctypes.c_void_p),
                ("vec_dot_type", ctypes.c_int), ("nrows", ctypes.c_int64)]


class Traits(ctypes.Structure):  # ggml.h: struct ggml_type_traits
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


class Ggml:
    def __init__(self):
        mode = ctypes.RTLD_GLOBAL
        self.base = ctypes.CDLL(str(LIB_DIR / "libggml-base.so"), mode=mode)
        self.cpu = ctypes.CDLL(str(LIB_DIR / "libggml-cpu.so"), mode=mode)
        self.cpu.ggml_cpu_init.restype = None
        self.cpu.ggml_cpu_init()
        self.cpu.ggml_get_type_traits_cpu.restype = ctypes.POINTER(TraitsCpu)
        self.cpu.ggml_get_type_traits_cpu.argtypes = [ctypes.c_int]
        self.base.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
        self.base.ggml_get_type_traits.argtypes = [ctypes.c_int]
        self.base.ggml_quantize_chunk.restype = ctypes.c_size_t
        self.base.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                                  ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                                  ctypes.c_void_p]
        self.base.ggml_row_size.restype = ctypes.c_size_t
        self.base.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]

    def traits(self, t):
        return self.base.ggml_get_type_traits(t).contents

    def traits_cpu(self, t):
        return self.cpu.ggml_get_type_traits_cpu(t).contents

    def row_size(self, t, n):
        return self.base.ggml_row_size(t, n)

    def quantize(self, t, x: np.ndarray) -> np.ndarray:
        """(rows, n) float32 -> (rows, row_size) uint8 with ggml's weight quantizer."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        rows, n = x.shape
        out = np.zeros((rows, self.row_size(t, n)), dtype=np.uint8)
        self.base.ggml_quantize_chunk(t, x.ctypes.data, out.ctypes.data, 0, rows, n, None)
        return out

    def act(self, wtype, x: np.ndarray):
        """ggml's activation rows (vec_dot_type's from_float) and that type."""
        vdt = self.traits_cpu(wtype).vec_dot_type
        ff = FROM_FLOAT(self.traits_cpu(vdt).from_float)
        x = np.ascontiguousarray(x, dtype=np.float32)
        rows, n = x.shape
        out = np.zeros((rows, self.row_size(vdt, n)), dtype=np.uint8)
        for r in range(rows):
            ff(x[r].ctypes.data, out[r].ctypes.data, n)
        return out, vdt

    def dot(self, wtype, n, w_row: np.ndarray, a_row: np.ndarray) -> float:
        vd = VEC_DOT(self.traits_cpu(wtype).vec_dot)
        s = ctypes.c_float(0.0)
        vd(n, ctypes.addressof(s), 0, w_row.ctypes.data, 0, a_row.ctypes.data, 0, 1)
        return s.value

    def to_float(self, t, row: np.ndarray, n) -> np.ndarray:
        if t == Q8_1:  # no to_float in ggml: fp16 d, fp16 s, 32 x int8
            b = row.reshape(-1, 36)
            d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
            return (d * b[:, 4:].view(np.int8).astype(np.float32)).reshape(-1)
        if t == Q8_K:  # float d, 256 x int8, 16 x int16 bsums
            b = row.reshape(-1, 292)
            d = b[:, 0:4].copy().view(np.float32)
            return (d * b[:, 4:260].view(np.int8).astype(np.float32)).reshape(-1)
        out = np.zeros(n, dtype=np.float32)
        TO_FLOAT(self.traits(t).to_float)(row.ctypes.data, out.ctypes.data, n)
        return out


@pytest.fixture(scope="module")
def ggml():
    if not (LIB_DIR / "libggml-cpu.so").exists():
        pytest.fail(f"no libggml-cpu.so in {LIB_DIR} (llama-cpp-python is not installed in .venv)", pytrace=False)
    return Ggml()


# ---- inputs ---------------------------------------------------------------------

def real_weights(wtype):
    fname, tname = REAL[wtype]
    p = model_path(fname)  # through models/manifest.json; fails with the fetch command if missing
    r = gguf.GGUFReader(str(p))
    for t in r.tensors:
        if int(t.tensor_type) == wtype and (tname is None or t.name == tname):
            data = np.asarray(t.data)
            n_in = int(t.shape[0])
            return np.ascontiguousarray(data[:N_ROWS]).view(np.uint8).reshape(min(N_ROWS, data.shape[0]), -1), n_in, t.name
    pytest.fail(f"no {NAMES[wtype]} tensor in {fname}", pytrace=False)


def activations(n_in, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N_TOK, n_in)).astype(np.float32)
    x[1] *= 1e-3                                    # small scales (fp16 d subnormal-ish paths)
    x[2, ::17] *= 25.0                              # outliers: one value dominates a block
    # rows whose scaled values land exactly on .5: amax = 127 -> id = 1, x*id = k + 0.5
    x[3] = np.round(rng.uniform(-120, 120, n_in)) + 0.5
    x[3, ::32] = 127.0
    x[4] = np.round(rng.uniform(-60, 60, n_in)) / 2
    x[4, 5::32] = -127.0 / 2
    x[5] = 0.0                                      # all-zero row
    x[5, 7] = 1.0
    return x


def run_ours(wtype, n_in, w: np.ndarray, x: np.ndarray, tmp: Path):
    if not Path(BIN).exists():
        pytest.fail(f"specdec binary missing: {BIN} (set SPECDEC_BIN)")
    n_rows, row_bytes = w.shape
    n_tok = x.shape[0]
    inp, outp = tmp / "kd.in", tmp / "kd.out"
    with open(inp, "wb") as f:
        f.write(b"KDMP" + struct.pack("<iqqqQ", wtype, n_in, n_rows, n_tok, row_bytes))
        f.write(np.ascontiguousarray(w).tobytes())
        f.write(np.ascontiguousarray(x, dtype=np.float32).tobytes())
    env = dict(os.environ)
    env.pop("SPECDEC_ISA", None)
    subprocess.run([BIN, "dev", "kernel-dump", str(inp), str(outp)], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    buf = outp.read_bytes()
    n_levels, arb = struct.unpack_from("<iQ", buf, 0)
    off = 12
    act = np.frombuffer(buf, dtype=np.uint8, count=n_tok * arb, offset=off).reshape(n_tok, arb)
    off += n_tok * arb
    ys = np.frombuffer(buf, dtype=np.float32, count=n_levels * n_tok * n_rows,
                       offset=off).reshape(n_levels, n_tok, n_rows)
    off += 4 * n_levels * n_tok * n_rows
    deq = np.frombuffer(buf, dtype=np.float32, offset=off).reshape(n_rows, n_in)
    return act, ys, deq


def compare(ggml, wtype, n_in, w, x, tmp, rel_tol=None):
    act_g, vdt = ggml.act(wtype, x)
    act_o, ys, deq = run_ours(wtype, n_in, w, x, tmp)
    if wtype in EXACT:
        ref_deq = gguf.quants.dequantize(w, gguf.GGMLQuantizationType(wtype)).reshape(deq.shape)
        bad = np.nonzero(deq.view(np.uint32) != ref_deq.astype(np.float32).view(np.uint32))
        assert bad[0].size == 0, (f"{NAMES[wtype]}: dequantized weights differ from gguf.quants at "
                                  f"(row, col) {list(zip(*bad))[:5]}")
    assert act_o.shape == act_g.shape, (act_o.shape, act_g.shape)
    for t in range(x.shape[0]):
        if not np.array_equal(act_o[t], act_g[t]):
            bad = np.nonzero(act_o[t] != act_g[t])[0]
            pytest.fail(f"{NAMES[wtype]}: activation row {t} differs from ggml at bytes "
                        f"{bad[:10].tolist()} (of {len(bad)})")
    # ggml's dots, and a bound on float summation noise from |terms|
    n_rows = w.shape[0]
    worst = 0.0
    for t in range(x.shape[0]):
        a_f = ggml.to_float(vdt, act_g[t], n_in).astype(np.float64)
        for r in range(n_rows):
            ref = ggml.dot(wtype, n_in, w[r], act_g[t])
            w_f = ggml.to_float(wtype, w[r], n_in).astype(np.float64)
            mag = float(np.abs(w_f * a_f).sum())
            # Quantized types follow ggml's x86 float order exactly: bit-equal.
            tol = 0.0 if wtype in EXACT and rel_tol is None else (rel_tol or 1e-6) * mag + 1e-30
            for lvl in range(ys.shape[0]):
                err = abs(float(ys[lvl, t, r]) - float(np.float32(ref)))
                worst = max(worst, err / tol if tol else 0.0)
                assert err <= tol, (f"{NAMES[wtype]} level {lvl} tok {t} row {r}: ours "
                                    f"{ys[lvl, t, r]!r} ggml {ref!r} (|terms| {mag:.4g})")
    return worst


@pytest.mark.parametrize("wtype", list(REAL), ids=lambda t: NAMES[t])
def test_real_weights(ggml, wtype, tmp_path):
    w, n_in, name = real_weights(wtype)
    x = activations(n_in, seed=wtype)
    compare(ggml, wtype, n_in, w, x, tmp_path)


@pytest.mark.parametrize("wtype", SYNTH, ids=lambda t: NAMES[t])
def test_synthetic_weights(ggml, wtype, tmp_path):
    rng = np.random.default_rng(100 + wtype)
    n_in = 512
    wf = rng.standard_normal((N_ROWS, n_in)).astype(np.float32) * 0.05
    w = ggml.quantize(wtype, wf)
    x = activations(n_in, seed=200 + wtype)
    compare(ggml, wtype, n_in, w, x, tmp_path)


@pytest.mark.parametrize("wtype", [IQ4_NL, MXFP4], ids=lambda t: NAMES[t])
def test_odd_block_count_tail(ggml, wtype, tmp_path):
    """IQ4_NL/MXFP4 rows of an odd block count (17): ggml's x86 kernel runs
    the blocks in pairs and adds the last one apart, as `sumf += d * sumi`,
    which the C compiler may or may not contract into an fma depending on how
    ggml was built (unfused in the -march=native build on a Zen 1 VM,
    2026-12-04; fused where this case was first written). specdec multiplies
    then adds; so the tail may differ from ggml's by the rounding of that one
    product and the sum's last rounding: within 2^-22 of the sum of |terms|."""
    rng = np.random.default_rng(300 + wtype)
    n_in = 544
    wf = rng.standard_normal((N_ROWS, n_in)).astype(np.float32) * 0.05
    w = ggml.quantize(wtype, wf)
    x = activations(n_in, seed=400 + wtype)
    compare(ggml, wtype, n_in, w, x, tmp_path, rel_tol=2.0 ** -22)


def test_activation_quantization_many_rows(ggml, tmp_path):
    """Many random rows through each dot type: quantized bytes must be identical."""
    rng = np.random.default_rng(5)
    n_in = 1024
    x = (rng.standard_normal((64, n_in)) * rng.uniform(1e-3, 30, (64, 1))).astype(np.float32)
    for wtype in (Q4_0, Q4_1, Q4_K):
        act_g, _ = ggml.act(wtype, x)
        w = np.zeros((1, ggml.row_size(wtype, n_in)), dtype=np.uint8)
        act_o, _, _ = run_ours(wtype, n_in, w, x, tmp_path)
        diff_rows = [t for t in range(x.shape[0]) if not np.array_equal(act_o[t], act_g[t])]
        assert not diff_rows, f"{NAMES[wtype]}: rows {diff_rows[:10]} differ from ggml"
