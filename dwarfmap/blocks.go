package dwarfmap

import (
	"fmt"
	"runtime/debug"
	"sort"

	"github.com/klasy/klasy/internal/mmapfile"
	"github.com/klasy/klasy/x86code"
)

// Block is a basic block [Start, End) of machine code.
type Block struct {
	Start, End uint64
	Func       string
}

// BasicBlock returns the basic block holding addr, found by decoding the
// function range around it (x86code.Leaders): blocks start at the range
// start, at every branch target inside the range and after every jump or
// return. Calls do not end a block (the callee returns), matching what
// KLASY's nearest-line fallback needs: two addresses in one block run
// together or not at all.
func (x *Index) BasicBlock(addr uint64) (b Block, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if err = mmapfile.FaultError(r); err == nil {
				err = fmt.Errorf("decoding code at %#x: %v", addr, r)
			}
		}
		if err != nil {
			b, err = Block{}, x.explain(err)
		}
	}()
	if err := x.needImage(); err != nil {
		return Block{}, err
	}
	if x, err = x.use(funcAtSecs); err != nil {
		return Block{}, err
	}
	fi, ok := x.FuncAt(addr)
	if !ok {
		return Block{}, fmt.Errorf("no function with debug info at %#x", addr)
	}
	for _, r := range fi.Ranges {
		if addr < r[0] || addr >= r[1] {
			continue
		}
		code := x.img.ReadText(r[0], r[1]-r[0])
		if code == nil {
			return Block{}, fmt.Errorf("no code bytes for %s at %#x in the image", fi.Name, r[0])
		}
		leaders := x86code.Leaders(code, r[0])
		i := sort.Search(len(leaders), func(i int) bool { return leaders[i] > addr })
		b := Block{Start: leaders[i-1], End: r[1], Func: fi.Name}
		if i < len(leaders) {
			b.End = leaders[i]
		}
		return b, nil
	}
	return Block{}, fmt.Errorf("%#x is not in %s", addr, fi.Name)
}

// SameBlock reports whether a and b lie in one basic block.
func (x *Index) SameBlock(a, b uint64) (bool, error) {
	ba, err := x.BasicBlock(a)
	if err != nil {
		return false, err
	}
	return b >= ba.Start && b < ba.End, nil
}
