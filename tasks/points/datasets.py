"""Readers for the real point-cloud benchmark layouts (formats in docs/points.md and below).

- ``ModelNet40H5``: ``modelnet40_ply_hdf5_2048/ply_data_{train,test}N.h5`` (keys ``data`` (S, 2048, 3) float32,
  ``label`` (S, 1) uint8, optional ``normal``), ``shape_names.txt``, ``{train,test}_files.txt`` whose entries
  carry a ``data/...`` prefix (matched by file name). Wu et al., "3D ShapeNets" (CVPR 2015); HDF5 release of
  Qi et al., PointNet (CVPR 2017).
- ``ModelNet40Normal``: ``modelnet40_normal_resampled/<class>/<class>_0001.txt`` (10,000 comma-separated rows
  x,y,z,nx,ny,nz), ``modelnet40_shape_names.txt`` (or ``shape_names.txt``), ``modelnet40_{train,test}.txt``
  (PointNet++, Qi et al., NeurIPS 2017).
- ``ShapeNetPart``: ``shapenetcore_partanno_segmentation_benchmark_v0_normal``: ``synsetoffset2category.txt``,
  ``train_test_split/shuffled_{train,val,test}_file_list.json`` (``shape_data/<synset>/<token>``), per-shape
  ``<synset>/<token>.txt`` rows ``x y z nx ny nz part`` (Yi et al., SIGGRAPH Asia 2016).

Each sample is a dict (``points`` (N, D) float32, and ``label`` or ``seg`` + ``category``) passed through the
``pipeline`` (``tasks.points.transforms``). Every malformed file raises a ``ValueError`` naming the file and what
is wrong with it: an unreadable or truncated file, a short row, and NaN or inf anywhere in the points (which would
otherwise train to NaN weights), reported with the shape index (HDF5) or data row (text) where it first occurs.
"""
import json
import os
import os.path as osp

import numpy as np
from mmengine.dataset import Compose
from mmengine.registry import DATASETS
from torch.utils.data import Dataset

from zoo.datasets import SHAPENET_CATEGORIES, SHAPENET_PARTS


def _read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def _find(root, names, what):
    for name in names:
        if osp.isfile(osp.join(root, name)):
            return osp.join(root, name)
    raise FileNotFoundError(f"{what}: none of {', '.join(names)} found in {root}")


_NON_FINITE_FIX = "Fix or drop that shape: non-finite points train the model to NaN weights."


def _load_rows(path, what, columns, **kwargs):
    """``np.loadtxt`` that names the file in its errors and refuses NaN/inf, naming the first such data row.

    Args:
        path: The text file.
        what: The dataset class name, for the message.
        columns: What a row must hold, for the message (e.g. ``'x y z nx ny nz part' (7 values)``).
        **kwargs: More ``np.loadtxt`` arguments (``delimiter``, ``max_rows``).

    Returns:
        float32 array (rows, columns).
    """
    try:
        rows = np.loadtxt(path, dtype=np.float32, ndmin=2, **kwargs)
    except ValueError as e:  # numpy's message gives the row ("the number of columns changed from 7 to 6 at row 3")
        raise ValueError(f"{what}: {path}: {e} (each row must be {columns})") from e
    bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    if bad.size:
        raise ValueError(f"{what}: {path}: data row {int(bad[0]) + 1} holds NaN or inf ({rows[bad[0]].tolist()}); "
                         f"{bad.size} row(s) in all. {_NON_FINITE_FIX}")
    return rows


def _read_modelnet_h5(h5py, path, use_normals):
    """``data`` (S, N, 3 or 6 with normals) and ``label`` of one ModelNet40 HDF5 file, with layout checks."""
    try:
        f = h5py.File(path, "r")
    except OSError as e:  # h5py's message (e.g. "truncated file: eof = ...") does not say which file
        raise ValueError(f"ModelNet40H5: cannot open {path} ({os.path.getsize(path)} bytes) as HDF5: {e}. The file "
                         f"is truncated or damaged (an interrupted download or copy?); fetch it again.") from e
    with f:
        need = ["data", "label"] + (["normal"] if use_normals else [])
        missing = [k for k in need if k not in f]
        if missing:
            raise ValueError(f"ModelNet40H5: {path} lacks key(s) {missing}; it has {sorted(f.keys())} "
                             f"(expected 'data' (S, N, 3) and 'label' (S, 1))")
        try:
            data, label = f["data"][()], f["label"][()]
            normal = f["normal"][()] if use_normals else None
        except OSError as e:  # a file cut inside a dataset opens, then fails here
            raise ValueError(f"ModelNet40H5: cannot read the arrays of {path}: {e}. The file is truncated or "
                             f"damaged; fetch it again.") from e
    if data.ndim != 3 or data.shape[-1] != 3:
        raise ValueError(f"ModelNet40H5: {path}: 'data' must be (S, N, 3), got shape {data.shape}")
    if label.reshape(len(label), -1).shape != (data.shape[0], 1):
        raise ValueError(f"ModelNet40H5: {path}: 'label' must be (S, 1) with S={data.shape[0]}, got "
                         f"shape {label.shape}")
    if use_normals:
        if normal.shape != data.shape:
            raise ValueError(f"ModelNet40H5: {path}: 'normal' must match 'data' {data.shape}, got {normal.shape}")
        data = np.concatenate([data, normal], axis=-1)
    return data, label


