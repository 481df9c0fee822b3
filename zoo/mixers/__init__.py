"""Token mixers: each maps tokens (B, N, C) to mixed tokens (B, N, C); the residual belongs to the block.

A mixer is a class with one contract: ``Mixer(dim, num_heads, num_tokens=None, **options)`` and
``forward(x: (B, N, C)) -> (B, N, C)``, its options plain JSON values (so a published ``config.json`` rebuilds it).
It describes itself in class attributes read by the registry, the CLI and the model cards: ``code``, ``paper``,
``arxiv``, ``summary``, ``citation`` (BibTeX); optional ``mixer_first = False`` / ``has_norm = True`` change the
block's order and norm (``ff``).

The trunk takes a mixer as a class (like timm's ``attn_layer``) or as a code of ``MIXERS``. ``register`` adds a
mixer under a code; ``zoo.registry.register_mixer`` also registers its model names (``{code}_vit_{size}``)::

    class PoolMixer(nn.Module):
        code, paper = "pool", "Yu et al., MetaFormer Is Actually What You Need for Vision (CVPR 2022)"
        def __init__(self, dim, num_heads, num_tokens=None): ...
        def forward(self, x): ...

    zoo.registry.register_mixer(PoolMixer)
    model = zoo.load("pool_vit_micro", task="seg")
"""
import difflib

from .ea import ExternalAttention
from .effa import EfficientAttention
from .ff import FeedForwardMixer
from .sa import SelfAttention

# code -> class: the plain table behind ``get`` / ``build`` (filled here and by ``register`` only).
MIXERS = {cls.code: cls for cls in (SelfAttention, ExternalAttention, EfficientAttention, FeedForwardMixer)}

INFO_FIELDS = ("paper", "arxiv", "summary", "citation")


def register(cls, code=None):
    """Add mixer class ``cls`` under ``code`` (default ``cls.code``); an existing code is never replaced."""
    code = code or getattr(cls, "code", None)
    if not code or not isinstance(code, str) or not code.isidentifier() or "_" in code:
        raise ValueError(f"a mixer needs a code of letters and digits (no '_': model names are "
                         f"{{mixer}}_{{arch}}_{{size}}), got {code!r}; set {cls.__name__}.code or pass code=")
    if code in MIXERS and MIXERS[code] is not cls:
        raise ValueError(f"mixer code {code!r} is taken by {MIXERS[code].__name__}; choose another code")
    MIXERS[code] = cls
    return cls


def get(mixer):
    """The mixer class for a code (or a class, returned as is); an unknown code lists the close matches."""
    if isinstance(mixer, type):
        return mixer
    try:
        return MIXERS[mixer]
    except KeyError:
        close = difflib.get_close_matches(str(mixer), MIXERS, n=3, cutoff=0.3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown mixer {mixer!r}; available: {', '.join(MIXERS)}.{hint}") from None


def info(mixer):
    """``{paper, arxiv, summary, citation}`` of a mixer (missing attributes are ``None``)."""
    cls = get(mixer)
    return {k: getattr(cls, k, None) for k in INFO_FIELDS}


def list_mixers():
    """``{code: paper}`` for every mixer."""
    return {code: getattr(cls, "paper", None) or cls.__name__ for code, cls in MIXERS.items()}


def build(mixer, dim, num_heads, num_tokens=None, **options):
    """Build ``mixer`` (a code or a class) for width ``dim`` with ``num_heads`` heads (``num_tokens`` for ``ff``)."""
    return get(mixer)(dim=dim, num_heads=num_heads, num_tokens=num_tokens, **options)
