package xflow

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klasy/klasy/aspect"
	"github.com/klasy/klasy/internal/testenv"
)

// TestHeaderCarriesFlowID compiles the translation of an inter-domain
// transit pair (<xin_move> at the sender, <xout_move> at the receiver)
// with gcc and runs it against a small flow table: the flow ID must
// arrive at the receiver as far as the fields can hold it (§5.3.1: upper
// bits that do not fit are ignored), the sender's ID must be gone, the
// runtime must hear of a cut ID with its full value and the bits kept
// (truncate_flowid), and the header's other bits must be untouched.
// UBSan turns undefined C,
// such as a shift by the width of the type, into a failure.
func TestHeaderCarriesFlowID(t *testing.T) {
	_, err := exec.LookPath("gcc")
	testenv.Need(t, "gcc", err)
	tests := []struct {
		name   string
		fields string // <field>s of the xin_move
		id     uint32
		bits   int // ID bits the fields carry
	}{
		{"Figure 5.11: flags bits 4..15", `<field name="flags" offset="4" size="12"/>`, 0xabc, 12},
		{"upper bits that do not fit are dropped", `<field name="flags" offset="4" size="12"/>`, 0x1abc, 12},
		{"Figure 5.10: three members, low bits first",
			`<field name="flags" offset="4" size="12"/><field name="offset" offset="4" size="12"/><field name="size" offset="4" size="12"/>`,
			0xdeadbeef, 32},
		{"a 32-bit field, then another", `<field name="wide" offset="16" size="32"/><field name="flags" offset="0" size="4"/>`, 0x89abcdef, 32},
		{"two fields of one member", `<field name="flags" offset="0" size="2"/><field name="flags" offset="8" size="6"/>`, 0x35, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := `<aspect>
  <xflow name="netflow">
    <transit>
      <pointcut>access(hdr.flags) AND within_function(xmit)</pointcut>
      <xin_move name="ring" from="skb" to="tx">` + tt.fields + `</xin_move>
    </transit>
    <transit>
      <pointcut>access(hdr.flags) AND within_function(recv)</pointcut>
      <xout_move name="ring" from="txp" to="skb"/>
    </transit>
  </xflow>
</aspect>
`
			f, diags := aspect.Load("hdr.klasy", []byte(src))
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			out, err := Translate(f)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.id
			if tt.bits < 32 {
				want &= 1<<tt.bits - 1
			}
			// After xout_move the fields' bits are cleared, all other
			// bits of the header keep the ones they were set to.
			header := map[string]uint64{"flags": 0xffff, "offset": 0xffff, "size": 0xffff, "wide": ^uint64(0)}
			for _, fd := range f.Flows[0].Rules[0].Pass.Fields {
				header[fd.Member.Value] &^= (1<<fd.Size - 1) << fd.Offset
			}
			got := runHeaderProgram(t, out.Advice[0], out.Advice[1], tt.id)
			truncated := "-" // no call: all 32 bits fit
			if tt.bits < 32 {
				truncated = fmt.Sprintf("%#x/%d", tt.id, tt.bits)
			}
			w := fmt.Sprintf("truncated %s sender 0 receiver %#x header %x %x %x %x", truncated, want, header["flags"], header["offset"], header["size"], header["wide"])
			if got != w {
				t.Errorf("got  %q\nwant %q", got, w)
			}
		})
	}
}

// runHeaderProgram turns each advice into a C function of its
// local_var bindings, runs xin then xout on one header whose bits
// outside the fields are all set, and prints what the table holds.
func runHeaderProgram(t *testing.T, xin, xout *aspect.Advice, id uint32) string {
	fn := func(name string, a *aspect.Advice) string {
		var params []string
		for _, term := range aspect.Leaves(a.Pointcut.Expr) {
			if term.LocalVar != nil {
				params = append(params, "void *"+term.LocalVar.Var.Value)
			}
		}
		return fmt.Sprintf("static void %s(%s)\n{%s}\n", name, strings.Join(params, ", "), a.Body.S)
	}
	prog := `#include <stdio.h>
#include <string.h>
#include <stdint.h>
struct hdr { uint16_t flags, offset, size; uint64_t wide; };
#define netflow 0
static void *obj; static int oid;
static int get_flowid(int flow, void *o) { return o == obj ? oid : 0; }
static void register_flowid(int flow, void *o, int id) { obj = o; oid = id; }
static void remove_flowid(int flow, void *o) { if (o == obj) obj = 0; }
static char truncated[32] = "-";
static __attribute__((unused)) void truncate_flowid(int flow, int id, int bits) { snprintf(truncated, sizeof(truncated), "%#x/%d", (unsigned)id, bits); }
static int noid;
static void flowid_not_found(int flow) { noid++; }
` + fn("xin", xin) + fn("xout", xout) + fmt.Sprintf(`
int main(void)
{
	static char a, b;
	void *skb = &a, *skb2 = &b;
	struct hdr h, *tx = &h, *txp = &h;
	memset(&h, 0, sizeof(h));
	xin(&skb, &tx); /* no ID yet: the header must stay as it is */
	if (memcmp(&h, &(struct hdr){0}, sizeof(h)) != 0)
		return 2;
	xout(&txp, &skb2); /* no ID in the header: nothing registered, counted */
	if (noid != 1 || get_flowid(netflow, skb2) != 0)
		return 3;
	register_flowid(netflow, skb, (int)%#xU);
	memset(&h, 0xff, sizeof(h));
	xin(&skb, &tx);
	printf("truncated %%s sender %%x ", truncated, (unsigned)get_flowid(netflow, skb));
	xout(&txp, &skb2); /* the receiver reads the same header */
	printf("receiver %%#x header %%x %%x %%x %%llx", (unsigned)get_flowid(netflow, skb2),
	       h.flags, h.offset, h.size, (unsigned long long)h.wide);
	return 0;
}
`, id)
	dir := t.TempDir()
	c := filepath.Join(dir, "hdr.c")
	if err := os.WriteFile(c, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hdr")
	if out, err := exec.Command("gcc", "-std=gnu11", "-O1", "-Wall", "-Werror", "-fsanitize=undefined", "-fno-sanitize-recover=all", "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s\n%s", err, out, prog)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, prog)
	}
	return string(out)
}
