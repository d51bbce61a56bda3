# trace --otlp (otlpexport/): records to a tracing backend as OpenTelemetry
# traces. Its unit tests need nothing; the end-to-end check (the XenLASY
# case study exported to a real Jaeger and read back through Jaeger's query
# API, internal/jaegertest) needs Jaeger, built once from the Go module
# proxy into $KLASY_CACHE/jaeger (scripts/build-jaeger.sh).
.PHONY: jaeger
TEST_SETUP += jaeger
jaeger:
	./scripts/build-jaeger.sh >/dev/null
