"""Point-cloud classification (``pcls``) and part segmentation (``pseg``) on the mixer trunk.

The tokenizer is PCT's neighbour embedding (Guo et al., "PCT: Point Cloud Transformer", CVMJ 2021,
https://arxiv.org/abs/2012.09688; see ``zoo.layers.points``); its tokens, in Morton order, go through the same
blocks as the image models (``zoo.backbones.vit.build_blocks``)::

    points (B, N, in_dims) -> PointTokenizer -> tokens (B, M, D) -> blocks x depth -> LayerNorm
      pcls: [max | mean] over tokens -> Linear-BN-ReLU-Dropout x 2 -> Linear -> logits (B, num_classes)
      pseg: per point [tokens interpolated from the 3 nearest centres (inverse squared distance, PointNet++)
            | earlier grouping stages' features, interpolated alike | point embedding | pooled tokens
            | category embedding (one-hot -> Linear-BN-LeakyReLU, as PCT)]
            -> Linear-BN-ReLU-Dropout -> Linear-BN-ReLU -> Linear -> logits (B, N, num_classes)

Sizes come from ``SIZES``; the tokenizer widths are PCT's (64, 128, 256) except ``micro`` (32, 64, 128). By
default the two stages sample ``num_points // 2`` and ``num_points // 4`` centres (512 and 256 for 1024 points),
k = 32; the tokens are the last stage's centres (the ``ff`` mixer is built for that many tokens).
"""
import torch
import torch.nn as nn

from ..backbones.vit import SIZES, GradCheckpointing, build_blocks, init_trunk
from ..layers.points import LinearBN, PointTokenizer, interpolate

PCT_WIDTHS = (64, 128, 256)  # the tokenizer widths of every size but the ones named in WIDTHS
WIDTHS = {"micro": (32, 64, 128)}


