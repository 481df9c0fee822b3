# Classification model: a zoo classifier by name. Architecture numbers live in the zoo registry, not here.
custom_imports = dict(imports=['tasks.cls'], allow_failed_imports=False)
model = dict(
    type='ZooClassifier',
    name='sa_vit_tiny',
    num_classes=1000,
    img_size=224,
    in_chans=3,
    patch_size=16,
)
