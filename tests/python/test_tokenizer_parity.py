"""Tokenizer parity with llama.cpp (via llama-cpp-python) on the real models.

For each model the corpus is tokenized by llama.cpp and by our engine (through
`specdec dev tokenize-dump IN OUT`) and the ids
must be identical; every token's piece must equal llama_token_to_piece(special
=True); the end-of-generation set must match; chat templates must render like
the model's Jinja template.

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

from conftest import model_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SPECDEC_BIN", os.path.join(ROOT, "build/release/specdec"))
MODELS = ["smollm2-135m-instruct-q4_1", "qwen2.5-coder-0.5b-instruct-q4_k_m", "gemma3-270m-q4_k_m"]

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


@pytest.mark.parametrize("model", MODELS)
def test_parity(model):
    path = str(model_path(model))
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    its = items()
    from gguf import GGUFReader
    reader = GGUFReader(path)
    field = reader.fields.get("tokenizer.chat_template")
    template = field.contents() if field is not None else GEMMA3_TEMPLATE
    bos_text = llm.detokenize([llama_cpp.llama_vocab_bos(vocab)], special=True).decode() if "gemma" in model else ""
    chats = [{"messages": m, "add_generation_prompt": g} for m in CHATS for g in (False, True)]

    # Invalid UTF-8 (llama.cpp reads each bad byte as U+FFFD).
    raw = [b"\xff", b"ab\xc3", b"\xe4\xb8 x", b"\x80\x80 y\xf0\x9f\x98", b"ok \xed\xa0\x80 z"]
    # (llama.cpp itself aborts on 4-byte sequences above U+10FFFF, so none here.)
    raw_items = [{"hex": r.hex(), "add_special": False, "parse_special": False} for r in raw]
    got = run_engine({"model": path, "items": its + raw_items, "pieces": True, "chats": chats})
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

    for chat, out in zip(chats, got["chat"]):
        want = render_jinja(template, chat["messages"], chat["add_generation_prompt"], bos_text)
        assert out == want, (chat, out, want)
