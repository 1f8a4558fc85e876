"""Tokenizer parity with llama.cpp (via llama-cpp-python) on the real models.

For each model the corpus is tokenized by llama.cpp and by our engine (through
`specdec dev tokenize-dump IN OUT`) and the ids
must be identical; every token's piece must equal llama_token_to_piece(special
=True); the end-of-generation set must match; chat templates must render like
the model's Jinja template.

The same ids, pieces and end-of-generation checks run on llama.cpp's
vocab-only GGUFs of the tokenizer types no packaged model has (WordPiece
"bert", Gemma 4's "gemma4"; test_vocab_cases.py says where they come from),
and on small synthetic vocabularies written with the `gguf` package for
llama.cpp's special-token rules (end-of-generation names, gpt-oss's "<|end|>",
FIM tokens found by text).

Env: SPECDEC_BIN (default build/release/specdec),
models from models/manifest.json (conftest.model_path: a missing model fails).
"""
import ctypes
import json
import os
import random
import subprocess
import tempfile

import pytest

import jinja2  # noqa: F401  (the independent chat-template reference)
import llama_cpp
from jinja2.sandbox import ImmutableSandboxedEnvironment

from conftest import SPECDEC_BIN, model_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SPECDEC_BIN", os.path.join(ROOT, "build/release/specdec"))
MODELS = ["smollm2-135m-instruct-q4_1", "qwen2.5-coder-0.5b-instruct-q4_k_m", "gemma3-270m-q4_k_m"]
# llama.cpp's vocab-only files (models/ggml-vocab-NAME.gguf) checked here too:
# every one in the pinned sdist but nomic-bert-moe, whose T5 (Unigram)
# vocabulary specdec does not implement and refuses (test below).
VOCAB_FILES = ["aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",
               "gpt-neox", "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder"]
UNSUPPORTED_VOCAB_FILES = {"nomic-bert-moe": "unsupported tokenizer.ggml.model 't5'"}

# Gemma 3's chat template (the GGUF here ships without one; this is the
# template of google/gemma-3 instruct models, text-only part).
GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""


def corpus():
    base = [
        "",
        " ",
        "Hello world",
        " Hello world",
        "Hello, world! How are you today?",
        "don't I'LL we'Re you've she's it'd THEY'D 'tis",
        "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
        "\tint main() {\n\t\treturn 0;\n\t}\n",
        "if (x) {\r\n  y = 1;\r\n}\r\n",
        "a  b   c    d\n\n\n e\t\t f \u3000g\u00a0h",
        "   leading and trailing   ",
        "\n\n\n",
        " \n \n",
        "1 12 123 1234 12345 123456 1234567 12345678901234567890 3.14159 -42 1,000,000",
        "٣٤٥ ² ½ Ⅻ 〇",
        "中文分词测试，这是一个句子。日本語のテキストです。한국어 텍스트",
        "😀 😃 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
        "café naïve résumé Ångström Straße façade coöperate",
        "e\u0301 a\u0308 n\u0303",
        "Ελληνικά Русский текст עברית العربية हिन्दी ไทย",
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
        "<start_of_turn>user\nHi<end_of_turn>\n<bos><eos>",
        "<|endoftext|></s><unk><pad><mask><|fim_prefix|><fim_prefix><reponame>",
        "x<|im_start|>y<|im_end|>z",
        "<<|im_start|>>",
        "<html><body><h1>Title</h1><p>Para &amp; more</p></body></html>",
        "https://example.com/path?q=1&r=two#frag user@example.org",
        "!!! ??? ... --- *** ### $$$ %%% ^^^ ~~~ ||| ``` ''' \"\"\"",
        "\u200b\u200c\u200d\ufeff zero width",
        "\x00\x01\x02\x1f\x7f control",
        "\ue000\U000f0000 private use",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
        "word\u2028line\u2029para\u0085next",
        "ThisIsCamelCase snake_case_name kebab-case-name SCREAMING_CASE",
        "          indented by ten",
        "tabs\t\t\tand spaces   mixed \t \t",
    ]
    rng = random.Random(1234)
    alphabet = list("aZ09 '\n\t\r.,;:!?-_()[]{}<>|/\\\"$+=^~`#@") + [
        "é", "ß", "中", "語", "😀", "\u3000", "\u00a0", "\u0301", "²", "٣", "ا", "й", "\u200b",
        "<|im_start|>", "<end_of_turn>", "'s", "'LL", "  ", "\n\n", "123",
    ]
    fuzz = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(400)]
    # Random code points from every plane, plus probes for characters new in
    # Unicode 15.0/15.1 (llama.cpp's category table is 15.1).
    def rand_cp():
        r = rng.random()
        if r < 0.3:
            return rng.randint(0x20, 0x7E)
        if r < 0.5:
            return rng.randint(0x80, 0x2FFF)
        if r < 0.7:
            return rng.randint(0x3000, 0xFFFF)
        return rng.randint(0x10000, 0x3FFFF)
    wide = []
    for _ in range(300):
        cps = [rand_cp() for _ in range(rng.randint(1, 30))]
        wide.append("".join(chr(c) for c in cps if not 0xD800 <= c < 0xE000))
    wide += ["\U0002EBF0's", "\u2FFC's", "\U00031350's", "1\u0CF3 \u1B4C's", "\U0001F6DC\U00011F00"]
    para = ("The quick brown fox jumps over the lazy dog. 1234567890 — “quotes” and ‘apostrophes’.\n"
            "\tIndented line with tabs\tand\ttabs; café, naïve, 中文, 😀, don't, I'LL.\n")
    big = (para * (20480 // len(para) + 1))[:20480]
    return base + fuzz + wide + [big]


def items():
    out = []
    for text in corpus():
        for add_special in (False, True):
            for parse_special in (False, True):
                out.append({"text": text, "add_special": add_special, "parse_special": parse_special})
    return out


CHATS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "  Hello \n"}, {"role": "assistant", "content": "Hi there!\n"},
     {"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"},
     {"role": "user", "content": "u2"}],
    [{"role": "user", "content": "u"}, {"role": "assistant", "content": "call"},
     {"role": "tool", "content": "r1"}, {"role": "tool", "content": "r2"}, {"role": "user", "content": "ok"}],
    [{"role": "assistant", "content": "starts with assistant"}],
    [{"role": "user", "content": ""}],
]