class PointTransformer(GradCheckpointing, nn.Module):
    """Tokenizer + trunk shared by the point heads.

    Args:
        mixer: Mixer code.
        in_dims: Input channels per point (3: xyz, 6: xyz + normals).
        num_points: Points per cloud the model is built for (sets the default ``stages``).
        stages: Centres per grouping stage (default ``(num_points // 2, num_points // 4)``).
        k: Neighbours per centre.
        widths: Tokenizer widths (point embedding, then one per stage).
        embed_dim, depth, num_heads: Trunk size (``SIZES``).
        mlp_ratio, drop_rate, drop_path_rate, mixer_options: As ``build_blocks``.
    """

    def __init__(self, mixer="sa", in_dims=3, num_points=1024, stages=None, k=32, widths=(64, 128, 256),
                 embed_dim=192, depth=12, num_heads=3, mlp_ratio=4.0, drop_rate=0.0, drop_path_rate=0.0,
                 mixer_options=None):
        super().__init__()
        stages = tuple(stages) if stages is not None else (num_points // 2, num_points // 4)
        if stages[0] > num_points:
            raise ValueError(f"the first stage samples {stages[0]} centres but the model is built for "
                             f"num_points={num_points}; use stages with at most {num_points} centres")
        self.mixer_name, self.in_dims, self.num_points = mixer, in_dims, num_points
        self.num_features = self.embed_dim = embed_dim
        self.tokenizer = PointTokenizer(in_dims, embed_dim, stages=stages, k=k, widths=widths)
        self.num_tokens = self.tokenizer.num_tokens
        self.blocks = build_blocks(embed_dim, depth, num_heads, mixer=mixer, num_tokens=self.num_tokens,
                                   mlp_ratio=mlp_ratio, drop_rate=drop_rate, drop_path_rate=drop_path_rate,
                                   mixer_options=mixer_options)
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        init_trunk(self.blocks)

    def forward_features(self, points):
        """(B, N, in_dims) -> normalised tokens (B, M, D), centres (B, M, 3), point features (B, N, C0) and the
        earlier grouping stages ``[(centres, features)]`` (see ``PointTokenizer.forward``)."""
        x, centres, point_feats, levels = self.tokenizer(points)
        for blk in self.blocks:
            x = self._run_block(blk, x)
        return self.norm(x), centres, point_feats, levels

    @staticmethod
    def pool(tokens):
        """Order-free pooling of tokens: [max | mean] (B, 2D)."""
        return torch.cat([tokens.amax(dim=1), tokens.mean(dim=1)], dim=-1)

    @torch.jit.ignore
    def no_weight_decay(self):
        return set()

    def reset_classifier(self, num_classes):
        """Replace the head's last layer with a fresh one for ``num_classes`` (the hidden layers are kept)."""
        last = self.head[-1]
        self.head[-1] = nn.Linear(last.in_features, num_classes).to(last.weight)
        self.num_classes = num_classes


def _mlp_head(in_dim, hidden, out_dim, drop):
    layers = []
    for h in hidden:
        layers += [LinearBN(in_dim, h), nn.Dropout(drop)]
        in_dim = h
    return nn.Sequential(*layers, nn.Linear(in_dim, out_dim))


class PointClassifier(PointTransformer):
    """Point-cloud classifier: (B, N, in_dims) -> logits (B, num_classes).

    Args:
        num_classes: Classes (ModelNet40: 40).
        head_hidden: Hidden widths of the head MLP (PCT: 512, 256).
        head_drop: Dropout of the head MLP (PCT: 0.5).
        **kwargs: ``PointTransformer`` arguments.
    """

    def __init__(self, num_classes=40, head_hidden=(512, 256), head_drop=0.5, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.head = _mlp_head(2 * self.embed_dim, head_hidden, num_classes, head_drop)

    def forward_head(self, tokens, pre_logits=False):
        x = self.pool(tokens)
        return x if pre_logits else self.head(x)

    def forward(self, points):
        return self.forward_head(self.forward_features(points)[0])


class PointSegmenter(PointTransformer):
    """Part segmenter: (points (B, N, in_dims), category (B,)) -> per-point logits (B, N, num_classes).

    Args:
        num_classes: Parts over all categories (ShapeNetPart: 50).
        num_categories: Object categories (ShapeNetPart: 16); ``category`` indexes them.
        head_hidden: Hidden widths of the per-point MLP.
        head_drop: Dropout after the first hidden layer (PCT: 0.5).
        **kwargs: ``PointTransformer`` arguments.
    """

    def __init__(self, num_classes=50, num_categories=16, head_hidden=(256, 128), head_drop=0.5, **kwargs):
        super().__init__(**kwargs)
        self.num_classes, self.num_categories = num_classes, num_categories
        self.category_embed = nn.Sequential(nn.Linear(num_categories, 64, bias=False), nn.BatchNorm1d(64),
                                            nn.LeakyReLU(0.2))
        widths = [g.conv2.linear.out_features for g in self.tokenizer.groups[:-1]]
        in_dim = self.embed_dim * 3 + self.tokenizer.point_embed[-1].linear.out_features + sum(widths) + 64
        layers = []
        for i, h in enumerate(head_hidden):
            layers += [LinearBN(in_dim, h)] + ([nn.Dropout(head_drop)] if i == 0 else [])
            in_dim = h
        self.head = nn.Sequential(*layers, nn.Linear(in_dim, num_classes))

    def forward(self, points, category):
        category = torch.as_tensor(category, device=points.device).long().view(-1)
        if category.numel() != points.shape[0]:
            raise ValueError(f"category must hold one id per cloud: got {category.numel()} ids for "
                             f"{points.shape[0]} clouds")
        if category.numel() and (category.min() < 0 or category.max() >= self.num_categories):
            bad = category[(category < 0) | (category >= self.num_categories)].tolist()
            raise ValueError(f"category ids {bad} are out of range: this model has {self.num_categories} "
                             f"categories (0..{self.num_categories - 1})")
        tokens, centres, point_feats, levels = self.forward_features(points)
        B, N = points.shape[:2]
        xyz = points[..., :3]
        per_point = [interpolate(xyz, c, f) for c, f in [(centres, tokens)] + levels]  # (B, N, D), (B, N, C_i)
        onehot = nn.functional.one_hot(category, self.num_categories).to(points.dtype)
        glob = torch.cat([self.pool(tokens), self.category_embed(onehot)], dim=-1)  # (B, 2D + 64)
        x = torch.cat(per_point + [point_feats, glob.unsqueeze(1).expand(B, N, -1)], dim=-1)
        return self.head(x)  # (B, N, num_classes)


def build(model_name, task="pcls", mixer="sa", size="tiny", num_classes=None, num_points=1024, in_dims=3,
          num_categories=16, **kwargs):
    """Return the point model of ``task`` (``pcls`` or ``pseg``) for a mixer and size.

    Args:
        model_name: Registered name (for messages).
        task: ``pcls`` (classifier) or ``pseg`` (part segmenter).
        num_classes: Classes (default 40) or parts (default 50).
        num_points: Points per cloud (sets the grouping stages: ``num_points // 2``, ``num_points // 4``).
        in_dims: 3 (xyz) or 6 (xyz + normals).
        num_categories: Object categories of the segmenter (default 16).
        **kwargs: ``stages``, ``k``, ``widths``, ``drop_path_rate``, ``head_hidden``, ... (plain JSON values).
    """
    size_args = dict(SIZES[size])
    kwargs.setdefault("widths", WIDTHS.get(size, PCT_WIDTHS))
    if task == "pcls":
        return PointClassifier(mixer=mixer, num_classes=num_classes or 40, num_points=num_points, in_dims=in_dims,
                               **size_args, **kwargs)
    if task == "pseg":
        return PointSegmenter(mixer=mixer, num_classes=num_classes or 50, num_categories=num_categories,
                              num_points=num_points, in_dims=in_dims, **size_args, **kwargs)
    raise ValueError(f"zoo.heads.points builds tasks 'pcls' and 'pseg', not {task!r} (model {model_name})")
