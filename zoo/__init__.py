"""zoo: vision backbones with swappable token mixers, for five tasks, with weights on the Hugging Face Hub.

    import zoo
    model = zoo.load("ea_vit_base", task="seg")
    x = zoo.preprocess(images, model)  # PIL images / arrays -> the normalised batch the weights expect
"""
from .checkpoint import CheckpointError
from .data import preprocess, resolve_data_config
from .factory import load
from .hub import save_pretrained
from .mixers import list_mixers
from .registry import list_models, list_pretrained

__version__ = "0.1.0"

__all__ = ["CheckpointError", "list_mixers", "list_models", "list_pretrained", "load", "preprocess",
           "resolve_data_config", "save_pretrained", "__version__"]
