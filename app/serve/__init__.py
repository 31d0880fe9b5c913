"""`hetpool serve`: the collectors, the console and the health endpoint of one deployment, from one YAML file."""
