"""Image classification: the trunk with the DeiT head (final LayerNorm + Linear on the cls token).

Two backbone families: ``vit`` (conv patch embedding, ``zoo.backbones.vit``) and ``t2t`` (tokens-to-token front
end, ``zoo.backbones.t2t``; EAMLP). The family comes from the ``arch`` the registry passes, else from the
registry's record of the name (``{mixer}_{arch}_{size}``).
"""
from ..backbones import t2t
from ..backbones.vit import SIZES, VisionTransformer


def _arch_of(model_name, arch):
    if arch is not None:
        return arch
    from ..registry import MODELS  # the registry knows the parts of a name; unregistered names are vit
    return MODELS.get(model_name, {}).get("arch", "vit")


def build(model_name, task="cls", mixer="sa", size="tiny", num_classes=1000, img_size=224, in_chans=3,
          patch_size=16, arch=None, **kwargs):
    """Return the classifier of the given family, mixer and size.

    Args:
        model_name: Registered name, e.g. ``sa_vit_tiny`` or ``ea_t2t_7``.
        task: ``cls`` (accepted for the registry's common signature).
        mixer, size: From the registry.
        num_classes, img_size, in_chans: Head and input.
        patch_size: Patch side of the ``vit`` family (``t2t`` has a fixed reduction of 16 and accepts only 16).
        arch: Backbone family (``vit`` or ``t2t``); read from ``model_name`` when not given.
        **kwargs: Further arguments of the backbone class.
    """
    arch = _arch_of(model_name, arch)
    if arch == "t2t":
        return t2t.build(mixer=mixer, size=size, img_size=img_size, in_chans=in_chans, num_classes=num_classes,
                         patch_size=patch_size, **kwargs)
    if arch != "vit":
        raise ValueError(f"{model_name}: no classifier for backbone family {arch!r} (families: vit, t2t)")
    return VisionTransformer(mixer=mixer, img_size=img_size, patch_size=patch_size, in_chans=in_chans,
                             num_classes=num_classes, **SIZES[size], **kwargs)
