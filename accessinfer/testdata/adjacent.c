/* Adjacent members compared with constants in one condition: GCC's
 * front end merges the compares into one wider masked compare
 * (fold_truth_andor: boot_cpu_data.x86 == 6 && .x86_model == 1), a
 * BIT_FIELD_REF in which the klasy plugin records no member
 * (TestPluginMissesMergedCompares). A member compared alone is a
 * COMPONENT_REF the plugin records. */
#define noinline __attribute__((noinline))

struct cpuinfo {
	unsigned char vendor;
	unsigned char family;
	unsigned char model;
	unsigned char stepping;
	int level;
};

struct cpuinfo boot_cpu;

noinline int is_model(void)
{
	return boot_cpu.family == 6 && boot_cpu.model == 1; /* want: cpuinfo.family:load cpuinfo.model:load */
}

noinline int is_model_p(const struct cpuinfo *c)
{
	return c->family == 6 && c->model == 1; /* want: cpuinfo.family:load cpuinfo.model:load */
}

noinline int family_of(const struct cpuinfo *c)
{
	return c->family == 6; /* want: cpuinfo.family:load */
}
