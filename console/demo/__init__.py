"""The demo launcher's parts: the demo engine, its batch script, and the local scheduler.

``engine/`` is a stdlib-only package that never imports the console; it is shipped as one
zipapp file (``bundle.py``) and run as ``python3 srt-demo-engine-<id>.pyz``.
"""
