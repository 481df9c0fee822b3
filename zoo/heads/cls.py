"""Image classification: the trunk with the DeiT head (final LayerNorm + Linear on the cls token)."""
from ..backbones.vit import SIZES, VisionTransformer


def build(model_name, task="cls", mixer="sa", size="tiny", num_classes=1000, img_size=224, in_chans=3,
          patch_size=16, **kwargs):
    """Return a ``VisionTransformer`` classifier of the given mixer and size."""
    return VisionTransformer(mixer=mixer, img_size=img_size, patch_size=patch_size, in_chans=in_chans,
                             num_classes=num_classes, **SIZES[size], **kwargs)
