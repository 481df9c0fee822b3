"""mmengine wrappers of the zoo point models (registered in mmengine's ``MODELS``).

Each wraps the ``nn.Module`` that ``zoo.load(name, task=...)`` returns and exposes it as ``zoo_model`` (with
its ``zoo_config``), so ``tools/publish.py`` can extract the weights from a training checkpoint.
"""
import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from mmengine.registry import MODELS

import zoo


def _vote_scales(vote, scale, batch, device, seed=0):
    """(vote, B, 1, 3) per-axis scales for test-time voting, drawn from a fixed seed (reproducible)."""
    g = torch.Generator().manual_seed(seed)
    s = torch.empty(vote, batch, 1, 3).uniform_(scale[0], scale[1], generator=g)
    s[0] = 1.0  # the first pass is the plain one
    return s.to(device)


def _scaled(points, s):
    """Scale xyz by ``s`` (B, 1, 3); normals (columns 3:6) follow (n / s, renormalised)."""
    out = points.clone()
    out[..., :3] = points[..., :3] * s
    if points.shape[-1] >= 6:
        out[..., 3:6] = F.normalize(points[..., 3:6] / s, dim=-1)
    return out


class _ZooPointModel(BaseModel):
    task = None

    def __init__(self, name, label_smoothing=0.2, vote=1, vote_scale=(0.8, 1.25), pretrained=False,
                 checkpoint=None, data_preprocessor=None, init_cfg=None, **model_args):
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.model = zoo.load(name, task=self.task, pretrained=pretrained, checkpoint=checkpoint, **model_args)
        self.label_smoothing, self.vote, self.vote_scale = label_smoothing, int(vote), tuple(vote_scale)

    @property
    def zoo_model(self):
        """The ``nn.Module`` ``zoo.load`` returns for this task (carries ``zoo_config``)."""
        return self.model

    def init_weights(self):
        pass  # the zoo model initialises itself (and may hold loaded weights): never overwrite them


@MODELS.register_module()
class ZooPointClassifier(_ZooPointModel):
    """Point-cloud classifier for the Runner: ``inputs`` (B, N, D), ``data_samples`` dict(label (B,)).

    Args:
        name: Registered model name (``ea_vit_micro``); keyword arguments of ``zoo.load`` (``num_classes``,
            ``num_points``, ``in_dims``, ``k``, ...) pass through.
        label_smoothing: Cross-entropy label smoothing (PCT: 0.2).
        vote: Test passes averaged (softmax) over random anisotropic scalings in ``vote_scale`` (1: PCT protocol,
            one pass).
    """

    task = "pcls"

    def forward(self, inputs, data_samples=None, mode="tensor"):
        if mode == "loss":
            logits = self.model(inputs)
            return dict(loss=F.cross_entropy(logits, data_samples["label"], label_smoothing=self.label_smoothing))
        if mode == "tensor":
            return self.model(inputs)
        if mode != "predict":
            raise ValueError(f"unknown mode {mode!r}")
        probs = 0
        for s in _vote_scales(self.vote, self.vote_scale, inputs.shape[0], inputs.device):
            probs = probs + self.model(_scaled(inputs, s) if self.vote > 1 else inputs).softmax(-1)
        preds = probs.argmax(-1)
        labels = data_samples["label"] if data_samples is not None else preds
        return [dict(pred=int(p), label=int(y), scores=sc) for p, y, sc in zip(preds, labels, probs / self.vote)]


@MODELS.register_module()
class ZooPartSegmenter(_ZooPointModel):
    """Part segmenter for the Runner: ``inputs`` (B, N, D), ``data_samples`` dict(seg (B, N), category (B,)).

    Args: as ``ZooPointClassifier`` (``num_classes``, ``num_categories`` pass through to ``zoo.load``).
    """

    task = "pseg"

    def forward(self, inputs, data_samples=None, mode="tensor"):
        if data_samples is None or "category" not in data_samples:
            raise ValueError("ZooPartSegmenter needs data_samples['category'] (one category id per cloud)")
        category = data_samples["category"]
        if mode == "loss":
            logits = self.model(inputs, category)  # (B, N, P)
            loss = F.cross_entropy(logits.flatten(0, 1), data_samples["seg"].flatten(),
                                   label_smoothing=self.label_smoothing)
            return dict(loss=loss)
        if mode == "tensor":
            return self.model(inputs, category)
        if mode != "predict":
            raise ValueError(f"unknown mode {mode!r}")
        probs = 0
        for s in _vote_scales(self.vote, self.vote_scale, inputs.shape[0], inputs.device):
            probs = probs + self.model(_scaled(inputs, s) if self.vote > 1 else inputs, category).softmax(-1)
        probs = (probs / self.vote).cpu()
        return [dict(seg_logits=p, seg=g.cpu(), category=int(c))
                for p, g, c in zip(probs, data_samples["seg"], category)]
