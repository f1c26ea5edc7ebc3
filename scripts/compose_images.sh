#!/usr/bin/env bash
# The compose runtime's images, built or reused (README, "Compose"): one Debian base (pulled
# debian:bookworm-slim, else debootstrapped from apt's mirror as root; it says which), then the
# JRE, Kafka 3.9, Kafka 4, Python and eoslab images from what `make setup` fetched.
#   scripts/compose_images.sh                 build what is missing or stale
#   scripts/compose_images.sh --from-scratch  remove them (and the wheelhouse) first
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m eoslab.runtime.images "$@"
