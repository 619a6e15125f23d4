"""The demo launcher's parts: the demo engine script, its batch script, and the local scheduler.

``engine.py`` is a standalone script (uploaded and run as ``python3 engine.py``); nothing
here imports it.
"""
