#!/usr/bin/env bash
# Static checks of docker/ (no container engine runs here): the compose file is valid for
# Docker Compose, the Dockerfile passes hadolint, the entrypoint passes bash -n.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.venv/bin
"$bin/docker-compose" -f "$root/docker/docker-compose.yml" config --quiet
"$bin/hadolint" "$root/docker/Dockerfile"
bash -n "$root/docker/entrypoint.sh"
echo "docker checks: compose config valid, hadolint clean, entrypoint parses"
