"""What a KernelBench file may call that an older torch lacks, defined from PyTorch's documented
semantics so that the file imports and traces there (Debian's torch 1.13 on this machine and CI).
Installed only where torch has no such function; a newer torch's own is never replaced."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    # softmax(q k^T * scale + mask) v, scale 1/sqrt(E) by default; a causal mask keeps j <= i; a
    # boolean mask keeps where True, a float mask is added; dropout on the weights when p > 0.
    L, S = query.size(-2), key.size(-2)
    s = scale if scale is not None else 1.0 / math.sqrt(query.size(-1))
    w = torch.matmul(query, key.transpose(-2, -1)) * s
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        w = w.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            w = w.masked_fill(~attn_mask, float("-inf"))
        else:
            w = w + attn_mask
    w = torch.softmax(w, dim=-1)
    if dropout_p > 0:
        w = F.dropout(w, p=dropout_p, training=True)
    return torch.matmul(w, value)


def install() -> list[str]:
    """Defines what this torch lacks; returns the names defined."""
    added = []
    if not hasattr(F, "scaled_dot_product_attention"):
        F.scaled_dot_product_attention = _scaled_dot_product_attention
        added.append("torch.nn.functional.scaled_dot_product_attention")
    return added
