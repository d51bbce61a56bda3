// Package plugintest holds the tests and benchmarks of the klasy GCC plugin
// (gcc-patches/klasy.cc): C sources in testdata/ and files of Debian's
// linux-source-6.1 are compiled with it at test time.
package plugintest
