// Package target is a running kernel klasy weaves into — this machine's,
// a lab's through its agent, a domain's over mutual TLS, or only an image
// for klasy list — and what is read from it before weaving: its build-id
// (kernel.go) and its kprobe blacklist, which gives the KASLR slide.
package target
