/* Two functions for the tests of which domain an advice goes to
 * (domain_select_test.go): compiled with gcc -O2 -g, no plugin. */
__attribute__((noinline)) int f_a(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) int f_b(int x)
{
	return f_a(x) ^ 5;
}
