#!/usr/bin/env bash
# Create the project's virtual environment with whatever Python the machine has.
# Usage: .ci/make_venv.sh PYTHON VENV
set -euo pipefail
py="${1:-python3}"
venv="${2:-.venv}"

if ! command -v "$py" >/dev/null 2>&1; then
  echo "error: '$py' not found. Install Python >= 3.10 (Debian: apt-get install python3) or run 'make PYTHON=/path/to/python3 ...'." >&2
  exit 1
fi
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "error: spherelab needs Python >= 3.10; '$py' is $("$py" -V 2>&1)." >&2
  exit 1
fi
if "$py" -m venv "$venv" 2>/dev/null && [ -x "$venv/bin/python" ]; then
  exit 0
fi
rm -rf "$venv"
# Debian ships venv/ensurepip separately (python3-venv). Install it when we are allowed to.
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  echo "python3 -m venv failed: installing Debian's python3-venv ..." >&2
  ver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  apt-get update -qq
  apt-get install -y -qq "python${ver}-venv" >/dev/null 2>&1 || apt-get install -y -qq python3-venv
  "$py" -m venv "$venv"
  exit 0
fi
echo "error: '$py -m venv' failed. On Debian/Ubuntu run: sudo apt-get install python3-venv" >&2
exit 1
