package elfimage

import (
	"debug/elf"
	"testing"

	"github.com/klasy/klasy/internal/testenv"
)

// TestAlternativesDebian reads the alternatives of Debian's vmlinux:
// one per 12-byte entry of .altinstructions, each site in code, each
// replacement in .altinstr_replacement and no longer than its site.
func TestAlternativesDebian(t *testing.T) {
	img, err := Open(testenv.DebianVmlinux(t))
	if err != nil {
		t.Fatal(err)
	}
	alts, err := img.Alternatives()
	if err != nil {
		t.Fatal(err)
	}
	table, repl := img.ELF.Section(".altinstructions"), img.ELF.Section(".altinstr_replacement")
	if table == nil || repl == nil {
		t.Fatal("no .altinstructions or .altinstr_replacement")
	}
	if uint64(len(alts)) != table.Size/altInstrSize {
		t.Errorf("%d alternatives, .altinstructions holds %d bytes: want %d", len(alts), table.Size, table.Size/altInstrSize)
	}
	inCode := func(a uint64) bool {
		for _, s := range img.ELF.Sections {
			if s.Flags&elf.SHF_EXECINSTR != 0 && a >= s.Addr && a < s.Addr+s.Size {
				return true
			}
		}
		return false
	}
	for _, a := range alts {
		if !inCode(a.Site) || a.ReplLen > a.Len ||
			a.ReplLen > 0 && (a.Repl < repl.Addr || a.Repl+uint64(a.ReplLen) > repl.Addr+repl.Size) {
			t.Errorf("alternative %+v: want a site in code, a replacement in .altinstr_replacement (%#x+%#x) no longer than it", a, repl.Addr, repl.Size)
		}
	}
}
