"""Token mixers: each maps tokens (B, N, C) to mixed tokens (B, N, C); the residual belongs to the block.

``build(name, dim=, num_heads=, num_tokens=None, **options)`` makes one; ``MIXERS`` is the plain table behind it.
"""
import difflib

from .ea import ExternalAttention
from .effa import EfficientAttention
from .ff import FeedForwardMixer
from .sa import SelfAttention

MIXERS = {
    "sa": SelfAttention,
    "ea": ExternalAttention,
    "effa": EfficientAttention,
    "ff": FeedForwardMixer,
}

PAPERS = {
    "sa": "Dosovitskiy et al., An Image is Worth 16x16 Words (ICLR 2021); Touvron et al., DeiT (ICML 2021)",
    "ea": "Guo et al., Beyond Self-attention: External Attention using Two Linear Layers for Visual Tasks (2021)",
    "effa": "Shen et al., Efficient Attention: Attention with Linear Complexities (WACV 2021)",
    "ff": "Melas-Kyriazi, Do You Even Need Attention? A Stack of Feed-Forward Layers Does Surprisingly Well "
          "on ImageNet (2021)",
}


def list_mixers():
    """Return ``{code: paper}`` for every mixer."""
    return dict(PAPERS)


def get(name):
    """Return the mixer class for ``name``; an unknown name lists the close matches."""
    try:
        return MIXERS[name]
    except KeyError:
        close = difflib.get_close_matches(name, MIXERS, n=3, cutoff=0.3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown mixer {name!r}; available: {', '.join(MIXERS)}.{hint}") from None


def build(name, dim, num_heads, num_tokens=None, **options):
    """Build the mixer ``name`` for width ``dim`` with ``num_heads`` heads (``num_tokens`` for ``ff``)."""
    return get(name)(dim=dim, num_heads=num_heads, num_tokens=num_tokens, **options)
