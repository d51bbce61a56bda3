// Package xflow implements the xflow pointcut of XenLASY (dissertation
// ch. 5) at the language level: Translate turns xflow definitions
// (<start>, <transit>, <quit>) and advice using xflow(...) into plain
// advice that calls the flow ID runtime (get_new_flowid, register_flowid,
// get_flowid, remove_flowid). The runtime itself - the table from
// structure pointers to flow IDs - belongs to the weaver's kernel module
// and is not here.
package xflow
