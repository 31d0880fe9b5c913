#!/bin/sh
# Re-resolves constraints.txt: installs the project's ranges into a scratch virtualenv and pins what pip chose.
# Run it (`make lock`) to take newer releases on purpose; `make install` then installs exactly those pins.
set -eu
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$python" -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install --quiet --upgrade pip
"$scratch/venv/bin/python" -m pip install --quiet -e '.[test]'
{
    echo "# Exact versions \`make install\` installs (pip -c); the ranges live in pyproject.toml."
    echo "# Regenerate with \`make lock\` (scripts/lock.sh) on $("$python" -c 'import platform; print("Python", platform.python_version())')."
    "$scratch/venv/bin/python" -m pip freeze --exclude-editable | LC_ALL=C sort -f
} > constraints.txt.new
mv constraints.txt.new constraints.txt
echo "constraints.txt: $(grep -c '==' constraints.txt) pins"
