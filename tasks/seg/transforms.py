"""Annotation loading with checks that name the offending file."""
import numpy as np
from mmseg.datasets.transforms import LoadAnnotations
from mmseg.registry import TRANSFORMS


@TRANSFORMS.register_module()
class LoadCheckedAnnotations(LoadAnnotations):
    """mmseg's ``LoadAnnotations`` that refuses label maps it cannot trust.

    After loading (and ``reduce_zero_label``), it checks that the map has the size of its image (``ori_shape``, set by
    ``LoadImageFromFile``, so it also works in test pipelines that load annotations after ``Resize``) and that every
    value is a class index below ``num_classes`` or the ignore index. Either failure raises ``ValueError`` naming the
    annotation file, as does a label map that cannot be decoded (empty, truncated, not a PNG).

    Args:
        num_classes: Number of classes after ``reduce_zero_label``; None skips the range check.
        ignore_index: The value that marks ignored pixels (255 in mmseg).
        **kwargs: ``LoadAnnotations`` arguments (``reduce_zero_label``, ``backend_args``, ``imdecode_backend``).
    """

    def __init__(self, num_classes=None, ignore_index=255, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.ignore_index = ignore_index

    def _load_seg_map(self, results):
        path = results.get("seg_map_path", "<label map>")
        try:
            super()._load_seg_map(results)
        except FileNotFoundError:
            raise  # its message already names the file
        except (OSError, ValueError, SyntaxError, AttributeError) as e:
            # Pillow says "cannot identify image file <_io.BytesIO ...>" (no path); cv2 returns None, whence an
            # AttributeError inside mmseg. Neither tells which of thousands of label maps is broken.
            raise ValueError(f"{path}: cannot read the label map ({type(e).__name__}: {e}); the PNG is empty, "
                             f"truncated or not an image. Regenerate or re-copy it.") from e
        seg = results["gt_seg_map"]
        ori = results.get("ori_shape")
        if ori is not None and tuple(seg.shape[:2]) != tuple(ori[:2]):
            raise ValueError(f"{path}: label map is {seg.shape[1]}x{seg.shape[0]} (WxH) but its image "
                             f"{results.get('img_path', '')} is {ori[1]}x{ori[0]}; a label map must have its image's "
                             f"size.")
        if self.num_classes is not None:
            values = np.unique(seg)
            bad = values[(values >= self.num_classes) & (values != self.ignore_index)]
            if bad.size:
                reduce = bool(results.get("reduce_zero_label", self.reduce_zero_label))
                if reduce:  # report the values as stored in the file
                    raw, rule = bad.astype(np.int64) + 1, f"raw 1..{self.num_classes} are classes, 0 is ignored"
                else:
                    raw, rule = bad, f"valid values are 0..{self.num_classes - 1}"
                raise ValueError(f"{path}: label values {raw.tolist()} are out of range for {self.num_classes} "
                                 f"classes ({rule}, {self.ignore_index} = ignore).")


@TRANSFORMS.register_module()
class RandomTranslate:
    """Shift the image and its label map by a random whole number of pixels, without resampling either.

    ``dx`` and ``dy`` are drawn uniformly from ``[-max_shift, max_shift]``; the content moves by them, what leaves
    the frame is dropped and what enters is ``img_pad_val`` in the image and ``seg_pad_val`` (mmseg's ignore index)
    in the label map, so the loss never sees a made-up label. The size stays. Unlike ``RandomResize`` + ``RandomCrop``
    it moves every item to new token positions without blurring the image or re-rounding its labels, which is what a
    model with position-specific token mixing (``ff``) needs and costs a model that resamples nothing.

    Args:
        max_shift: Largest shift in pixels along each axis (>= 0; 0 leaves the sample as it is).
        prob: Probability of shifting a sample at all.
        img_pad_val: Fill for the image.
        seg_pad_val: Fill for every map in ``seg_fields``.
    """

    def __init__(self, max_shift, prob=1.0, img_pad_val=0, seg_pad_val=255):
        if int(max_shift) != max_shift or max_shift < 0:
            raise ValueError(f"RandomTranslate: max_shift must be a whole number of pixels >= 0, got {max_shift!r}")
        if not 0.0 <= prob <= 1.0:
            raise ValueError(f"RandomTranslate: prob must be in [0, 1], got {prob!r}")
        self.max_shift, self.prob = int(max_shift), float(prob)
        self.img_pad_val, self.seg_pad_val = img_pad_val, seg_pad_val

    @staticmethod
    def shift(array, dx, dy, fill):
        """``array`` (H, W[, C]) moved ``dx`` pixels right and ``dy`` down, the vacated pixels set to ``fill``."""
        out = np.full_like(array, fill)
        h, w = array.shape[:2]
        if abs(dx) >= w or abs(dy) >= h:
            return out
        out[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
            array[max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)]
        return out

    def __call__(self, results):
        if self.max_shift == 0 or np.random.rand() >= self.prob:
            return results
        dx, dy = np.random.randint(-self.max_shift, self.max_shift + 1, size=2).tolist()
        results["img"] = self.shift(results["img"], dx, dy, self.img_pad_val)
        for key in results.get("seg_fields", []):
            results[key] = self.shift(results[key], dx, dy, self.seg_pad_val)
        results["translate"] = (dx, dy)
        return results

    def __repr__(self):
        return (f"{type(self).__name__}(max_shift={self.max_shift}, prob={self.prob}, "
                f"img_pad_val={self.img_pad_val}, seg_pad_val={self.seg_pad_val})")
