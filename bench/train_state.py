#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Real training state for the codec benchmarks: a small GPT trained a few AdamW steps on CPU.

Writes one raw little-endian file per kind into DIR, every parameter of the
model concatenated in the model's order:

  weights.f32   fp32 weights after the last step
  grads.f32     fp32 gradients of the last step (what backward() left)
  adam-m.f32    AdamW's exp_avg (first moment)
  adam-v.f32    AdamW's exp_avg_sq (second moment)
  weights.bf16  the weights rounded to bfloat16
  weights.f16   the weights rounded to float16

The text is the plain-text licenses Debian installs (/usr/share/common-licenses),
split into words that are hashed into a vocabulary, so that tokens are as skewed
as text makes them and some embedding rows are never used. Everything is seeded:
the same torch build gives the same bytes.

  /usr/bin/python3 bench/train_state.py DIR [--layers 6] [--width 384] [--steps 6] [--batch 4]

Needs Debian's python3-torch (apt), nothing from PyPI. Benchmarks and fixtures only;
CI never runs it.
"""
import argparse
import glob
import os
import re
import sys
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F


def corpus_tokens(vocab):
    words = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                words += re.findall(r"\w+|[^\w\s]", f.read())
    if len(words) < 10000:
        sys.exit("train_state: too little text under /usr/share/common-licenses")
    # crc32 is stable across runs and machines (Python's hash() is salted).
    return torch.tensor([zlib.crc32(w.lower().encode()) % vocab for w in words], dtype=torch.long)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, width, layers, heads, context):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        for m in self.modules():  # GPT-2's initialisation
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx):
        n = idx.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf")), 1)
        x = self.tokens(idx) + self.positions(torch.arange(n))
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    data = corpus_tokens(a.vocab)
    model = Gpt(a.vocab, a.width, a.layers, max(1, a.width // 64), a.context)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(a.seed)
    for step in range(a.steps):
        starts = torch.randint(0, len(data) - a.context - 1, (a.batch,), generator=gen)
        x = torch.stack([data[s:s + a.context] for s in starts])
        y = torch.stack([data[s + 1:s + a.context + 1] for s in starts])
        loss = F.cross_entropy(model(x).reshape(-1, a.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        print(f"step {step + 1}/{a.steps}: loss {loss.item():.3f}", file=sys.stderr)

    params = list(model.parameters())
    flat = lambda ts: torch.cat([t.detach().reshape(-1) for t in ts])
    weights = flat(params)
    kinds = {
        "weights.f32": weights,
        "grads.f32": flat(p.grad for p in params),
        "adam-m.f32": flat(opt.state[p]["exp_avg"] for p in params),
        "adam-v.f32": flat(opt.state[p]["exp_avg_sq"] for p in params),
        "weights.bf16": weights.to(torch.bfloat16),
        "weights.f16": weights.to(torch.float16),
    }
    os.makedirs(a.dir, exist_ok=True)
    assert sys.byteorder == "little"
    for name, t in kinds.items():
        # bf16 has no numpy type: its bits through int16.
        raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
        with open(os.path.join(a.dir, name), "wb") as f:
            f.write(raw.contiguous().numpy().tobytes())
    print(f"train_state: {weights.numel()} parameters, {a.steps} steps, files in {a.dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
