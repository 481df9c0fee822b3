"""Feature maps of chosen blocks: timm's ``features_only`` for the zoo's classifiers.

    feats = zoo.load("sa_vit_base.cls_in1k", features_only=True, out_indices=(2, 5, 8, 11))
    maps = feats(x)                         # list of (B, 768, H/16, W/16), one per index
    feats.feature_info.channels()           # [768, 768, 768, 768]; .reduction() -> [16, 16, 16, 16]

The extractor keeps the trunk up to the last block it reads (later blocks and the classifier are dropped, as timm's
``prune_intermediate_layers`` does) and returns the blocks' patch tokens as NCHW maps (``forward_intermediates``).
"""
import torch.nn as nn

__all__ = ["FeatureExtractor", "FeatureInfo", "default_out_indices"]


def default_out_indices(depth, num_outs=4):
    """Blocks evenly spread, ending at the last: (2, 5, 8, 11) for depth 12 (mmseg's ViT); the seg necks' default."""
    if depth < num_outs:
        raise ValueError(f"a trunk of depth {depth} cannot give {num_outs} distinct intermediate layers")
    return [(i + 1) * depth // num_outs - 1 for i in range(num_outs)]


class FeatureInfo:
    """What each returned map is (timm's ``FeatureInfo``): ``channels()``, ``reduction()``, ``module_name()``, and
    ``get_dicts()``, one dict per map (``num_chs``, ``reduction``, ``module``, ``index``)."""

    def __init__(self, dicts):
        self.info = [dict(d) for d in dicts]

    def get_dicts(self):
        return [dict(d) for d in self.info]

    def channels(self, idx=None):
        return self._get("num_chs", idx)

    def reduction(self, idx=None):
        return self._get("reduction", idx)

    def module_name(self, idx=None):
        return self._get("module", idx)

    def _get(self, key, idx):
        if idx is None:
            return [d[key] for d in self.info]
        return self.info[idx][key]

    def __len__(self):
        return len(self.info)

    def __repr__(self):
        return f"FeatureInfo({self.info})"


class FeatureExtractor(nn.Module):
    """Maps of the ``out_indices`` blocks of a zoo classifier (``zoo.load(..., features_only=True)``).

    Args:
        model: A zoo classifier (``vit`` or ``t2t`` family: ``blocks``, ``forward_intermediates``, ``feature_info``).
        out_indices: Block indices (negatives count from the end); default ``default_out_indices(depth)``.
        norm: Apply the trunk's final LayerNorm to every map (timm's ``norm=True`` of ``forward_intermediates``).

    ``pretrained_cfg`` and ``zoo_config`` of the model are kept, so ``zoo.preprocess`` prepares its inputs.
    """

    def __init__(self, model, out_indices=None, norm=False):
        super().__init__()
        if not (hasattr(model, "blocks") and hasattr(model, "forward_intermediates")):
            raise ValueError(f"features_only needs a classifier trunk with blocks; {type(model).__name__} has none "
                             f"(task='cls' models of the vit and t2t families have them)")
        depth = len(model.blocks)
        wanted = default_out_indices(depth) if out_indices is None else tuple(out_indices)
        bad = [i for i in wanted if not -depth <= i < depth]
        if bad or not wanted:
            raise ValueError(f"out_indices {tuple(wanted)} do not fit a trunk of {depth} blocks: use 0..{depth - 1} "
                             f"or -{depth}..-1")
        self.out_indices = tuple(sorted({i % depth for i in wanted}))
        self.norm = bool(norm)
        last = max(self.out_indices)
        model.blocks = model.blocks[:last + 1]  # what no map reads is dropped, as are the classifier and its pooling
        model.head = nn.Identity()
        if not self.norm:
            model.norm = nn.Identity()
        self.trunk = model
        self.feature_info = FeatureInfo(dict(model.feature_info[i], index=i) for i in self.out_indices)
        self.pretrained_cfg = getattr(model, "pretrained_cfg", None)
        config = dict(getattr(model, "zoo_config", None) or {})
        self.zoo_config = dict(config, features_only=dict(out_indices=list(self.out_indices), norm=self.norm))

    def forward(self, x):
        """(B, C, H, W) -> list of (B, D, h, w) maps, in ``out_indices`` order."""
        return self.trunk.forward_intermediates(x, indices=self.out_indices, norm=self.norm, output_fmt="NCHW",
                                                intermediates_only=True)
