#!/bin/sh
# eoslab's franz-go driver, built against one franz-go module version from the Go module proxy:
#
#   build.sh VERSION OUT [TAGS]     e.g. build.sh v1.22.2 .venv-clients/franz-go-v1.22.2 kip848
#
# copies the driver's sources to OUT/src, requires github.com/twmb/franz-go at VERSION there (its
# own dependencies as its go.mod pins them, as a user's module would get them) and builds
# OUT/eoslab-franz-go. src/eoslab/workload/drivers/franz_go runs it once per version (TAGS:
# kip848 for v1.22.0 and later). The go.mod beside this script is the development copy (the
# default version, for go vet and editors); the build never uses it.
set -eu
version=$1
out=$2
tags=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
mkdir -p "$out/src"
cp "$here"/*.go "$out/src/"
cd "$out/src"
printf 'module eoslab/clients/franz-go\n\ngo 1.24\n' > go.mod
go get "github.com/twmb/franz-go@$version"
go mod tidy
go build -trimpath -tags "$tags" -o "$out/eoslab-franz-go" .
