"""Status: canonical metrics judged ok, warning or critical per device, node and pool, by rules in YAML."""
