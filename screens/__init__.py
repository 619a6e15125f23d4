"""srt-console's Textual UI. Imports ``console``; ``console`` never imports this."""
