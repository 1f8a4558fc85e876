#!/usr/bin/env python3
"""Trains an EAGLE-3 draft head on tools/eagle3_data.py's data (CPU PyTorch).

Objective (EAGLE-3): at every response position, soft cross-entropy from the
target's next-token distribution restricted to the draft vocabulary to the
head's, over a training-time unroll of --ttt steps (the head's own output fed
back, tools/eagle3_head_torch.py), step j weighted 0.8^j. The target's
distribution is its output_norm + LM head applied here to the stored last
hidden state (weights read from the GGUF, dequantized by the `gguf` package).
Draft vocabulary: the --draft-vocab most frequent response tokens of the
data (then prompt tokens). Token embeddings: the target's, frozen.

Progress lines: tokens seen, loss, top-1 acceptance per unroll step on a
held-in validation split (every --val-every steps), time left. A checkpoint is
written atomically every --ckpt-minutes and at the end; --resume continues
one. With SPECDEC_QUIET_FILE set, waits while that file exists. Run it with
.venv-train/bin/python (scripts/setup.sh: Debian's python3-torch plus gguf and
safetensors).

    .venv-train/bin/python tools/eagle3_train.py --data out/eagle3/smollm2/data \
        --out out/eagle3/smollm2/train --max-tokens 2000000 --minutes 60
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eagle3_head_torch import Eagle3Head  # noqa: E402
from eagle3_target import TargetInfo, load_target  # noqa: E402

from quiet_file import wait_quiet as _wait_quiet  # noqa: E402
REPO = Path(__file__).resolve().parent.parent


def wait_quiet() -> None:
    _wait_quiet("train")


class Data:
    """The memory-mapped dumps of one or more data directories (features
    (N, 4, E) float16 and tokens (N,) each), read as one list of sequences;
    each sequence knows its directory ("part") and its data source
    (regenerated responses or as-is text: tools/eagle3_data.py --source)."""

    def __init__(self, dirs: list[Path]):
        self.parts, self.seqs = [], []
        self.man = None
        for k, d in enumerate(dirs):
            man = json.loads((d / "manifest.json").read_text())
            if self.man is None:
                self.man = dict(man)
                self.man["n_tokens"] = 0
            for key in ("model", "n_embd", "feature_layers"):
                if man[key] != self.man[key]:
                    raise SystemExit(f"error: {d} has {key} {man[key]!r}, {dirs[0]} has {self.man[key]!r}: "
                                     "one head trains on one target's features")
            N, E = man["n_tokens"], man["n_embd"]
            self.parts.append((np.memmap(d / "features.f16", dtype=np.float16, mode="r", shape=(N, 4, E)),
                               np.memmap(d / "tokens.i32", dtype=np.int32, mode="r", shape=(N,))))
            self.seqs += [{**s, "part": k, "source": s.get("source", "regen")} for s in man["sequences"]]
            self.man["n_tokens"] += N
        self.E = self.man["n_embd"]

    def rows(self, s: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The first n rows of sequence s: features (n, 4, E) and tokens (n,)."""
        feats, tokens = self.parts[s["part"]]
        o = s["offset"]
        return np.asarray(feats[o:o + n]), np.asarray(tokens[o:o + n])

    def all_tokens(self) -> np.ndarray:
        return np.concatenate([np.asarray(t) for _, t in self.parts])

    def response_tokens(self) -> int:
        return sum(s["n_tokens"] - s["n_prompt"] for s in self.seqs)


def draft_vocabulary(data: Data, n: int, n_vocab: int) -> np.ndarray:
    """The n most frequent response tokens (then prompt tokens, then lowest ids), ascending."""
    resp = np.zeros(n_vocab, dtype=np.int64)
    allc = np.zeros(n_vocab, dtype=np.int64)
    for s in data.seqs:
        t = data.rows(s, s["n_tokens"])[1]
        allc += np.bincount(t, minlength=n_vocab)
        resp += np.bincount(t[s["n_prompt"]:], minlength=n_vocab)
    # Lexicographic: response count, then overall count, then low id first.
    order = np.lexsort((np.arange(n_vocab), -allc, -resp))
    return np.sort(order[:n]).astype(np.int64)


def make_batches(seqs: list[dict], batch_tokens: int, rng: random.Random) -> list[list[dict]]:
    """Packs whole sequences (cut to batch_tokens) into batches of at most batch_tokens rows."""
    order = seqs[:]
    rng.shuffle(order)
    out, cur, used = [], [], 0
    for s in order:
        n = min(s["n_tokens"], batch_tokens)
        if cur and used + n > batch_tokens:
            out.append(cur)
            cur, used = [], 0
        cur.append(s)
        used += n
    if cur:
        out.append(cur)
    return out


