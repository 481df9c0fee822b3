# A package, so that `python -m tests.hub_server` finds this folder rather than the top-level `tests` package that
# mmsegmentation installs into site-packages (a regular package wins over a folder without __init__.py).
