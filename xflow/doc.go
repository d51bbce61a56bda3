// Package xflow implements flow IDs for the xflow pointcut (dissertation
// ch. 5): translating start/transit/quit into plain advice, the runtime
// pointer-to-flow-ID table, and inter-domain transit through header bits.
package xflow