def pc_normalize(xyz):
    """Centre on the centroid and scale into the unit sphere (PointNet++ ``pc_normalize``)."""
    xyz = xyz - xyz.mean(axis=0)
    radius = np.sqrt((xyz ** 2).sum(axis=1)).max()
    return xyz / radius if radius > 0 else xyz


class _PointDataset(Dataset):
    """Common part: a list of samples, a pipeline, ``metainfo`` for the evaluator."""

    def __init__(self, pipeline=()):
        self.pipeline = Compose(list(pipeline))

    @property
    def metainfo(self):
        return dict(self._metainfo)

    def __getitem__(self, i):
        return self.pipeline(self.get_sample(i))


@DATASETS.register_module()
class ModelNet40H5(_PointDataset):
    """ModelNet40 in the HDF5 layout (``modelnet40_ply_hdf5_2048``), read once into memory.

    Args:
        data_root: The ``modelnet40_ply_hdf5_2048`` folder.
        split: ``train`` or ``test``.
        use_normals: Return (N, 6) xyz + normals (needs the ``normal`` key); default xyz only.
        pipeline: Transforms.
    """

    def __init__(self, data_root, split="train", use_normals=False, pipeline=()):
        super().__init__(pipeline)
        import h5py
        if split not in ("train", "test"):
            raise ValueError(f"ModelNet40H5: split must be 'train' or 'test', got {split!r}")
        self.classes = _read_lines(_find(data_root, ["shape_names.txt"], "ModelNet40H5 class names"))
        list_file = osp.join(data_root, f"{split}_files.txt")
        if osp.isfile(list_file):  # entries look like data/modelnet40_ply_hdf5_2048/ply_data_train0.h5
            files = [osp.join(data_root, osp.basename(p)) for p in _read_lines(list_file)]
        else:
            files = sorted(osp.join(data_root, f) for f in os.listdir(data_root)
                           if f.startswith(f"ply_data_{split}") and f.endswith(".h5"))
        if not files:
            raise FileNotFoundError(f"ModelNet40H5: no ply_data_{split}*.h5 files in {data_root}")
        points, labels = [], []
        for path in files:
            if not osp.isfile(path):
                raise FileNotFoundError(f"ModelNet40H5: {list_file} lists {osp.basename(path)}, missing in {data_root}")
            data, label = _read_modelnet_h5(h5py, path, use_normals)
            label = label.reshape(-1).astype(np.int64)
            if label.size and (label.min() < 0 or label.max() >= len(self.classes)):
                raise ValueError(f"ModelNet40H5: {path}: labels range {label.min()}..{label.max()} but "
                                 f"shape_names.txt has {len(self.classes)} classes")
            bad = ~np.isfinite(data).all(axis=2)  # (S, N): points with a NaN/inf coordinate or normal
            if bad.any():
                shape, point = (int(i) for i in np.argwhere(bad)[0])
                raise ValueError(f"ModelNet40H5: {path}: shape {shape}, point {point} holds NaN or inf "
                                 f"({data[shape, point].tolist()}); {int(bad.any(axis=1).sum())} shape(s) in all. "
                                 f"{_NON_FINITE_FIX}")
            points.append(data.astype(np.float32))
            labels.append(label)
        self.points, self.labels = np.concatenate(points), np.concatenate(labels)
        self._metainfo = dict(classes=tuple(self.classes))

    def __len__(self):
        return len(self.labels)

    def get_sample(self, i):
        return dict(points=self.points[i], label=int(self.labels[i]))


