#!/bin/sh
# The long fuzz sweep (`make fuzz`): every ingest path at its sweep count, the exposition path beside the rest
# so the two cores share the work. Exit non-zero when either half fails.
set -u
PYTEST="${1:-.venv/bin/pytest}"
export HETPOOL_FUZZ=sweep
"$PYTEST" -q -p no:cacheprovider tests/test_fuzz_exposition.py &
half=$!
"$PYTEST" -q -p no:cacheprovider tests/test_fuzz_promjson.py tests/test_fuzz_traffic.py \
    tests/test_fuzz_evidence.py tests/test_fuzz_config.py tests/test_fuzz_counts.py
rest=$?
wait "$half"
first=$?
[ "$first" -eq 0 ] && [ "$rest" -eq 0 ]
