"""specdec's Jinja interpreter against Python's jinja2 on real chat templates.

Every template llama.cpp keeps for its own chat tests
(vendor/llama.cpp/models/templates/*.jinja in the llama-cpp-python sdist that
tools/build_llamacpp.sh downloads and extracts; scripts/setup.sh test runs it
before the Python tests, and a missing directory fails with that command) is
rendered on a set of conversations by specdec (`specdec dev render-template`,
one process for all cases) and by jinja2 set up as Hugging Face's
apply_chat_template sets it up (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, the generation tag, its tojson, raise_exception
and strftime_now; messages, add_generation_prompt, bos_token, eos_token,
tools=None or a tool list, documents=None). Each case must be byte-identical, and a case
where jinja2 raises must raise in specdec too. The summary line says how many
templates x conversations are identical; every failure is listed.

Env: SPECDEC_BIN (default build/release/specdec), SPECDEC_LLAMACPP_MODELS_DIR
(default build/llamacpp/src/vendor/llama.cpp/models).
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path

import jinja2
import pytest
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from conftest import SPECDEC_BIN, llamacpp_test_data

BIN = SPECDEC_BIN
NOW = 1764680000  # strftime_now's clock, the same on both sides
BOS, EOS = "<s>", "</s>"

SYSTEM = {"role": "system", "content": "You are a concise assistant."}
CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system_multi_turn": [
        SYSTEM,
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4."},
        {"role": "user", "content": "And 3+3?"},
    ],
    "no_system_multi_turn": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "assistant_prefill": [
        SYSTEM,
        {"role": "user", "content": "Write a haiku about the sea."},
        {"role": "assistant", "content": "Waves fold into"},
    ],
    "multiline_unicode": [
        {"role": "system", "content": "  Réponds en français.\nSois bref.  "},
        {"role": "user", "content": "  Line one\n\tline two\n\n中文 テキスト 😀 👨‍👩‍👧 — «quotes» 'single' \"double\" {{ not jinja }} {% raw %}\n"},
        {"role": "assistant", "content": "\nD'accord :\n- un\n- deux\n"},
        {"role": "user", "content": "Ω≈ç√ 🇫🇷\u00a0nbsp\u3000ideographic space\r\nCRLF \\ backslash"},
    ],
}

# Tool use as Hugging Face passes it: JSON-schema functions in `tools`, calls
# with dict arguments, results in "tool" messages.
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}]
TOOL_CONVERSATIONS = {
    "tools_offered": [SYSTEM, {"role": "user", "content": "Weather in Paris?"}],
    "tool_call_round_trip": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temperature\": 21}"},
        {"role": "assistant", "content": "It is 21 °C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ],
}


class GenerationTag(Extension):
    """Hugging Face's AssistantTracker: {% generation %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def hf_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.fromtimestamp(NOW).strftime(fmt)
    return env


def reference(env, source, case):
    """jinja2's output, or None when it raises (parsing included)."""
    try:
        tmpl = env.from_string(source)
        return tmpl.render(messages=case["messages"], add_generation_prompt=case["add_generation_prompt"],
                           bos_token=BOS, eos_token=EOS, tools=case.get("tools"), documents=None)
    except Exception:  # noqa: BLE001 - any exception is "the template raises"
        return None


def templates_dir() -> Path:
    return llamacpp_test_data("templates")


def run_specdec(templates, cases):
    if not BIN.exists():
        pytest.fail(f"specdec binary not built: {BIN}", pytrace=False)
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(fin, "w", encoding="utf-8") as f:
            json.dump({"templates": templates, "cases": cases}, f, ensure_ascii=False)
        subprocess.run([str(BIN), "dev", "render-template", fin, fout], check=True, timeout=300)
        with open(fout, encoding="utf-8") as f:
            return json.load(f)


def test_llamacpp_templates_render_like_jinja2():
    files = sorted(templates_dir().glob("*.jinja"))
    assert len(files) >= 60, f"only {len(files)} templates in {templates_dir()}"
    templates = {f.stem: f.read_text(encoding="utf-8") for f in files}
    convs = [(name, msgs, None) for name, msgs in CONVERSATIONS.items()]
    convs += [(name, msgs, TOOLS) for name, msgs in TOOL_CONVERSATIONS.items()]
    cases = [{"template": name, "conversation": conv, "messages": msgs, "add_generation_prompt": gen,
              "bos_token": BOS, "eos_token": EOS, "now": NOW, **({"tools": tools} if tools else {})}
             for name in templates for conv, msgs, tools in convs for gen in (False, True)]
    got = run_specdec(templates, cases)

    env = hf_environment()
    identical, both_raise, failures = 0, 0, []
    for case, res in zip(cases, got["results"]):
        want = reference(env, templates[case["template"]], case)
        where = f'{case["template"]} / {case["conversation"]} / add_generation_prompt={case["add_generation_prompt"]}'
        if want is None:
            if "error" in res:
                both_raise += 1
            else:
                failures.append(f"{where}: jinja2 raises, specdec rendered {res['text'][:80]!r}")
        elif "error" in res:
            failures.append(f"{where}: specdec raised: {res['error']}")
        elif res["text"] != want:
            at = next((i for i, (a, b) in enumerate(zip(res["text"], want)) if a != b), min(len(res["text"]), len(want)))
            failures.append(f"{where}: differs at char {at}: specdec {res['text'][max(0, at - 30):at + 30]!r} "
                            f"jinja2 {want[max(0, at - 30):at + 30]!r}")
        else:
            identical += 1
    unparsed = {k: v for k, v in got["templates"].items() if v}
    print(f"\nchat templates: {len(templates)} templates x {len(convs) * 2} conversations = {len(cases)} "
          f"cases: {identical} identical, {both_raise} raise in both, {len(failures)} differ")
    for name, err in sorted(unparsed.items()):
        print(f"  not parsed: {name}: {err}")
    for f in failures:
        print("  " + f)
    assert not failures, f"{len(failures)} of {len(cases)} cases differ from jinja2 (listed above)"