def build_batch(data: Data, batch: list[dict], batch_tokens: int, steps: int, in_draft: np.ndarray):
    """Rows of the packed batch and, per unroll step j, which lanes carry loss:
    lane s's step-j row predicts position q = s + j + 1 of its sequence, which
    must exist, be one whose next token is a response token, and have that
    token (the target's greedy choice) in the draft vocabulary."""
    feats, toks, pos, seg, qidx = [], [], [], [], []
    for k, s in enumerate(batch):
        n = min(s["n_tokens"], batch_tokens)
        f_rows, t_rows = data.rows(s, n)
        feats.append(f_rows)
        toks.append(t_rows)
        pos.append(np.arange(n))
        seg.append(np.full(n, k))
        qidx.append(np.full(n, s["n_prompt"]))
    f = torch.from_numpy(np.concatenate(feats).astype(np.float32))  # (T, 4, E)
    t = np.concatenate(toks).astype(np.int64)
    p = np.concatenate(pos)
    sg = np.concatenate(seg)
    npr = np.concatenate(qidx)
    T = len(t)
    lens = np.concatenate([np.full(min(s["n_tokens"], batch_tokens), min(s["n_tokens"], batch_tokens))
                           for s in batch])
    tok_ext = np.concatenate([t, np.zeros(steps + 2, dtype=np.int64)])
    masks, targets_rows, next_tok = [], [], []
    for j in range(steps + 1):
        q = p + j + 1                    # position whose distribution lane s step j predicts
        ok = (q + 1 < lens) & (q + 1 >= npr)
        row = np.arange(T) + j + 1       # its row in the packed batch (same sequence when ok)
        nt = np.where(ok, tok_ext[np.minimum(row + 1, T + steps + 1)], 0)
        ok &= in_draft[nt]
        masks.append(torch.from_numpy(ok))
        targets_rows.append(torch.from_numpy(np.where(ok, row, 0)))
        next_tok.append(torch.from_numpy(nt))
    return (f[:, :3].reshape(T, -1), f[:, 3], torch.from_numpy(tok_ext), torch.from_numpy(p),
            torch.from_numpy(sg), masks, targets_rows, next_tok)


def step_losses(head: Eagle3Head, tgt: TargetInfo, batch, steps: int, t2d: torch.Tensor):
    """Per unroll step: (soft CE sum, n rows, top-1 hits) on the masked rows."""
    feats, last, tok_ext, pos, seg, masks, rows, next_tok = batch
    outs = head.unroll(feats, tok_ext, pos, seg, steps)
    # Each row's target distribution once: lane s step j and lane s + 1 step
    # j - 1 predict the same position.
    need = torch.zeros(last.shape[0], dtype=torch.bool)
    for j in range(steps + 1):
        need[rows[j][masks[j]]] = True
    p_all = torch.zeros(last.shape[0], tgt.draft_out.shape[0])
    with torch.no_grad():
        if need.any():
            p_all[need] = torch.softmax(tgt.draft_logits(last[need]), dim=-1)
    res = []
    for j, out in enumerate(outs):
        m = masks[j]
        n = int(m.sum())
        if n == 0:
            res.append((out.sum() * 0.0, 0, 0))
            continue
        logq = F.log_softmax(head.logits(out[m]), dim=-1)
        ce = -(p_all[rows[j][m]] * logq).sum()
        hits = int((logq.argmax(-1) == t2d[next_tok[j][m]]).sum())
        res.append((ce, n, hits))
    return res


def evaluate(head, tgt, data, val_batches, batch_tokens, steps, in_draft, t2d):
    """Validation sums per unroll step, (steps + 1, 3): soft CE, rows, top-1 hits."""
    head.eval()
    tot = np.zeros((steps + 1, 3))
    with torch.no_grad():
        for b in val_batches:
            for j, (ce, n, hits) in enumerate(step_losses(head, tgt, build_batch(data, b, batch_tokens, steps,
                                                                              in_draft), steps, t2d)):
                tot[j] += (float(ce), n, hits)
    head.train()
    return tot


