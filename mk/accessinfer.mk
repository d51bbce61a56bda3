# Member accesses inferred without the plugin (accessinfer/): `make bench`
# prints precision and recall against the plugin's records on the built
# lab kernel, per struct and in total, and the inference time beside
# dwarfmap's index build of the same image in the same run.
BENCH_SETUP += lab-kernel
BENCH_PKGS  += ./accessinfer/score/
