"""One runner per peer system. Run as `python -m peers.NAME` from bench/ (the harness does),
or as a script: each runner drops its own folder from sys.path first, so `peers/tantivy.py`
never shadows the `tantivy` package."""
