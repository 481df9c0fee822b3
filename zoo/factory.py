"""``zoo.load``: a model for a task, with weights from a pretrained tag, a published folder or a local file.

This module sits on top of the others, which import each other in one direction only: ``zoo.checkpoint`` reads
and checks weights files; ``zoo.convert`` maps foreign layouts onto it; ``zoo.registry`` names and builds models;
``zoo.hub`` reads and writes published folders (using the registry); ``zoo.upstream`` fetches and converts upstream
files (using the hub's download); ``zoo.adapt`` changes a loaded model for other data (using the hub's argument
defaults). Nothing imports this module but ``zoo/__init__.py``.
"""
from . import adapt, convert, hub, registry, upstream
from . import pretrained as _pretrained


def load(name, task=None, pretrained=False, checkpoint=None, checkpoint_options=None, features_only=False,
         out_indices=None, **kwargs):
    """Build a model for a task, optionally with weights.

    Args:
        name: A registered name (``ea_vit_base``), a pretrained tag (``ea_vit_micro.seg_scenes``), or a published
            folder: ``hf-hub:org/name[@revision]`` or ``local-dir:/path``. Names are matched case-insensitively.
        task: ``cls``, ``seg``, ``gen``, ``pcls`` or ``pseg`` (long aliases accepted); default ``cls`` for a name.
            A tag or a published folder names its own task: another ``task`` is an error.
        pretrained: Load the registry's weights for this task (``True``) or a tag; never falls back to random
            weights. The checkout's ``pretrained/<tag>/`` folder is used first, then the Hub cache, then a download;
            the sha256 of the entry is checked on every path.
        checkpoint: A local weights file: zoo safetensors, a foreign layout that ``zoo.convert`` recognises, or an
            mmengine checkpoint written by ``tools/train.py`` for this model and task (its zoo model's weights are
            taken, the training state is dropped). Read by ``zoo.checkpoint``; every failure is a
            ``zoo.CheckpointError`` naming the file, the format it was read as and what is wrong.
        checkpoint_options: Options of ``zoo.convert.load_checkpoint``, e.g. ``dict(drop_head=True)`` to keep a
            fresh head for another ``num_classes``, ``dict(drop_distillation=True)`` for distilled DeiT weights.
        features_only: Return the classifier's trunk as a ``zoo.features.FeatureExtractor`` (timm's
            ``features_only``): ``forward`` gives the NCHW maps of the ``out_indices`` blocks (default four, evenly
            spread, ending with the last), ``feature_info`` their channels and reductions. Classifiers only.
        **kwargs: Task arguments, e.g. ``num_classes``, ``img_size``, ``in_chans``, ``patch_size``; and download
            options (``cache_dir``, ``force_download``, ``local_files_only``, ``endpoint``, ``token``). With
            pretrained weights, ``num_classes``, ``in_chans`` and ``img_size`` adapt them as timm does (a fresh
            classifier, the patch kernel over channels, the position embedding resampled; ``zoo.adapt``); any
            other argument must fit the weights.

    Returns:
        The ``nn.Module`` for the task (in train mode, as torch modules start). With weights from a tag or a
        published folder, ``model.pretrained_cfg`` describes them (input spec, labels, dataset, metrics, source).
    """
    task = registry.resolve_task(task.lower() if isinstance(task, str) else task) if task is not None else None
    if features_only or out_indices is not None:
        if not features_only:
            raise ValueError("out_indices selects the maps of features_only=True; pass both (or neither)")
        from .features import FeatureExtractor
        model = load(name, task=task, pretrained=pretrained, checkpoint=checkpoint,
                     checkpoint_options=checkpoint_options, **kwargs)
        if model.zoo_config.get("task") != "cls":
            raise ValueError(f"features_only takes a classifier's trunk; {name} is a {model.zoo_config.get('task')} "
                             f"model (a segmentor's backbone maps come from model.extract_feat)")
        return FeatureExtractor(model, out_indices=out_indices)
    if name.startswith(("hf-hub:", "local-dir:")):
        wanted = adapt.pop_adaptable(kwargs)
        model = hub.load_published(name, **kwargs)
        if task is not None and model.zoo_config["task"] != task:
            raise ValueError(f"{name} is a {model.zoo_config['task']} checkpoint, not {task}: drop task={task!r} "
                             f"(a published folder names its own task)")
        adapt.adapt(model, wanted, what=f"the weights of {name}")
        return model
    if _pretrained.looks_like_tag(name):  # a pretrained tag names its task: ff_vit_micro.cls_fmnist -> cls
        if pretrained not in (False, True):
            raise ValueError(f"{name!r} is already a tag; do not also pass pretrained={pretrained!r}")
        parsed = _pretrained.parse_tag(name)
        if task is not None and registry.resolve_task(parsed.task) != task:
            others = registry.list_pretrained(f"{parsed.model}.*", task=task)
            raise ValueError(f"tag {name!r} holds {parsed.task} weights, not {task}: drop task={task!r} or pick a "
                             f"{task} tag ({', '.join(others) or 'none'})")
        pretrained = str(registry.pretrained_cfg(name).tag)
    elif pretrained is True:  # resolve the tag before building, so a missing one fails fast
        pretrained = registry.find_pretrained(registry.canonical_name(name), task or "cls")
    elif pretrained:
        pretrained = registry.pretrained_cfg(pretrained).tag
    entry = None
    if pretrained:
        entry = registry.PRETRAINED[pretrained]
        parsed = _pretrained.parse_tag(pretrained)
        if task is not None and registry.resolve_task(parsed.task) != task:
            raise ValueError(f"pretrained={pretrained!r} holds {parsed.task} weights, not {task}")
        name, task = parsed.model, registry.resolve_task(parsed.task)
        # Download options (cache_dir, force_download, ...) go to the hub; the tag's architecture arguments
        # (e.g. num_classes=10, img_size=28, in_chans=1 for Fashion-MNIST) are the defaults of the build.
        hub_kwargs = {k: kwargs.pop(k) for k in hub.DOWNLOAD_OPTIONS if k in kwargs}
        wanted = adapt.pop_adaptable(kwargs)  # num_classes, in_chans, img_size: changed after loading (zoo.adapt)
        kwargs = {**entry.args, **kwargs}
    model = registry.build(registry.canonical_name(name), task=task or "cls", **kwargs)
    if entry is not None and entry.converter:  # upstream weights: downloaded, converted once, cached (zoo.upstream)
        upstream.load_upstream(model, entry, **hub_kwargs)
        model.pretrained_cfg = entry.to_dict()
    elif entry is not None:  # the zoo's own: a published folder (checkout, Hub cache or download)
        hub.load_pretrained_tag(model, entry, **hub_kwargs)
    if entry is not None:
        adapt.adapt(model, wanted, what=f"the weights of {entry.tag}")
    if checkpoint is not None:
        convert.load_checkpoint(model, checkpoint, **(checkpoint_options or {}))
    return model