@DATASETS.register_module()
class ModelNet40Normal(_PointDataset):
    """ModelNet40 in the resampled text layout (``modelnet40_normal_resampled``), read lazily (optionally cached).

    Args:
        data_root: The ``modelnet40_normal_resampled`` folder.
        split: ``train`` or ``test``.
        use_normals: Keep the normals ((N, 6)); default xyz only.
        num_points: Rows to read per file (the first ones; None: all).
        cache: Keep parsed files in memory.
        pipeline: Transforms.
    """

    def __init__(self, data_root, split="train", use_normals=False, num_points=None, cache=False, pipeline=()):
        super().__init__(pipeline)
        self.classes = _read_lines(_find(data_root, ["modelnet40_shape_names.txt", "shape_names.txt"],
                                         "ModelNet40Normal class names"))
        index = {c: i for i, c in enumerate(self.classes)}
        split_file = _find(data_root, [f"modelnet40_{split}.txt"], f"ModelNet40Normal split {split!r}")
        self.items = []
        for name in _read_lines(split_file):  # e.g. night_stand_0001
            cls = name.rsplit("_", 1)[0]
            if cls not in index:
                raise ValueError(f"ModelNet40Normal: {split_file} lists {name}, whose class {cls!r} is not in the "
                                 f"class names file")
            self.items.append((osp.join(data_root, cls, f"{name}.txt"), index[cls]))
        self.use_normals, self.num_points, self.cache = use_normals, num_points, {} if cache else None
        self._metainfo = dict(classes=tuple(self.classes))

    def __len__(self):
        return len(self.items)

    def get_sample(self, i):
        path, label = self.items[i]
        if self.cache is not None and i in self.cache:
            return dict(points=self.cache[i], label=label)
        rows = _load_rows(path, "ModelNet40Normal", "6 comma-separated values x,y,z,nx,ny,nz", delimiter=",",
                          max_rows=self.num_points)
        if rows.shape[1] != 6:
            raise ValueError(f"ModelNet40Normal: {path} must hold comma-separated rows x,y,z,nx,ny,nz (6 values), "
                             f"got {rows.shape[1]} per row")
        rows[:, :3] = pc_normalize(rows[:, :3])
        pts = rows if self.use_normals else np.ascontiguousarray(rows[:, :3])
        if self.cache is not None:
            self.cache[i] = pts
        return dict(points=pts, label=label)


@DATASETS.register_module()
class ShapeNetPart(_PointDataset):
    """ShapeNetPart (``shapenetcore_partanno_segmentation_benchmark_v0_normal``) for part segmentation.

    Categories are indexed by their position in the standard 16-category table sorted by name
    (``zoo.datasets.SHAPENET_CATEGORIES``), so the model's category one-hot is the same whichever categories a copy
    holds; part ids are the global ids 0..49 (``zoo.datasets.SHAPENET_PARTS``).

    Args:
        data_root: The ``shapenetcore_partanno_segmentation_benchmark_v0_normal`` folder.
        split: ``train``, ``val``, ``test`` or ``trainval``.
        use_normals: Keep the normals ((N, 6)); default xyz only.
        cache: Keep parsed files in memory.
        pipeline: Transforms.
    """

    CATEGORIES = SHAPENET_CATEGORIES

    def __init__(self, data_root, split="train", use_normals=False, cache=True, pipeline=()):
        super().__init__(pipeline)
        cat_file = _find(data_root, ["synsetoffset2category.txt"], "ShapeNetPart categories")
        synset_to_cat = {}
        for line in _read_lines(cat_file):
            fields = line.split()
            if len(fields) != 2 or fields[0] not in SHAPENET_PARTS:
                raise ValueError(f"ShapeNetPart: {cat_file}: line {line!r} must be '<Category> <synset>' with a "
                                 f"category among {', '.join(self.CATEGORIES)}")
            synset_to_cat[fields[1]] = fields[0]
        splits = ["train", "val"] if split == "trainval" else [split]
        self.items = []
        for s in splits:
            path = osp.join(data_root, "train_test_split", f"shuffled_{s}_file_list.json")
            if not osp.isfile(path):
                raise FileNotFoundError(f"ShapeNetPart: split file {path} not found")
            with open(path) as f:
                entries = json.load(f)
            for entry in entries:  # shape_data/<synset>/<token>
                synset, token = entry.split("/")[-2:]
                if synset not in synset_to_cat:
                    raise ValueError(f"ShapeNetPart: {path} lists {entry}, whose synset {synset} is not in "
                                     f"{cat_file}")
                cat = synset_to_cat[synset]
                self.items.append((osp.join(data_root, synset, f"{token}.txt"), self.CATEGORIES.index(cat)))
        self.use_normals, self.cache = use_normals, {} if cache else None
        self._metainfo = dict(classes=self.CATEGORIES, parts=tuple(tuple(SHAPENET_PARTS[c]) for c in self.CATEGORIES))

    def __len__(self):
        return len(self.items)

    def get_sample(self, i):
        path, cat = self.items[i]
        if self.cache is not None and i in self.cache:
            pts, seg = self.cache[i]
        else:
            rows = _load_rows(path, "ShapeNetPart", "'x y z nx ny nz part' (7 values)")
            if rows.shape[1] != 7:
                raise ValueError(f"ShapeNetPart: {path} must hold rows 'x y z nx ny nz part' (7 values), got "
                                 f"{rows.shape[1]} per row")
            seg = rows[:, 6].astype(np.int64)
            parts = SHAPENET_PARTS[self.CATEGORIES[cat]]
            bad = np.setdiff1d(np.unique(seg), parts)
            if bad.size:
                raise ValueError(f"ShapeNetPart: {path} ({self.CATEGORIES[cat]}) has part ids {bad.tolist()} outside "
                                 f"its category's parts {parts}")
            rows[:, :3] = pc_normalize(rows[:, :3])
            pts = rows[:, :6] if self.use_normals else np.ascontiguousarray(rows[:, :3])
            if self.cache is not None:
                self.cache[i] = (pts, seg)
        return dict(points=pts, seg=seg, category=cat)
