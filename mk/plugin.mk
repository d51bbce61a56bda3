# The GCC plugin (gcc-patches/klasy.so) and the Linux source tree its tests
# and the lab's `built` kernel compile with it.
#   make plugin         build gcc-patches/klasy.so (installs gcc-12-plugin-dev)
#   make linux-source   extract linux-source-6.1 into $KLASY_CACHE and prepare
#                       a build directory (scripts/setup-linux-source.sh)
.PHONY: plugin plugin-deps linux-source
plugin-deps:
	@bash -c 'source scripts/lib.sh && need_pkgs gcc g++ make gcc-12-plugin-dev binutils'

plugin: plugin-deps
	@$(MAKE) -s -C gcc-patches

linux-source: plugin
	@./scripts/setup-linux-source.sh >/dev/null

TEST_SETUP  += plugin linux-source debian-kernel
BENCH_SETUP += plugin linux-source
BENCH_PKGS  += ./gcc-patches/plugintest/
