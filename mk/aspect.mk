# The aspect language: `make bench` runs BenchmarkCheck10000Lines (klasy
# check on a generated 10,000-line aspect, target < 100 ms) beside its
# encoding/xml tokenizing baseline. Nothing to install: pure Go.
BENCH_PKGS += ./aspect/
