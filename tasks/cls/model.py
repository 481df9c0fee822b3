"""The mmengine model for image classification: a ``zoo.load(name, task='cls')`` classifier plus its loss.

Loss: cross-entropy with optional label smoothing (Szegedy et al., 2016) and optional Mixup (Zhang et al., 2018)
/ CutMix (Yun et al., 2019) batch mixing with soft targets, as in the DeiT recipe (Touvron et al., 2021).
"""
import numpy as np
import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from mmengine.registry import MODELS


def _labels(data_samples, device):
    """Integer labels (B,) from ``data_samples`` as collated (a dict of tensors, or a list of dicts)."""
    if data_samples is None:
        raise ValueError("mode 'loss' needs data_samples with 'gt_label'")
    if isinstance(data_samples, dict):
        return torch.as_tensor(data_samples["gt_label"], device=device).long().view(-1)
    return torch.as_tensor([int(s["gt_label"]) for s in data_samples], device=device)


class MixupCutmix:
    """Mix each image with the batch's mirror image (``x.flip(0)``), as timm's ``Mixup`` does in batch mode.

    With probability ``prob`` a batch is mixed; then CutMix (a box of area 1 - lam pasted from the partner) is
    chosen with probability ``switch_prob`` when both are enabled, else Mixup (pixel blend with weight lam).
    lam ~ Beta(alpha, alpha); CutMix's lam is corrected to the box's exact area after clipping.

    Args:
        mixup_alpha: Beta parameter of Mixup (0 disables Mixup).
        cutmix_alpha: Beta parameter of CutMix (0 disables CutMix).
        prob: Probability of mixing a batch.
        switch_prob: Probability of CutMix rather than Mixup when both are enabled.
    """

    def __init__(self, mixup_alpha=0.8, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5):
        self.mixup_alpha, self.cutmix_alpha, self.prob, self.switch_prob = mixup_alpha, cutmix_alpha, prob, switch_prob

    def __call__(self, x, target):
        """Mix ``x`` (B, C, H, W) and the soft ``target`` (B, K) in place of the batch; returns both."""
        if torch.rand(()).item() >= self.prob or (self.mixup_alpha <= 0 and self.cutmix_alpha <= 0):
            return x, target
        use_cutmix = self.cutmix_alpha > 0 and (self.mixup_alpha <= 0 or torch.rand(()).item() < self.switch_prob)
        alpha = self.cutmix_alpha if use_cutmix else self.mixup_alpha
        lam = float(torch.distributions.Beta(alpha, alpha).sample())
        partner = x.flip(0)
        if use_cutmix:
            h, w = x.shape[-2:]
            cut = np.sqrt(1.0 - lam)
            ch, cw = int(h * cut), int(w * cut)
            cy, cx = int(torch.randint(h, ())), int(torch.randint(w, ()))
            y0, y1 = max(cy - ch // 2, 0), min(cy + ch // 2, h)
            x0, x1 = max(cx - cw // 2, 0), min(cx + cw // 2, w)
            x = x.clone()
            x[..., y0:y1, x0:x1] = partner[..., y0:y1, x0:x1]
            lam = 1.0 - (y1 - y0) * (x1 - x0) / (h * w)
        else:
            x = x * lam + partner * (1.0 - lam)
        return x, target * lam + target.flip(0) * (1.0 - lam)


@MODELS.register_module()
class ZooClassifier(BaseModel):
    """A zoo classifier (``zoo.load(name, task='cls', ...)``) as an mmengine model.

    ``forward(inputs, data_samples, mode)``: ``inputs`` (B, C, H, W) normalised images; ``data_samples`` a dict
    with ``gt_label`` (B,) (as ``PackClsInputs`` + ``default_collate`` produce). ``mode='tensor'`` returns the
    logits, ``'loss'`` a dict with ``loss``, ``'predict'`` one dict per image with ``pred_score`` (softmax),
    ``pred_label`` and ``gt_label`` for the metrics.

    Args:
        name: Registered model name (``ea_vit_micro``) or pretrained tag; architecture numbers come from the zoo.
        num_classes, img_size, in_chans, patch_size: Passed to ``zoo.load`` when given; left out, they are the
            pretrained weights' own, else the zoo's defaults (1000, 224, 3, 16).
        pretrained: Start from the registry's weights (``zoo.load(pretrained=...)``); ``num_classes``,
            ``in_chans`` and ``img_size`` adapt them to the data (``zoo.adapt``: a fine-tuning start).
        checkpoint: Start from a local weights file (zoo safetensors or a layout ``zoo.convert`` knows).
        label_smoothing: Label smoothing of the cross-entropy.
        mixup: ``MixupCutmix`` arguments (dict) to mix training batches, or None.
        data_preprocessor: mmengine data preprocessor config (default: move to device only).
        init_cfg: Unused: the weights are set by ``zoo.load`` (see ``init_weights``).
        **model_kwargs: Further ``zoo.load`` arguments (``drop_path_rate``, ``mixer_options``, ...).
    """

    def __init__(self, name, num_classes=None, img_size=None, in_chans=None, patch_size=None, pretrained=False,
                 checkpoint=None, label_smoothing=0.0, mixup=None, data_preprocessor=None, init_cfg=None,
                 **model_kwargs):
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        import zoo
        given = dict(num_classes=num_classes, img_size=img_size, in_chans=in_chans, patch_size=patch_size)
        self.classifier = zoo.load(name, task="cls", pretrained=pretrained, checkpoint=checkpoint,
                                   **{k: v for k, v in given.items() if v is not None}, **model_kwargs)
        self.num_classes = self.classifier.num_classes
        self.label_smoothing = label_smoothing
        self.mixup = MixupCutmix(**mixup) if mixup else None

    @property
    def zoo_model(self):
        """The ``nn.Module`` ``zoo.load`` returned (with its ``zoo_config``), for ``tools/publish.py``."""
        return self.classifier

    def init_weights(self):
        """Keep the weights ``zoo.load`` set (random init, pretrained or checkpoint).

        ``BaseModule.init_weights`` would call the classifier's own ``init_weights`` again from the Runner and
        overwrite loaded weights.
        """

    def forward(self, inputs, data_samples=None, mode="tensor"):
        if mode == "tensor":
            return self.classifier(inputs)
        if mode == "loss":
            labels = _labels(data_samples, inputs.device)
            if self.mixup is None:
                logits = self.classifier(inputs)
                return dict(loss=F.cross_entropy(logits, labels, label_smoothing=self.label_smoothing))
            off = self.label_smoothing / self.num_classes
            target = torch.full((len(labels), self.num_classes), off, device=inputs.device)
            target.scatter_(1, labels[:, None], 1.0 - self.label_smoothing + off)  # smoothed one-hot (B, K)
            inputs, target = self.mixup(inputs, target)
            logits = self.classifier(inputs)
            return dict(loss=torch.sum(-target * F.log_softmax(logits, dim=-1), dim=-1).mean())
        if mode == "predict":
            scores = self.classifier(inputs).float().softmax(dim=-1)
            labels = _labels(data_samples, inputs.device) if data_samples is not None else None
            return [dict(pred_score=s, pred_label=int(s.argmax()),
                         gt_label=int(labels[i]) if labels is not None else None) for i, s in enumerate(scores)]
        raise ValueError(f"mode must be 'tensor', 'loss' or 'predict', got {mode!r}")
