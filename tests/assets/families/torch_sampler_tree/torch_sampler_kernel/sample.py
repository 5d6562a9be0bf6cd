"""A pure-torch top-k then top-p sampler and mask: the kernel of the test-only family
``torch-sampler``. ``nucleus`` keeps the top-k tokens (stable descending sort: ties by id),
then the smallest prefix of them whose mass before the token is below p (renormalised over
the top-k tokens); ``sample`` draws ``draws`` tokens per row from that set with a seeded CPU
generator; ``mask`` returns the logits with everything outside the set at -inf.
"""

import torch


def nucleus(logits, k, p):
    probs = torch.softmax(logits.double(), dim=-1)
    ordered, order = probs.sort(dim=-1, descending=True, stable=True)
    ranks = torch.arange(logits.shape[-1]).expand_as(ordered)
    in_k = ranks < k.unsqueeze(-1)
    ordered = torch.where(in_k, ordered, torch.zeros_like(ordered))
    ordered = ordered / ordered.sum(dim=-1, keepdim=True)
    before = ordered.cumsum(dim=-1) - ordered
    keep_sorted = in_k & (before < p.double().unsqueeze(-1))
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def mask(logits, k, p):
    return logits.masked_fill(~nucleus(logits, k, p), float("-inf"))


def sample(logits, k, p, draws, seed):
    keep = nucleus(logits, k, p)
    weights = torch.softmax(logits.double().masked_fill(~keep, float("-inf")), dim=-1)
    generator = torch.Generator().manual_seed(seed)
    return torch.multinomial(weights, draws, replacement=True, generator=generator)
