"""The shipped vendor profiles: one YAML file per exporter dialect (data, not code)."""
