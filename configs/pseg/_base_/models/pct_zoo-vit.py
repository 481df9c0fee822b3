# A zoo backbone with the point tokenizer and part segmentation head (zoo.heads.points); the architecture comes
# from the registry name, set by each config. 50 parts, 16 categories (ShapeNetPart), label smoothing 0.2.
model = dict(type='ZooPartSegmenter', name='sa_vit_tiny', num_classes=50, num_categories=16, num_points=2048,
             in_dims=3, label_smoothing=0.2, vote=1)
