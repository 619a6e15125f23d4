"""srt-console's headless core: recipes, clusters, launches, triage and results.

Nothing in this package imports Textual; the UI lives in ``screens``.
"""

__version__ = "0.1.0"
