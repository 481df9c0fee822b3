# Fashion-MNIST scenes (tools/make_scenes.py) in the ADE20K layout: 64x64 canvases, 11 classes. Background is a
# real class here (most pixels, always present, must be predicted), so labels are used as stored: no
# reduce_zero_label. The pipelines mirror the ADE20K ones scaled to 64 pixels (random resize, random crop, flip,
# photometric distortion). Differences, and why: resize ratios 0.75-1.5 instead of 0.5-2 (items are only 17-45
# pixels wide and the runs are short), and no cat_max_ratio (background alone covers ~70% of the pixels).
dataset_type = 'FashionScenesDataset'
data_root = 'data/fashion_scenes'
crop_size = (64, 64)
num_classes = 11
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadCheckedAnnotations', reduce_zero_label=False, num_classes=num_classes),
    dict(type='RandomResize', scale=(256, 64), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs')
]
# The training pipelines of the later scenes recipes (docs/seg_scenes_study.md, "Scenes at their own scale"), derived
# from the one above so that they differ from it only where they say: the scenes at the scale make_scenes.py drew
# them (ratio 1, so the resize and crop become no-ops), and the same with a random whole-pixel shift of up to 8 px in
# place of the resize and crop. Recipes pick one with {{_base_.train_pipeline_own_scale}}.
train_pipeline_own_scale = [dict(t, ratio_range=(1.0, 1.0)) if t['type'] == 'RandomResize' else t
                            for t in train_pipeline]
train_pipeline_shift8 = [t for t in train_pipeline if t['type'] not in ('RandomResize', 'RandomCrop')]
train_pipeline_shift8.insert(2, dict(type='RandomTranslate', max_shift=8))  # after loading the image and labels
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 64), keep_ratio=True),
    dict(type='LoadCheckedAnnotations', reduce_zero_label=False, num_classes=num_classes),
    dict(type='PackSegInputs')
]
img_ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale_factor=r, keep_ratio=True) for r in img_ratios],
            [dict(type='RandomFlip', prob=0., direction='horizontal'),
             dict(type='RandomFlip', prob=1., direction='horizontal')],
            [dict(type='LoadCheckedAnnotations', reduce_zero_label=False, num_classes=num_classes)],
            [dict(type='PackSegInputs')],
        ])
]
tta_model = dict(type='SegTTAModel')
train_dataloader = dict(
    batch_size=16,
    num_workers=0,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
