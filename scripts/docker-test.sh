#!/usr/bin/env bash
# docker-test: build the image, start compose.yaml (Redis with AOF and the
# gateway) under a project name of its own, create a plant through it and
# read it back, then remove everything it started. Skips, saying why, where
# there is no Docker engine or no compose plugin.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker >/dev/null 2>&1; then
	echo "docker-test: SKIP: no docker client on PATH (install Docker Engine with the compose plugin)"
	exit 0
fi
if ! info=$(docker info 2>&1 >/dev/null); then
	echo "docker-test: SKIP: no Docker engine answers: ${info##*$'\n'}"
	exit 0
fi
if ! docker compose version >/dev/null 2>&1; then
	echo "docker-test: SKIP: the docker compose plugin is missing (Debian/Ubuntu: apt-get install docker-compose-plugin)"
	exit 0
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export PLANTGATE_BOOTSTRAP_TOKEN=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
export PLANTGATE_PORT=$(free_port) PLANTGATE_ADMIN_PORT=$(free_port)
export VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
export REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
project=plantgate-test-$$
compose() { docker compose -p "$project" "$@"; }
trap 'compose logs --no-color plantgate | tail -n 50 || true; compose down -v --remove-orphans >/dev/null 2>&1 || true' EXIT

compose up -d --build
base=http://127.0.0.1:$PLANTGATE_PORT
for _ in $(seq 120); do
	if [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/readyz")" = 200 ]; then break; fi
	sleep 0.5
done

body=$(curl -sS -w ' %{http_code}' -X POST "$base/plants" -H "Authorization: Bearer $PLANTGATE_BOOTSTRAP_TOKEN" \
	-H 'Content-Type: application/json' -d '{"id":1,"name":"Monstera","tag":"tropical"}')
want='{"name":"Monstera","tag":"tropical"} 200'
if [ "$body" != "$want" ]; then
	echo "docker-test: FAIL: POST /plants answered '$body', want '$want'"
	exit 1
fi
got=$(curl -sS -w ' %{http_code}' "$base/plants/1" -H "Authorization: Bearer $PLANTGATE_BOOTSTRAP_TOKEN")
echo "docker-test: created a plant through compose; GET /plants/1: $got"
case $got in *'"name":"Monstera"'*' 200') ;; *) echo "docker-test: FAIL: GET /plants/1"; exit 1 ;; esac
ready=$(curl -sS "http://127.0.0.1:$PLANTGATE_ADMIN_PORT/readyz")
echo "docker-test: admin /readyz: $ready"
echo "docker-test: PASS"
