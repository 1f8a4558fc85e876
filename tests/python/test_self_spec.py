"""Self-speculation from the command line: `specdec calibrate` on the CI model
with a tiny setting saves its table and choice next to the model, `generate
--draft-layers auto` uses that choice, explicit layer lists decode exactly like
AR with chain, tree and ssd, and bad lists are clear errors."""
from __future__ import annotations

import json

from conftest import model_path, run_specdec

MODEL = "smollm2-135m-instruct-q4_1"
PROMPT = "def fibonacci(n):\n"


run = run_specdec


def gen(model: str, *args: str) -> dict:
    return json.loads(
        run("generate", "-m", model, "--json", "-t", "2", "-p", PROMPT, "-n", "16", "--ignore-eos", *args).stdout
    )


def test_calibrate_saves_choice_and_auto_uses_it(tmp_path):
    # A link to the model in a scratch directory: the calibration file lands next to it, not next to the real one.
    model = tmp_path / "smol.gguf"
    model.symlink_to(model_path(MODEL))
    r = run("calibrate", "-m", str(model), "--layers", "6,15", "--layer-set", "0-9,28-29",
            "--prompts", "2", "-n", "8", "-t", "2")
    saved = tmp_path / "smol.gguf.selfspec.json"
    assert saved.exists(), r.stdout
    j = json.loads(saved.read_text())
    assert j["n_layer"] == 30 and j["method"] == "chain"
    assert j["model_size"] == model.stat().st_size and len(j["model_sha256"]) == 64
    assert [c["layers"] for c in j["candidates"]] == ["0-5", "0-14", "0-9,28-29"]
    for c in j["candidates"]:
        assert c["identical"] is True
        for kind in ("code", "chat", "all"):
            f = c["figures"][kind]
            assert f["mean_accept_len"] >= 1.0 and f["tok_s"] > 0 and f["speedup"] > 0
    assert j["ar_tok_s"] > 0 and j["date"] and j["load_average"]
    choice = j["choice"]["draft_layers"]
    assert choice == "ar" or choice in [c["layers"] for c in j["candidates"]]
    assert "draft layers" in r.stdout and "saved" in r.stdout

    ar = gen(str(model))
    auto = gen(str(model), "--method", "chain", "--draft-layers", "auto")
    assert auto["tokens"] == ar["tokens"]
    if choice == "ar":
        assert auto["method"] == "ar"
    else:
        assert auto["method"] == "chain" and auto["draft_layers"] == choice

    # Force a known choice: auto must follow the file, whatever it says.
    j["choice"] = {"draft_layers": "0-3,29", "method": "chain", "speedup": 1.5}
    saved.write_text(json.dumps(j))
    forced = gen(str(model), "--method", "tree", "--draft-layers", "auto")
    assert forced["draft_layers"] == "0-3,29" and forced["tokens"] == ar["tokens"]


def test_auto_without_calibration_is_a_clear_error(tmp_path):
    model = tmp_path / "uncalibrated.gguf"
    model.symlink_to(model_path(MODEL))
    r = run("generate", "-m", str(model), "-p", "x", "--method", "chain", "--draft-layers", "auto", check=False)
    assert r.returncode == 1
    assert "specdec calibrate" in r.stderr and "selfspec.json" in r.stderr


def test_layer_lists_with_every_draft_method_match_ar():
    model = str(model_path(MODEL))
    ar = gen(model)
    for method in ("chain", "tree", "ssd"):
        for layers in ("12", "0-7,27-29"):
            out = gen(model, "--method", method, "--draft-layers", layers)
            assert out["tokens"] == ar["tokens"], (method, layers)
            assert out["draft_layers"] == ("0-11" if layers == "12" else layers)


def test_bad_layer_lists_are_clear_errors():
    model = str(model_path(MODEL))
    for layers, needle in (("0-40", "has 30 layers"), ("5,3", "ascending"), ("a-b", "not a layer number"),
                           ("0", "at least one layer")):
        r = run("generate", "-m", model, "-p", "x", "--method", "chain", "--draft-layers", layers, check=False)
        assert r.returncode == 1, (layers, r.stderr)
        assert needle in r.stderr, (layers, r.stderr)
        assert "internal error" not in r.stderr