def render_jinja(template, messages, add_generation_prompt, bos):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    try:
        out = env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                               bos_token=bos, eos_token="", tools=None)
    except jinja2.exceptions.TemplateError:
        return None
    # Our renderer leaves BOS to the tokenizer (add_special), as llama.cpp does.
    if bos and out.startswith(bos):
        out = out[len(bos):]
    return out


def run_engine(req):
    if not os.path.exists(BIN):
        pytest.skip(f"test binary not built: {BIN}")
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(fin, "w") as f:
            json.dump(req, f)
        subprocess.run([BIN, "dev", "tokenize-dump", fin, fout], check=True, stdout=subprocess.DEVNULL)
        with open(fout) as f:
            return json.load(f)


def check_ids_pieces_eog(llm, path, extra=None):
    """Tokenizes the corpus (every add_special/parse_special combination and
    some invalid UTF-8) with llama.cpp and with the engine, and compares the
    ids, every token's piece and the end-of-generation set. Returns the
    engine's answer (with whatever `extra` asked for)."""
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    its = items()
    # Invalid UTF-8 (llama.cpp reads each bad byte as U+FFFD).
    raw = [b"\xff", b"ab\xc3", b"\xe4\xb8 x", b"\x80\x80 y\xf0\x9f\x98", b"ok \xed\xa0\x80 z"]
    # (llama.cpp itself aborts on 4-byte sequences above U+10FFFF, so none here.)
    raw_items = [{"hex": r.hex(), "add_special": False, "parse_special": False} for r in raw]
    got = run_engine({"model": path, "items": its + raw_items, "pieces": True, **(extra or {})})
    for r, ids in zip(raw, got["ids"][len(its):]):
        assert llm.tokenize(r, add_bos=False, special=False) == ids, r
    assert got["n_vocab"] == n_vocab

    mismatches = []
    for it, ids in zip(its, got["ids"]):
        want = llm.tokenize(it["text"].encode(), add_bos=it["add_special"], special=it["parse_special"])
        if want != ids:
            mismatches.append((it, want, ids))
    for it, want, ids in mismatches[:5]:
        print("MISMATCH", repr(it["text"][:200]), it["add_special"], it["parse_special"], want[:40], ids[:40])
    assert not mismatches, f"{len(mismatches)}/{len(its)} tokenizations differ"

    buf = ctypes.create_string_buffer(1024)
    bad = []
    for tid in range(n_vocab):
        n = llama_cpp.llama_token_to_piece(vocab, tid, buf, len(buf), 0, True)
        want = buf.raw[:n].hex()
        if want != got["pieces"][tid]:
            bad.append((tid, want, got["pieces"][tid]))
    assert not bad, f"{len(bad)} token pieces differ, first: {bad[:5]}"

    eog = [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    assert got["eog"] == eog
    return got


@pytest.mark.parametrize("model", MODELS)
def test_parity(model):
    path = str(model_path(model))
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)

    from gguf import GGUFReader
    reader = GGUFReader(path)
    field = reader.fields.get("tokenizer.chat_template")
    template = field.contents() if field is not None else GEMMA3_TEMPLATE
    bos_text = llm.detokenize([llama_cpp.llama_vocab_bos(vocab)], special=True).decode() if "gemma" in model else ""
    chats = [{"messages": m, "add_generation_prompt": g} for m in CHATS for g in (False, True)]

    got = check_ids_pieces_eog(llm, path, {"chats": chats})
    for chat, out in zip(chats, got["chat"]):
        want = render_jinja(template, chat["messages"], chat["add_generation_prompt"], bos_text)
        assert out == want, (chat, out, want)


