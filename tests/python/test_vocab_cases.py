"""llama.cpp's own tokenizer cases on the vocabularies of the models people bring.

llama.cpp ships vocab-only GGUFs (models/ggml-vocab-<name>.gguf) of many model
families; for most of them models/ggml-vocab-<name>.gguf.inp holds test texts
and .out the token ids its tests/test-tokenizer-0.cpp expects for each
(tokenized without BOS/EOS and without parsing special tokens; the ids were
made with the Hugging Face tokenizer, and llama.cpp's CI passes every file).
Each vocabulary here is loaded by specdec (`specdec dev tokenize-dump`) and
must give exactly those ids for every case.

The files come with the llama-cpp-python sdist that tools/build_llamacpp.sh
downloads and extracts (scripts/setup.sh test runs it); a
missing directory fails the tests with that command, it never skips them.

Vocabularies specdec cannot load yet are strict xfails: CI stays green, and
the day one passes the xfail fails, so that the mark gets removed.

Env: SPECDEC_BIN (default build/release/specdec), SPECDEC_LLAMACPP_MODELS_DIR
(default build/llamacpp/src/vendor/llama.cpp/models).
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import LLAMACPP_MODELS_DIR, SPECDEC_BIN, llamacpp_test_data

BIN = SPECDEC_BIN
VOCAB_DIR = LLAMACPP_MODELS_DIR

# test-tokenizer-0.cpp's case separator in the .inp files.
SEPARATOR = b"\n__ggml_vocab_test__\n"

# Every vocabulary with .inp/.out cases in the pinned llama-cpp-python
# (0.3.36); test_vocab_list keeps this in step with the directory.
VOCABS = [
    "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2", "llama-bpe",
    "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder",
]

# Not supported yet, with why (strict: a pass fails until the mark is removed).
# Empty since WordPiece ("bert") and Gemma 4's BPE ("gemma4") were added.
NOT_SUPPORTED: dict[str, str] = {}


def vocab_dir() -> Path:
    return llamacpp_test_data()


def engine_bin() -> Path:
    if not BIN.exists():
        pytest.fail(f"specdec binary not built: {BIN} (build it with: scripts/build.sh release)", pytrace=False)
    return BIN


def read_cases(gguf: Path) -> dict[bytes, list[int]]:
    """The cases as test-tokenizer-0.cpp's read_tests reads them: texts split
    on the separator (a trailing one ends the last case), one .out line of
    space-separated ids per case, later duplicates replacing earlier ones."""
    raw = gguf.with_name(gguf.name + ".inp").read_bytes()
    texts = []
    pos = 0
    while pos < len(raw):
        nxt = raw.find(SEPARATOR, pos)
        if nxt < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:nxt])
        pos = nxt + len(SEPARATOR)
    out = gguf.with_name(gguf.name + ".out").read_bytes().split(b"\n")
    if out and out[-1] == b"":  # std::getline yields no line after the final newline
        out.pop()
    assert len(texts) == len(out), f"{gguf.name}: {len(texts)} inputs but {len(out)} outputs"
    assert texts, f"{gguf.name}: no cases"
    return {t: [int(x) for x in line.split()] for t, line in zip(texts, out)}


def tokenize(model: Path, texts: list[bytes]) -> subprocess.CompletedProcess:
    req = {"model": str(model),
           "items": [{"hex": t.hex(), "add_special": False, "parse_special": False} for t in texts]}
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(fin, "w") as f:
            json.dump(req, f)
        proc = subprocess.run([str(engine_bin()), "dev", "tokenize-dump", fin, fout],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            with open(fout) as f:
                proc.stdout = json.load(f)
        return proc


def test_vocab_list():
    have = sorted(p.name[len("ggml-vocab-"):-len(".gguf.inp")] for p in vocab_dir().glob("ggml-vocab-*.gguf.inp"))
    assert have == sorted(VOCABS), "update VOCABS (and NOT_SUPPORTED) for the vocabularies in " + str(VOCAB_DIR)
    for name in have:
        assert (VOCAB_DIR / f"ggml-vocab-{name}.gguf").exists()
        assert (VOCAB_DIR / f"ggml-vocab-{name}.gguf.out").exists()


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=NOT_SUPPORTED[n])) if n in NOT_SUPPORTED else n
    for n in VOCABS
])
def test_vocab_cases(name):
    gguf = vocab_dir() / f"ggml-vocab-{name}.gguf"
    cases = read_cases(gguf)
    texts = list(cases)
    proc = tokenize(gguf, texts)
    assert proc.returncode == 0, f"specdec could not tokenize with {gguf.name}: {proc.stderr.strip()}"
    got = proc.stdout["ids"]
    bad = [(t, cases[t], ids) for t, ids in zip(texts, got) if ids != cases[t]]
    for t, want, ids in bad[:8]:
        print(f"MISMATCH {t.decode('utf-8', 'backslashreplace')!r}\n  want {want}\n  got  {ids}")
    assert not bad, f"{gguf.name}: {len(bad)} of {len(texts)} cases differ"


def test_unknown_pretokenizer_is_refused(tmp_path):
    # A well-formed byte-level BPE vocabulary whose tokenizer.ggml.pre names
    # no known split: it must not load (llama.cpp refuses it too), and the
    # error must say which name it did not know.
    import gguf

    path = tmp_path / "unknown-pre.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("no-such-split-42")
    tokens = [chr(c) for c in range(0x21, 0x7F)] + ["ab"]
    w.add_token_list(tokens)
    w.add_token_types([1] * len(tokens))
    w.add_token_merges(["a b"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    proc = tokenize(path, [b"ab"])
    assert proc.returncode != 0, "a vocabulary with an unknown pre-tokenizer was accepted"
    assert "no-such-split-42" in proc.stderr and "pre-tokenizer" in proc.stderr, proc.stderr
