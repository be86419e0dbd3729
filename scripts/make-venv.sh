#!/usr/bin/env bash
# Create the virtualenv with the first Python >= 3.12 this machine has (pyenv versions included), 3.12 first: the
# lockfiles in requirements/ are compiled for 3.12 (see docs/decisions.md).
set -euo pipefail
venv=${1:-.venv}
candidates=(python3.12 python3.13 python3)
for dir in "$HOME"/.pyenv/versions/3.12* "$HOME"/.pyenv/versions/3.13*; do
  [ -x "$dir/bin/python" ] && candidates+=("$dir/bin/python")
done
for py in "${candidates[@]}"; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    echo "creating $venv with $("$py" --version)"
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    exit 0
  fi
done
echo "Waymark needs Python 3.12 or newer; none was found on PATH or under ~/.pyenv/versions." >&2
exit 1
