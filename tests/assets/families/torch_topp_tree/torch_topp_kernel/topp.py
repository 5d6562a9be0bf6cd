"""A pure-torch, sort-based top-p mask: the kernel of the test-only family ``torch-topp``.

Keeps the smallest prefix of tokens, in descending probability (stable sort: ties by
token id), whose probability mass before the token is below p; masks the rest with -inf.
Kept logits are returned unchanged.
"""

import torch


def top_p_mask(logits, k, p):
    if k is not None:
        raise ValueError("torch-topp has no top-k")
    probs = torch.softmax(logits.double(), dim=-1)
    ordered, order = probs.sort(dim=-1, descending=True, stable=True)
    before = ordered.cumsum(dim=-1) - ordered
    keep_sorted = before < p.double().unsqueeze(-1)
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))
