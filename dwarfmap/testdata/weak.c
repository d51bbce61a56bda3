/*
 * A __weak default and its override (strong.c), as the kernel has them
 * (arch_cpu_idle in kernel/sched/idle.c and arch/x86/kernel/process.c).
 * Linked with strong.c, the weak arch_idle keeps its code and its DWARF
 * but loses its symbol: nothing calls it. With -ffunction-sections and
 * --gc-sections, its section and unused_fn's are discarded instead, and
 * their DWARF addresses become 0.
 */
static inline int twice(int x)
{
	return 2 * x;
}

__attribute__((weak)) int arch_idle(int x)
{
	return twice(x) + 1; /* MARK:weak_body */
}

int unused_fn(int x)
{
	return twice(x) * 3;
}

int main(void)
{
	return arch_idle(3);
}
