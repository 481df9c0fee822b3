"""Score zoo weights with a task's config: the evaluation ``tools/test.py`` runs, for weights that ``zoo.load`` reads.

``evaluate(config, weights)`` builds the config's Runner (its test dataloader, pipeline and evaluator), puts the
weights into the Runner's model strictly, and runs the test loop. ``weights`` is what ``zoo.load`` accepts: a
pretrained tag (``ea_vit_micro.seg_scenes``; its config is the one it was trained with), ``local-dir:/path`` or
``hf-hub:org/name``, or a model already loaded. ``max_samples`` scores the first N evaluation samples only
(``FirstNSampler``), e.g. a fixed slice for a fast check.
"""
import copy
import os.path as osp
import tempfile

import numpy as np

from mmengine.dataset import DefaultSampler
from mmengine.registry import DATA_SAMPLERS

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# Config overrides for scoring a slice: the generator's slice is scored in the features of the small Fashion-MNIST
# classifier only (the 299x299 Inception costs minutes on a CPU; the full evaluation keeps it).
# ``_delete_`` replaces the config's evaluator list instead of merging a dict into it.
SLICE_OPTIONS = {"gen": {"test_evaluator": dict(_delete_=True, type="GenMetric", feature_net="fmnist-clf",
                                                 scores=("FID",), cache_reference=False)}}


@DATA_SAMPLERS.register_module()
class FirstNSampler(DefaultSampler):
    """The first ``num_samples`` indices of the dataset, in order (a fixed evaluation slice)."""

    def __init__(self, dataset, num_samples, **kwargs):
        kwargs.pop("shuffle", None)
        super().__init__(dataset, shuffle=False, **kwargs)
        self.num_samples = min(int(num_samples), len(dataset))
        self.total_size = self.num_samples

    def __iter__(self):
        return iter(range(self.num_samples)[self.rank::self.world_size])

    def __len__(self):
        return len(range(self.num_samples)[self.rank::self.world_size])


def config_of(weights):
    """The training config recorded for a tag, a published folder or a loaded model (``train_config`` /
    ``config.json``'s ``training_config``); a registered tag is looked up without loading its weights."""
    import zoo
    from zoo import hub, pretrained, registry
    if isinstance(weights, str) and weights.startswith("local-dir:"):
        name = hub.read_config(osp.join(weights[len("local-dir:"):], hub.CONFIG_NAME)).get("training_config")
    elif isinstance(weights, str) and pretrained.looks_like_tag(weights):
        name = registry.pretrained_cfg(weights).train_config
    else:  # hf-hub: the config comes with the download; or a model loaded already
        model = zoo.load(weights) if isinstance(weights, str) else weights
        name = (getattr(model, "pretrained_cfg", None) or {}).get("train_config")
    if not name:
        raise ValueError(f"{weights}: no training config is recorded; pass the config explicitly")
    return name if osp.isabs(name) else osp.join(ROOT, name)


def adopt_refine(cfg, model):
    """Copy a published segmentor's affinity refinement (``refine``: a head and a walk trained on the frozen
    segmentor after its recipe, ``python -m tasks.seg.affinity --save-refined``) into ``cfg.model``, so that the
    recipe's config builds the model that the folder holds. Nothing changes for any other model."""
    refine = getattr(model, "refine", None)
    if refine is not None and cfg.model.get("type") == "ZooEncoderDecoder":
        cfg.model.refine = dict(refine)


def build_runner(config, weights, work_dir=None, max_samples=None, cfg_options=None):
    """A Runner for ``config`` whose model holds ``weights`` (loaded strictly); see the module docstring."""
    import zoo
    from mmengine.config import Config

    import tasks.common  # noqa: F401  (registers the progress hook and the loaders)
    from tasks.common import cli
    model = zoo.load(weights) if isinstance(weights, str) else weights
    cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(copy.deepcopy(cfg_options))  # mmengine pops ``_delete_`` from what it is given
    adopt_refine(cfg, model)
    cfg.work_dir = work_dir or tempfile.mkdtemp(prefix="zoo-eval-")
    cfg.load_from = None
    cfg.launcher = "none"
    if max_samples is not None:
        sampler = dict(cfg.test_dataloader.get("sampler") or {})
        cfg.test_dataloader.sampler = dict(type="FirstNSampler", num_samples=int(max_samples),
                                           **{k: v for k, v in sampler.items() if k not in ("type", "shuffle")})
    runner = cli.build_runner(cfg)
    load_zoo_weights(runner, model, source=f"{weights} into the model of {config}")
    return runner


def zoo_model_of(runner, source):
    """The zoo model inside ``runner.model`` (DDP and TTA wrappers looked through); ``source`` names what needs it."""
    target = runner.model
    while not hasattr(target, "zoo_model") and hasattr(target, "module"):
        target = target.module
    if not hasattr(target, "zoo_model"):
        raise ValueError(f"{type(runner.model).__name__} exposes no zoo_model to load {source}")
    return target.zoo_model


