# A zoo backbone with the point tokenizer and classification head (zoo.heads.points); the architecture comes from
# the registry name, set by each config. PCT: cross-entropy with label smoothing 0.2; one test pass (vote=1).
model = dict(type='ZooPointClassifier', name='sa_vit_tiny', num_classes=40, num_points=1024, in_dims=3,
             label_smoothing=0.2, vote=1)
