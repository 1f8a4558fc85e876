"""The engine as another C++ project gets it: `cmake --install` of the release
build into a fresh prefix, examples/cpp configured with find_package(specdec)
against that prefix alone and built, and its greedy text compared with
`specdec generate`'s for the same prompt (the installed binary's and the
build tree's)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, model_path

SPECDEC_BIN = Path(os.environ.get("SPECDEC_BIN", REPO_ROOT / "build" / "release" / "specdec"))
BUILD_DIR = SPECDEC_BIN.parent
MODEL = "smollm2-135m-instruct-q4_1"
PUBLIC_HEADERS = ["engine.h", "request.h", "result.h", "errors.h", "decoding.h", "sampling.h", "chat.h"]


def sh(*cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kw)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    if not (BUILD_DIR / "CMakeCache.txt").exists() or not SPECDEC_BIN.exists():
        pytest.fail(f"{BUILD_DIR} is not a built tree: run scripts/build.sh release", pytrace=False)
    p = tmp_path_factory.mktemp("install") / "prefix"
    r = sh("cmake", "--install", BUILD_DIR, "--prefix", p)
    assert r.returncode == 0, r.stdout + r.stderr
    return p


def one(prefix: Path, pattern: str) -> Path:
    found = sorted(prefix.rglob(pattern))
    assert len(found) == 1, f"{pattern}: {found}"
    return found[0]


def test_install_holds_binary_library_headers_and_package(prefix):
    assert os.access(prefix / "bin" / "specdec", os.X_OK)
    lib = one(prefix, "libspecdec.a")
    # The archive holds the public API's implementation, not just the internals.
    nm = sh("nm", "-C", "--defined-only", lib)
    assert nm.returncode == 0, nm.stderr
    assert "specdec::Engine::generate(specdec::Request const&)" in nm.stdout
    for h in PUBLIC_HEADERS:
        assert (prefix / "include" / "specdec" / h).is_file(), h
    assert not (prefix / "include" / "specdec" / "runtime").exists()  # internals stay in the source tree
    cfg = one(prefix, "specdecConfig.cmake")
    assert (cfg.parent / "specdecConfigVersion.cmake").is_file()
    assert (cfg.parent / "specdecTargets.cmake").is_file()


@pytest.mark.parametrize("header", PUBLIC_HEADERS)
def test_each_public_header_compiles_alone(prefix, header, tmp_path):
    # Only the installed include/ on the path: a public header that reached
    # into src/ (or forgot an include of its own) fails here.
    src = tmp_path / "one.cpp"
    src.write_text(f"#include <specdec/{header}>\nint main() {{ return 0; }}\n")
    r = sh("c++", "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I", prefix / "include", src)
    assert r.returncode == 0, r.stderr


def configure(src: Path, build: Path, prefix: Path) -> subprocess.CompletedProcess:
    return sh("cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
              f"-DCMAKE_PREFIX_PATH={prefix}")


def test_find_package_refuses_another_version(prefix, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.25)\nproject(v LANGUAGES CXX)\n"
                                         "find_package(specdec 9.0 REQUIRED)\n")
    r = configure(proj, tmp_path / "build", prefix)
    assert r.returncode != 0
    assert "specdecConfigVersion.cmake" in r.stderr or "version" in r.stderr.lower(), r.stderr


def test_example_built_against_the_install_generates_the_clis_text(prefix, tmp_path):
    build = tmp_path / "example"
    r = configure(REPO_ROOT / "examples" / "cpp", build, prefix)
    assert r.returncode == 0, r.stdout + r.stderr
    r = sh("cmake", "--build", build)
    assert r.returncode == 0, r.stdout + r.stderr
    model = model_path(MODEL)
    prompt, n = "def add(a, b):\n    return a + b\n\ndef add3(a, b, c):\n    return", "24"
    ex = sh(build / "specdec_example", model, prompt, n, "2")
    assert ex.returncode == 0, ex.stderr
    assert "tokens per target forward" in ex.stderr
    for binary in (SPECDEC_BIN, prefix / "bin" / "specdec"):
        cli = sh(binary, "generate", "-m", model, "-p", prompt, "-n", n, "--temp", "0", "-t", "2", "--json")
        assert cli.returncode == 0, cli.stderr
        out = json.loads(cli.stdout)
        assert out["n_generated"] > 0
        assert ex.stdout == out["text"], (binary, ex.stdout, out["text"])
    # Bad input is the engine's error message and a non-zero exit, not a crash.
    bad = sh(build / "specdec_example", prefix / "missing.gguf", "hi")
    assert bad.returncode == 1 and "missing.gguf" in bad.stderr, bad.stderr
