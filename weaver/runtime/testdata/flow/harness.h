/* SPDX-License-Identifier: GPL-2.0 */
/*
 * harness.h - between the flow harness (harness.c) and the advice file
 * flow_test.go generates from xflow's translation of an aspect: each
 * advice as a C function of its variables, and the flows they name.
 */
#ifndef _HARNESS_H
#define _HARNESS_H

#include "klasy_flow.h"

struct klasy_user_advice {
	const char *name;
	/*
	 * One letter per variable, in v[]'s order: 't' (target) gets the
	 * object's address, 'l' (local_var) a pointer to a variable that
	 * holds it.
	 */
	const char *params;
	void (*fn)(void **v);
};

struct klasy_user_flowvar {
	const char *name;
	struct klasy_flow **var;	/* the advice's __klasy_flow_NAME */
};

extern const struct klasy_user_advice klasy_user_advice[];
extern const int klasy_user_nadvice;
extern const struct klasy_user_flowvar klasy_user_flowvars[];
extern const int klasy_user_nflowvars;

/* User advice calls it with the flow ID it was given. */
void klasy_user_saw(int id);

/*
 * What KLASY_SET_FLOW (klasy_rt.h, outside the plain-C section) does to a
 * hit in the kernel: the hit's records carry the ID. saw checks it too.
 */
extern int klasy_user_flow;
#define KLASY_SET_FLOW(id) (klasy_user_flow = (id))

#endif /* _HARNESS_H */
