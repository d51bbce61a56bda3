// Package baseexpr reads the base expressions the GCC plugin records for
// a member access (skb->sk, &q->tail, skb_shinfo(skb)->frags[i]) and
// evaluates them over the DWARF layouts into a symbolic value: the
// variable, loads and offsets that give the accessed struct's address.
package baseexpr
