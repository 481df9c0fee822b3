# ADE20K (ADEChallengeData2016) with mmseg's standard 512x512 pipelines; labels: reduce_zero_label (raw 0 ignored,
# raw k -> class k - 1). LoadCheckedAnnotations is mmseg's LoadAnnotations plus size/range checks naming the file.
dataset_type = 'ZooADE20KDataset'
data_root = 'data/ade/ADEChallengeData2016'
crop_size = (512, 512)
num_classes = 150
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadCheckedAnnotations', reduce_zero_label=True, num_classes=num_classes),
    dict(type='RandomResize', scale=(2048, 512), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True),
    # annotations are loaded after Resize: metrics compare at the original size
    dict(type='LoadCheckedAnnotations', reduce_zero_label=True, num_classes=num_classes),
    dict(type='PackSegInputs')
]
# tools/test.py --tta: multi-scale (0.5 .. 1.75) + horizontal flip, logits averaged by SegTTAModel (as mmseg).
img_ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale_factor=r, keep_ratio=True) for r in img_ratios],
            [dict(type='RandomFlip', prob=0., direction='horizontal'),
             dict(type='RandomFlip', prob=1., direction='horizontal')],
            [dict(type='LoadCheckedAnnotations', reduce_zero_label=True, num_classes=num_classes)],
            [dict(type='PackSegInputs')],
        ])
]
tta_model = dict(type='SegTTAModel')
train_dataloader = dict(
    batch_size=4,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])  # prints per-class IoU/Acc, aAcc, mIoU, mAcc
test_evaluator = val_evaluator
