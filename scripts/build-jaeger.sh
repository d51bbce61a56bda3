#!/usr/bin/env bash
# Builds Jaeger (all-in-one: OTLP receivers, in-memory storage, the query
# API) from the Go module proxy, once, into
#   $KLASY_CACHE/jaeger/VERSION/jaeger
# for the tests that check trace --otlp against a real backend
# (internal/jaegertest). Built in a throw-away module with `go get -tool`,
# as Jaeger's own go.mod asks, so klasy's go.mod does not take Jaeger's
# dependencies. Cold: a few minutes of two cores (about 150 MB of
# modules); a second run takes no time.
source "$(dirname "$0")/lib.sh"

version=${KLASY_JAEGER_VERSION:-v1.76.0}
out=$KLASY_CACHE/jaeger/$version
if [ -x "$out/jaeger" ]; then
	echo "$out/jaeger"
	exit 0
fi
command -v go >/dev/null || die "go is not installed"
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/klasy-jaeger.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building Jaeger $version from the Go module proxy (once; a few minutes)"
cd "$work"
cat >go.mod <<MOD
module klasy.local/jaeger

go 1.26
MOD
go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" >build.log 2>&1 ||
	{ tail -n 30 build.log >&2; die "go get jaeger $version failed"; }
CGO_ENABLED=0 go build -o "$out/jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger >>build.log 2>&1 ||
	{ tail -n 30 build.log >&2; die "building jaeger $version failed"; }
mv -f "$out/jaeger.tmp" "$out/jaeger"
log "Jaeger $version: $out/jaeger"
echo "$out/jaeger"