def save_atomic(obj, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path, nargs="+",
                    help="eagle3_data.py output directories (one target), trained on as one set")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--model", help="target GGUF or manifest name (default: the data's)")
    ap.add_argument("--draft-vocab", type=int, default=16384)
    ap.add_argument("--n-ff", type=int, default=0, help="MLP width (0: the target's); smaller drafts cheaper")
    ap.add_argument("--ttt", type=int, default=3, help="unroll steps after the first (>= 2: EAGLE-3's 3+)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=50, help="optimizer steps of linear warmup")
    ap.add_argument("--clip", type=float, default=0.5)
    ap.add_argument("--batch-tokens", type=int, default=2048)
    ap.add_argument("--max-tokens", type=float, default=1e6, help="stop after this many training rows (all epochs)")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this much time (0: no limit)")
    ap.add_argument("--val-frac", type=float, default=0.05)
    ap.add_argument("--val-every", type=int, default=50, help="optimizer steps between validations")
    ap.add_argument("--ckpt-minutes", type=float, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init-from", type=Path,
                    help="start from this checkpoint's head and draft vocabulary (fresh optimizer and curve): "
                         "more data for a head already trained")
    ap.add_argument("--init-seen", type=int, default=0,
                    help="with --init-from: the first N sequences of the first --data directory trained that "
                         "head, so they never go to validation")
    ap.add_argument("--init-seen-dirs", type=int, default=0,
                    help="with --init-from: the first N --data directories trained (or validated) that head, so "
                         "all of them go to training and validation comes from the others only")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--export", type=Path, help="also write the head in the released layout here at the end")
    args = ap.parse_args(argv)
    if args.init_seen_dirs and not 0 < args.init_seen_dirs < len(args.data):
        ap.error(f"--init-seen-dirs {args.init_seen_dirs} must leave at least one of the "
                 f"{len(args.data)} --data directories for validation")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    data = Data(args.data)
    model = args.model or data.man["model"]
    tgt = load_target(model)
    ckpt_path = args.out / "checkpoint.pt"
    ck = torch.load(ckpt_path) if args.resume and ckpt_path.exists() else None
    init = torch.load(args.init_from) if args.init_from and ck is None else None
    if ck is not None or init is not None:
        draft_ids = (ck or init)["draft_ids"].numpy()
        cfg = (ck or init)["config"]
    else:
        draft_ids = draft_vocabulary(data, min(args.draft_vocab, tgt.n_vocab), tgt.n_vocab)
        cfg = {"hidden": tgt.n_embd, "target_hidden": tgt.n_embd, "n_head": tgt.n_head,
               "n_head_kv": tgt.n_head_kv, "n_ff": args.n_ff or tgt.n_ff, "draft_vocab": len(draft_ids),
               "eps": tgt.eps, "rope_theta": tgt.rope_theta, "ttt": args.ttt,
               "feature_layers": data.man["feature_layers"], "model": model}
    steps = cfg["ttt"]
    tgt.set_draft(draft_ids)
    in_draft = np.zeros(tgt.n_vocab, dtype=bool)
    in_draft[draft_ids] = True
    t2d = torch.full((tgt.n_vocab,), -1, dtype=torch.long)
    t2d[torch.from_numpy(draft_ids)] = torch.arange(len(draft_ids))
    head = Eagle3Head(**{k: cfg[k] for k in ("hidden", "target_hidden", "n_head", "n_head_kv", "n_ff",
                                             "draft_vocab", "eps", "rope_theta")}, embed=tgt.embed)
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    state = {"step": 0, "rows": 0, "epoch": 0, "batch_in_epoch": 0, "elapsed": 0.0, "curve": []}
    if ck is not None:
        head.load_state_dict(ck["head"])
        opt.load_state_dict(ck["opt"])
        state = ck["state"]
        print(f"[train] resumed at step {state['step']}, {state['rows']} rows", flush=True)
    elif init is not None:
        head.load_state_dict(init["head"])
        print(f"[train] head from {args.init_from} ({init['state']['rows']} rows trained)", flush=True)

    # Held-in validation: a fixed slice of the sequences, never trained on
    # (nor, with --init-seen, trained on by the head this run starts from).
    if args.init_seen_dirs:
        seen = [q for q in data.seqs if q["part"] < args.init_seen_dirs]
        seqs = [q for q in data.seqs if q["part"] >= args.init_seen_dirs]
    else:
        first = [q for q in data.seqs if q["part"] == 0]
        seen = first[:args.init_seen]
        seqs = first[args.init_seen:] + [q for q in data.seqs if q["part"] != 0]
    random.Random(1234).shuffle(seqs)
    n_val = max(1, int(len(seqs) * args.val_frac))
    val = seqs[:n_val]
    train = seqs[n_val:] + seen
    # Batched per data source, so each source's acceptance can be told apart
    # (what drafting meets is the target's own text: "regen").
    sources = sorted({q["source"] for q in val})
    val_batches = {src: make_batches([q for q in val if q["source"] == src], args.batch_tokens, random.Random(0))
                   for src in sources}
    cov = in_draft[data.all_tokens()].mean()
    print(f"[train] {len(train)} train / {len(val)} val sequences, {data.man['n_tokens']} tokens "
          f"({data.response_tokens()} response); draft vocabulary {len(draft_ids)} covers {cov:.3f} of tokens; "
          f"head H={cfg['hidden']} n_ff={cfg['n_ff']} ttt={steps}", flush=True)

    def checkpoint():
        save_atomic({"head": head.state_dict(), "opt": opt.state_dict(), "state": state, "config": cfg,
                     "draft_ids": torch.from_numpy(draft_ids)}, ckpt_path)

    def validate():
        by_src = {src: evaluate(head, tgt, data, bs, args.batch_tokens, steps, in_draft, t2d)
                  for src, bs in val_batches.items()}
        tot = sum(by_src.values())
        vl, va = tot[:, 0] / np.maximum(tot[:, 1], 1), tot[:, 2] / np.maximum(tot[:, 1], 1)
        point = {"rows": state["rows"], "step": state["step"], "val_loss": vl.tolist(), "val_acc": va.tolist(),
                 "elapsed_s": state["elapsed"]}
        line = (f"[train] val at {state['rows']} rows: loss " + " ".join(f"{x:.3f}" for x in vl)
                + " | top-1 acc per step " + " ".join(f"{x:.3f}" for x in va))
        if len(by_src) > 1:
            point["val_acc_by_source"] = {src: (t[:, 2] / np.maximum(t[:, 1], 1)).tolist() for src, t in by_src.items()}
            line += "".join(f" | {src} " + " ".join(f"{x:.3f}" for x in acc)
                            for src, acc in point["val_acc_by_source"].items())
        state["curve"].append(point)
        print(line, flush=True)

    if not state["curve"]:
        validate()  # the untrained head: the curve's first point
    t_start = time.time() - state["elapsed"]
    t_ckpt = time.time()
    t_quiet = time.time()
    weights = [0.8 ** j for j in range(steps + 1)]
    done = False
    while not done:
        batches = make_batches(train, args.batch_tokens, random.Random(args.seed * 1000 + state["epoch"]))
        for bi in range(state["batch_in_epoch"], len(batches)):
            if time.time() - t_quiet > 30:
                t0 = time.time()
                wait_quiet()
                t_start += time.time() - t0  # a pause is not training time
                t_quiet = time.time()
            b = build_batch(data, batches[bi], args.batch_tokens, steps, in_draft)
            res = step_losses(head, tgt, b, steps, t2d)
            n0 = max(res[0][1], 1)
            loss = sum(w * ce / max(n, 1) for w, (ce, n, _) in zip(weights, res))
            lr = args.lr * min(1.0, (state["step"] + 1) / max(args.warmup, 1))
            for grp in opt.param_groups:
                grp["lr"] = lr
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(head.parameters(), args.clip)
            opt.step()
            state["step"] += 1
            state["rows"] += int(b[0].shape[0])
            state["batch_in_epoch"] = bi + 1
            state["elapsed"] = time.time() - t_start
            el = state["elapsed"]
            rate = state["rows"] / max(el, 1e-9)
            left = (args.max_tokens - state["rows"]) / max(rate, 1e-9)
            if args.minutes:
                left = min(left, args.minutes * 60 - el)
            if state["step"] % 10 == 0:
                print(f"[train] step {state['step']} epoch {state['epoch']} rows {state['rows']} "
                      f"loss {float(loss):.3f} (step0 {float(res[0][0]) / n0:.3f}, acc0 {res[0][2] / n0:.3f}) "
                      f"{rate:.0f} rows/s, {max(left, 0) / 60:.1f} min left", flush=True)
            stop = state["rows"] >= args.max_tokens or (args.minutes and el >= args.minutes * 60)
            if state["step"] % args.val_every == 0 or stop:
                validate()
            if time.time() - t_ckpt > args.ckpt_minutes * 60 or stop:
                checkpoint()
                t_ckpt = time.time()
            if stop:
                done = True
                break
        else:
            state["epoch"] += 1
            state["batch_in_epoch"] = 0
    checkpoint()
    (args.out / "curve.json").write_text(json.dumps(state["curve"], indent=1))
    print(f"[train] done: {state['rows']} rows in {state['elapsed']:.0f} s "
          f"({state['rows'] / max(state['elapsed'], 1e-9):.0f} rows/s); checkpoint {ckpt_path}", flush=True)
    if args.export:
        from eagle3_export import export
        export(ckpt_path, args.export)
        print(f"[train] exported {args.export}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
