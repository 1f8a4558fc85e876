"""Shared pytest fixtures for specdec's Python tests.

Other test files may rely on these (keep this module small):

  REPO_ROOT, MODELS_DIR     paths (MODELS_DIR honours $SPECDEC_MODELS_DIR)
  model_path(name)          Path of models/<file> for a model name from
                            models/manifest.json (or models/<name>.gguf); calls
                            pytest.fail with the fetch command if it is missing
  load_manifest()           models/manifest.json as a dict ({"models": {}} if absent)
  load_registry()           tools/models.json "models" list
  DEFAULT_MODEL             the registry's default (CI) model name

  fixtures: repo_root, models_dir, manifest, registry, default_model_path

tools/ and tools/reference/ are put on sys.path, so tests can
`import fetch_models`, `import prompts` and `import llama_ref`.

Models are fetched with: .venv/bin/python tools/fetch_models.py [NAME ...]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# The binary under test (SPECDEC_BIN, as scripts/test.sh sets it; else the release build).
SPECDEC_BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))

# llama.cpp's own test data (vocab test files, chat templates): the models/
# folder of the pinned llama-cpp-python sdist's llama.cpp, which
# tools/build_llamacpp.sh extracts (scripts/setup.sh test runs it).
LLAMACPP_MODELS_DIR = Path(os.environ.get("SPECDEC_LLAMACPP_MODELS_DIR",
                                          REPO_ROOT / "build" / "llamacpp" / "src" / "vendor" / "llama.cpp" / "models"))


def llamacpp_test_data(sub: str = "") -> Path:
    """A folder of llama.cpp's test data; a missing one fails the test with the
    command that makes it (never a skip)."""
    d = LLAMACPP_MODELS_DIR / sub if sub else LLAMACPP_MODELS_DIR
    if not d.is_dir():
        pytest.fail(f"llama.cpp's test data is missing ({d}); it comes with the llama-cpp-python sdist, "
                    "extracted by tools/build_llamacpp.sh", pytrace=False)
    return d


def run_specdec(*args: str, check: bool = True, timeout: float = 600) -> "subprocess.CompletedProcess":
    """Runs the specdec binary; with check, a non-zero exit fails the test with its stderr."""
    import subprocess
    r = subprocess.run([str(SPECDEC_BIN), *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, r.stderr
    return r
MODELS_DIR = Path(os.environ.get("SPECDEC_MODELS_DIR", REPO_ROOT / "models"))
REGISTRY_PATH = REPO_ROOT / "tools" / "models.json"

# The engine's cost-calibration cache (sched/cost_calibration.h) goes to a
# directory of the test session's own: tests run engines side by side on a
# loaded machine, and their calibrations must neither land in the user's
# ~/.cache/specdec nor be read from it. Every subprocess inherits this.
if not os.environ.get("SPECDEC_CACHE_DIR"):
    import tempfile

    os.environ["SPECDEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="specdec-test-cache-")

for _p in (REPO_ROOT / "tools", REPO_ROOT / "tools" / "reference"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))


def load_registry() -> list[dict]:
    return json.loads(REGISTRY_PATH.read_text())["models"]


def load_manifest() -> dict:
    p = MODELS_DIR / "manifest.json"
    if not p.exists():
        return {"models": {}}
    return json.loads(p.read_text())


DEFAULT_MODEL = next(m["name"] for m in load_registry() if m.get("default"))


def model_path(name: str = DEFAULT_MODEL) -> Path:
    """Path to a fetched model; fails the test with the fetch command if missing."""
    entry = load_manifest().get("models", {}).get(name)
    p = MODELS_DIR / (entry["file"] if entry else f"{name}.gguf")
    if not p.exists():
        pytest.fail(
            f"model '{name}' is missing ({p}); fetch it with: "
            f".venv/bin/python tools/fetch_models.py {name}",
            pytrace=False,
        )
    return p


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def models_dir() -> Path:
    return MODELS_DIR


@pytest.fixture(scope="session")
def manifest() -> dict:
    return load_manifest()


@pytest.fixture(scope="session")
def registry() -> list[dict]:
    return load_registry()


@pytest.fixture(scope="session")
def default_model_path() -> Path:
    return model_path(DEFAULT_MODEL)