def load_zoo_weights(runner, model, source="weights"):
    """Copy the weights of a zoo ``model`` strictly into the zoo model inside ``runner.model`` (DDP and TTA
    wrappers are looked through); a mismatch is ``zoo.checkpoint``'s ``WeightsMismatchError`` naming the missing,
    unexpected and mis-shaped keys."""
    from zoo import checkpoint, registry
    target = zoo_model_of(runner, source)
    have, want = (getattr(m, "zoo_config", {}).get("task") for m in (model, target))
    if have and want and have != want:  # e.g. a cls tag given to a seg config: say so instead of listing 56 keys
        name = target.zoo_config.get("name", "")
        tags = registry.list_pretrained(f"{name}.{want}_*") if name else []
        raise ValueError(f"{source} holds a {have!r} model but the config builds a {want!r} one; give weights of "
                         f"the same task" + (f" ({', '.join(tags)})" if tags else "") + ".")
    checkpoint.load_state_dict(target, dict(model.state_dict()), source, "zoo model")


def plain_metrics(metrics):
    """Metrics as plain JSON values: evaluators may return numpy scalars (mmseg's ``IoUMetric`` returns float32
    values rounded to 2 decimals). A numpy float becomes the shortest decimal that reads back as the same value of
    its own type (float32 86.88 as 86.88, not as the float64 86.87999725341797 that ``.item()`` gives)."""
    return {k: float(str(v)) if isinstance(v, np.floating) else v.item() if hasattr(v, "item") else v
            for k, v in metrics.items()}


def evaluate(config, weights, work_dir=None, max_samples=None, cfg_options=None):
    """Metrics (plain floats) of ``weights`` on ``config``'s evaluation split (the first ``max_samples`` of it)."""
    runner = build_runner(config, weights, work_dir, max_samples, cfg_options)
    return {k: float(v) for k, v in plain_metrics(runner.test()).items()}


def example_input(model, task, batch):
    """A fixed random input of the model's own size, from the constructor arguments its ``zoo_config`` records (what
    ``config.json`` stores, so a freshly built model and a loaded one get the same), as a tuple of positional
    arguments: images for cls and seg, points (and category 0) for pcls and pseg."""
    import torch
    from zoo import hub
    g = torch.Generator().manual_seed(0)
    zc = model.zoo_config
    args = hub.effective_args(zc["name"], task, zc["args"])
    if task in ("pcls", "pseg"):
        points = torch.randn(batch, args["num_points"], args.get("in_dims", 3), generator=g)
        return (points,) if task == "pcls" else (points, torch.zeros(batch, dtype=torch.long))
    size = args["img_size"]
    h, w = (size, size) if isinstance(size, int) else size
    return (torch.randn(batch, args.get("in_chans", 3), h, w, generator=g),)


def check_rebuilds(config, weights, atol=1e-4):
    """Fail unless ``zoo.load(weights)`` is the model that ``config`` evaluates with those weights.

    The scores of a checkpoint come from ``config``'s model holding its weights (``evaluate``), while users get what
    ``config.json`` rebuilds. A constructor choice the config makes that ``config.json`` does not record and that
    holds no weights (a neck's rescaling, say) loads without a key mismatch and scores far below the card. So both
    models run one fixed input and must agree (``same_model``). Returns the largest difference.
    """
    import zoo
    loaded = zoo.load(weights) if isinstance(weights, str) else weights
    runner = build_runner(config, loaded, max_samples=1)
    hint = ("Publish the folder again from the model the config builds (tools/make_weights.py --repack) so that "
            "config.json records the architecture.")
    return same_model(loaded, zoo_model_of(runner, f"{weights}"), f"{weights}", osp.relpath(config, ROOT), atol,
                      hint)


def same_model(loaded, built, loaded_name, built_name, atol=1e-4, hint=""):
    """Fail unless ``loaded`` (what ``zoo.load`` rebuilt from a published folder) and ``built`` (the model that was
    trained and scored) give the same outputs on one fixed input (a generator: 2 samples of seed 0), in eval mode,
    to ``atol`` (float rounding between two builds). Returns the largest difference; raises ``ValueError`` naming
    the ``zoo_config`` arguments that differ, and ``hint`` (what to do about it)."""
    import torch
    from zoo import hub
    loaded, built = loaded.eval(), built.eval()
    task = loaded.zoo_config["task"]
    with torch.no_grad():
        if task == "gen":
            a, b = loaded.sample(2, seed=0), built.sample(2, seed=0)
        else:
            x = example_input(loaded, task, 2)
            a, b = loaded(*x), built(*x)
    diff = (a.float() - b.float()).abs().max().item() if a.shape == b.shape else float("inf")
    if not diff <= atol:
        name = loaded.zoo_config["name"]
        mine = hub.effective_args(name, task, loaded.zoo_config["args"])
        theirs = hub.effective_args(name, task, built.zoo_config["args"])
        args = ", ".join(f"{k}: config.json {mine.get(k)!r} vs {built_name} {theirs.get(k)!r}"
                         for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k))
        raise ValueError(f"{loaded_name}: zoo.load rebuilds another model than {built_name} (outputs differ by "
                         f"{diff:.3g} on a fixed input; constructor arguments that differ: {args or 'none'}). "
                         + hint)
    return diff