@pytest.mark.parametrize("name", VOCAB_FILES)
def test_vocab_file_parity(name):
    from test_vocab_cases import vocab_dir

    path = str(vocab_dir() / f"ggml-vocab-{name}.gguf")
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    check_ids_pieces_eog(llm, path)


def test_vocab_files_are_all_checked():
    """Every vocab file of the sdist is either checked above or refused below, so a new one is not missed."""
    from test_vocab_cases import vocab_dir

    names = {p.name[len("ggml-vocab-"):-len(".gguf")] for p in vocab_dir().glob("ggml-vocab-*.gguf")}
    assert names == set(VOCAB_FILES) | set(UNSUPPORTED_VOCAB_FILES)


@pytest.mark.parametrize("name", sorted(UNSUPPORTED_VOCAB_FILES))
def test_unsupported_vocab_file_is_refused(name):
    from test_vocab_cases import vocab_dir

    path = vocab_dir() / f"ggml-vocab-{name}.gguf"
    r = subprocess.run([str(SPECDEC_BIN), "models", "inspect", str(path)], capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert UNSUPPORTED_VOCAB_FILES[name] in out, out[-2000:]


# Synthetic "llama" (SentencePiece) vocabularies for llama.cpp's special-token
# rules no packaged model exercises: the end-of-generation names (DeepSeek's
# "<｜end▁of▁sentence｜>", MiniMax's "[e~["), gpt-oss's and Solar Open's
# "<|end|>" that is not end of generation, FIM tokens found by text (of
# several candidates llama.cpp picks one in its hash map's order; the filler
# tokens vary the vocabulary size and so that order) and metadata ids that stop
# the search by text. Each lists tokens after "<unk>", "<s>", "</s>", "a" and
# the 256 byte tokens, and metadata ids as token texts.
DEEPSEEK_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
DEEPSEEK_FIM = ["<\uff5cfim\u2581begin\uff5c>", "<\uff5cfim\u2581hole\uff5c>", "<\uff5cfim\u2581end\uff5c>"]
FIM_CANDIDATES = ["<PAD>", "[PAD]", "<fim_pad>", "<fim-pad>", "<|fim_pad|>", "<REPO>", "<reponame>", "<fim-repo>",
                  "<|repo_name|>", "<|fim_repo|>", "<PRE>", "\u2581<PRE>", "<fim_prefix>", "<|im_end|>",
                  "<|endoftext|>", "<|end|>"]
SYNTHETIC_VOCABS = {
    "gpt-oss": (["<|end|>", "<|return|>", "<|call|>", "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"],
                {}),
    "gpt-oss-eot-end": (["<|end|>", "<|return|>", "<|call|>"], {"eot": "<|end|>"}),
    "solar-open": (["<|end|>", "<|calls|>", "<|flush|>"], {}),
    "return-calls": (["<|end|>", "<|return|>", "<|calls|>"], {}),
    "phi3-end": (["<|end|>", "<|return|>", "<|flush|>"], {}),
    "eog-names": (["<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|flush|>", "<end_of_turn>",
                   "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                   "<end_of_utterance>", "<eos>", "<turn|>", DEEPSEEK_EOS, "[e~[", "<|im_start|>"], {}),
    "deepseek": ([DEEPSEEK_EOS] + DEEPSEEK_FIM, {}),
    "deepseek-fim-named": (DEEPSEEK_FIM, {"fim_pre": "a", "suffix": "a"}),
    "tool-response": (["<|tool_response>", "<eos>"], {}),
    **{f"fim-candidates-{k}": ([f"w{j}" for j in range(k * 53)] + FIM_CANDIDATES, {}) for k in range(8)},
}


def write_synthetic_vocab(path, extra, ids):
    from gguf import GGUFWriter

    tokens = ["<unk>", "<s>", "</s>", "a"] + [f"<0x{b:02X}>" for b in range(256)] + extra
    types = [2, 3, 3, 1] + [6] * 256 + [1] * len(extra)
    w = GGUFWriter(str(path), "llama")
    # llama.cpp reads these hyperparameters even for a vocabulary-only load.
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(16)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types(types)
    for key, text in ids.items():
        w.add_uint32(f"tokenizer.ggml.{key}_token_id", tokens.index(text))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tokens


@pytest.mark.parametrize("name", list(SYNTHETIC_VOCABS))
def test_synthetic_special_tokens_parity(name, tmp_path):
    extra, ids = SYNTHETIC_VOCABS[name]
    path = str(tmp_path / f"{name}.gguf")
    write_synthetic_vocab(path, extra, ids)
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    # The special texts run together, so that how each is parsed is compared too.
    special = "".join(extra) + " a" + "".join(reversed(extra))
    texts = [{"text": special, "add_special": a, "parse_special": p} for a in (False, True) for p in (False, True)]
    got = check_ids_pieces_eog(llm, path)
    engine = run_engine({"model": path, "items": texts})
    for it, ids_got in zip(texts, engine["ids"]):
        assert ids_got == llm.tokenize(special.encode(), add_bos=it["add_special"], special=it["parse_special"]), it
    assert got["eog"], "no end-of-generation token at all"
