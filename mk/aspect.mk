# The aspect language: `make bench` runs BenchmarkCheck10000Lines (klasy
# check on a generated 10,000-line aspect, target < 100 ms) beside its
# encoding/xml tokenizing baseline, and BenchmarkCheck100000Lines (ten
# times the lines should cost about ten times the time). Nothing to
# install: pure Go; xflow's header test compiles C with the gcc every
# machine has.
BENCH_PKGS += ./aspect/
