# The host<->guest agent protocol (agent/, its wire format in agent/wire/). Its
# tests need nothing beyond Go and a pty; `make bench` reports its throughput
# next to a plain copy over the same channel, and `make agent-fuzz` runs the
# wire decoders' fuzz targets.
BENCH_PKGS += ./agent/

AGENT_FUZZTIME ?= 60s
.PHONY: agent-fuzz
agent-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzFrameReader$$' -fuzztime $(AGENT_FUZZTIME) -fuzzminimizetime 5s ./agent/wire/
	$(GO) test -run '^$$' -fuzz '^FuzzDamagedFrame$$' -fuzztime $(AGENT_FUZZTIME) -fuzzminimizetime 5s ./agent/wire/
