"""Task heads. Each task module exposes ``build(model_name, task=, mixer=, size=, **kwargs)``."""
