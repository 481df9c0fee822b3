"""zoo: vision backbones with swappable token mixers, for five tasks, with weights on the Hugging Face Hub.

    import zoo
    model = zoo.load("ea_vit_base", task="seg")
"""
from .mixers import list_mixers
from .registry import list_models, list_pretrained, load

__version__ = "0.1.0"

__all__ = ["list_mixers", "list_models", "list_pretrained", "load", "save_pretrained", "__version__"]


def save_pretrained(model, save_dir, **kwargs):
    """Write ``model`` as a published folder (model.safetensors, config.json, README.md); see ``zoo.hub``."""
    from .hub import save_pretrained as _save
    return _save(model, save_dir, **kwargs)
