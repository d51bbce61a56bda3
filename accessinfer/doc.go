// Package accessinfer infers which struct member each memory instruction
// of a kernel image touches, from DWARF and the instructions alone: the
// facts the klasy GCC plugin records in .debug_klasy, for kernels built
// without it (issue 19).
//
// The method is perf's data-type profiling (tools/perf/util/
// annotate-data.c, Linux 6.8+) turned into a whole-image pass:
//
//   - A scan (dwscan) reads every compilation unit once: the
//     out-of-line functions with their parameters and locals, those of
//     the copies inlined into them and of lexical blocks, each with its
//     location list; the variables at fixed addresses (globals,
//     statics, per-CPU variables at their offset in .data..percpu);
//     each function's return type.
//   - Tracking runs per function over its basic blocks (x86code's
//     graph, with the jump label sites as two-way branches). The state
//     before an instruction is, for each general register and each
//     stack slot written with a tracked value, "the address of an object
//     of type T plus k", "the stack pointer at entry plus k", a constant
//     (an address, maybe) or a per-CPU offset. DWARF's locations are
//     applied at every instruction they cover and win over what tracking
//     worked out. mov, lea, add/sub of a constant (container_of), push,
//     pop, spills and reloads carry values; a load of a pointer member
//     gives a pointer to the member's pointee; a call clobbers the
//     caller-saved registers and gives %rax its callee's return type; an
//     instruction not modelled clobbers every register but %rsp. At a
//     join only what all predecessors agree on is kept.
//   - A memory operand is then resolved to the object it addresses (a
//     typed base register, a global or per-CPU variable by address, a
//     struct in the frame) and the offset into it, and the offset to
//     the chain of named members there (members), anonymous members
//     collapsed as the plugin collapses them. A bitfield's member is the one whose
//     bits the instruction (or the shr/and/test that follow its load, or
//     the and/or before the store that writes the unit back, a global's
//     %rip-relative too) tests or changes; adjacent members one masked
//     compare tests (GCC merged c->x86 == 6 && c->x86_model == 1) are
//     marked as bitfield tests are, a form the plugin cannot record
//     either. An anonymous struct is named by its nearest typedef
//     (atomic_long_t's accesses are atomic64_t's), struct_group()'s
//     union by its anonymous struct (skb->protocol), and a struct
//     member at offset 0 is an outer level only when the object's type
//     is a variable's as declared (sk->__sk_common of sk->sk_state).
//   - Copies are told from member accesses: a mov whose loaded value
//     is only stored (or the store of it), a struct returned in %rax
//     and %rdx and stored, and, for a whole object, immediates stored;
//     such moves beside the instruction through its base, a register a
//     lea set to it plus a constant or, for a global, at RIP-relative
//     addresses count together: an embedded struct all of whose bytes
//     they cover is copied whole (p = file->f_path), one all of whose
//     bytes immediates write is assigned a constant or zeroed member
//     by member alike (x->root = RB_ROOT_CACHED): the member, not the
//     members inside; an object
//     all of whose bytes they cover is copied or initialized
//     (*insn = BPF_MOV64_IMM(..)): the member, or nothing, not the
//     members inside. Stores through one base that write a whole
//     struct, one of them parts of two members at once, are an
//     initializer or a compound literal (*insn++ = BPF_MOV64_REG(..));
//     loads beside each other stored into the frame, three quarters
//     of a struct or more with gaps or none, a struct copied into a
//     local (t = *table; t.data = &tmp);
//     the address of a struct in the frame that a rep stos or rep movs
//     starts at, its zeroing or a copy into it: no member access. A one-member wrapper's member (kuid_t.val,
//     pte_t.pte) is an access only inside an inlined copy of a helper
//     that takes the wrapper, and a named wrapper of a scalar (pgd_t,
//     kuid_t) loaded or stored whole elsewhere is its value moved or
//     its member named alike: none; a partial load of a wrapper's byte array
//     wider than its elements (guid_t.b, in6_addr.in6_u) is a cast or
//     an inlined memcmp: none. A global's bytes a pointer parameter
//     whose value DWARF gives as a constant points to are typed by it
//     (tk_setup_internals' tk, always &tk_core.timekeeper: tk->shift is
//     tk_core.timekeeper.shift's code). The lea that starts an inlined
//     memset's rep stos, 8 bytes past its start and rounded down, names
//     only the members holding that start, and so do the immediates
//     stored beside it at or past the start (its head and tail words,
//     or member stores: the same instructions); the operand of lgdt,
//     fxsave, xrstor
//     and their kin is the address of the structure they move whole; a
//     push of memory is a move (a struct passed by value, from the
//     frame too: the pushes between move %rsp); the stores that build
//     a whole struct are looked for along the straight path, across
//     block starts that are only jump targets.
//
// Nothing is guessed: an offset on padding or outside the type, a union
// whose member neither the value's type nor its use tells, a load that
// spans several members, an indexed access outside an array member, a
// register two variables of different types share (in one scope or
// nested ones: n, va = rb_entry(n, ..)) where both typings fit
// different members (the member both reach is kept), the offset-0
// levels where it also points to a struct they hold there (tp, sk:
// inet_csk(sk)->icsk_ack casts), where that struct holds at offset 0,
// two levels down or more, a class the function has a pointer to (sk,
// only tp in the register), or where it was loaded from a global
// pointer (current_thread_info() is current cast), a scalar array in a member read wider than its element outside a copy
// (io_kiocb_to_cmd()'s cast), a store into a struct in the frame (most are
// its initializer, CONFIG_INIT_STACK_ALL_ZERO's zeroing or a copy into
// it), va_arg's __va_list_tag, the code of assembler units (gas
// describes their functions too; they have no C member access): no
// access.
//
// Infer analyses an image; Select runs it once per build and keeps its
// accesses by build-id. Package accessinfer/score measures inference
// against the plugin's records.
package accessinfer
