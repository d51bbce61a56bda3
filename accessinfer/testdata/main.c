/* Links the fixtures into an executable: accessinfer reads linked
 * images, where code and data have their addresses. */
void consume(void *p) { __asm__ volatile("" ::"r"(p) : "memory"); }
static char buf[256];
struct skb *get_skb(void) { return (struct skb *)buf; }
int main(void) { return 0; }
int pick(int v) { __asm__ volatile("" : "+r"(v)); return v; }
