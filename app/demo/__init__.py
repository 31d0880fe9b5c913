"""The demo fleet: a story told in each vendor's exporter dialect and ingested through the real pipeline."""
