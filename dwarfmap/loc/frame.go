package loc

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/go-delve/delve/pkg/dwarf/frame"

	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/mmapfile"
)

// Frame is what locating a stack slot at one pc needs: the function's
// frame base and the CFA rule at the pc, read from the image when first
// needed.
type Frame struct {
	Base []byte // the function's DW_AT_frame_base expression

	img    *elfimage.Image
	pc     uint64
	done   bool
	cfa    *frame.DWRule
	cfaErr error
	ix     *FDEIndex // nil: FDE searches .debug_frame
}

// NewFrame returns the frame at pc of a function with frame base base in
// img.
func NewFrame(img *elfimage.Image, pc uint64, base []byte) *Frame {
	return &Frame{Base: base, img: img, pc: pc}
}

// NewFrameIn is NewFrame finding the pc's entry through an FDEIndex of
// img, for many lookups in a row.
func NewFrameIn(ix *FDEIndex, pc uint64, base []byte) *Frame {
	return &Frame{Base: base, img: ix.img, pc: pc, ix: ix}
}

// CFA returns the rule that computes the canonical frame address at the
// pc, from .debug_frame (or .eh_frame).
func (f *Frame) CFA() (*frame.DWRule, error) {
	if f.done {
		return f.cfa, f.cfaErr
	}
	f.done = true
	if f.img == nil {
		f.cfaErr = fmt.Errorf("no image to read the CFA at %#x from", f.pc)
		return nil, f.cfaErr
	}
	var fde *frame.FrameDescriptionEntry
	var err error
	if f.ix != nil {
		fde, err = f.ix.FDE(f.pc)
	} else {
		fde, err = FDE(f.img, f.pc)
	}
	if err != nil {
		f.cfaErr = err
		return nil, err
	}
	fc, err := fde.EstablishFrame(f.pc)
	if err != nil {
		f.cfaErr = err
		return nil, err
	}
	f.cfa = &fc.CFA
	return f.cfa, nil
}

// FDE finds the .debug_frame entry covering pc by hopping over entry
// headers (about a millisecond for a vmlinux, where parsing all 49,000
// entries with delve's frame.Parse takes 160 ms), then lets frame.Parse
// decode just that FDE and its CIE.
func FDE(img *elfimage.Image, pc uint64) (fde *frame.FrameDescriptionEntry, err error) {
	defer func() {
		if r := recover(); r != nil {
			if mmapfile.IsFault(r) {
				panic(r) // the image changed: for the caller's mmapfile.Catch
			}
			err = fmt.Errorf("malformed .debug_frame: %v", r)
		}
	}()
	sec := img.Section(".debug_frame")
	if len(sec) == 0 {
		return ehFrame(img, pc)
	}
	var found *frame.FrameDescriptionEntry
	err = eachFDE(sec, func(off, end int, begin, size uint64) (bool, error) {
		if pc-begin >= size {
			return true, nil
		}
		e, err := parseFDE(sec, off, end, pc)
		found = e
		return e == nil && err == nil, err
	})
	if err != nil || found != nil {
		return found, err
	}
	return nil, fmt.Errorf("no .debug_frame entry covers %#x", pc)
}

// eachFDE calls fn with the bounds and the pc range of each FDE of a
// .debug_frame section, until fn returns false or an error.
func eachFDE(sec []byte, fn func(off, end int, begin, size uint64) (bool, error)) error {
	le := binary.LittleEndian
	for off := 0; off+4 <= len(sec); {
		n := int(le.Uint32(sec[off:]))
		if n >= 0xfffffff0 {
			return fmt.Errorf("64-bit .debug_frame is not supported")
		}
		end := off + 4 + n
		if n < 4+16 || end > len(sec) {
			off = end
			continue
		}
		if cie := le.Uint32(sec[off+4:]); cie != 0xffffffff {
			more, err := fn(off, end, le.Uint64(sec[off+8:]), le.Uint64(sec[off+16:]))
			if err != nil || !more {
				return err
			}
		}
		off = end
	}
	return nil
}

// parseFDE decodes the FDE at [off, end) of sec with its CIE, nil if it
// does not cover pc.
func parseFDE(sec []byte, off, end int, pc uint64) (*frame.FrameDescriptionEntry, error) {
	le := binary.LittleEndian
	cie := int(le.Uint32(sec[off+4:]))
	if cie+4 > len(sec) {
		return nil, fmt.Errorf("FDE at %#x names CIE at %#x outside .debug_frame", off, cie)
	}
	cieEnd := cie + 4 + int(le.Uint32(sec[cie:]))
	if cieEnd > len(sec) || cieEnd < cie {
		return nil, fmt.Errorf("CIE at %#x runs past .debug_frame", cie)
	}
	// A two-entry .debug_frame: the CIE at offset 0, then the FDE
	// pointing at it.
	buf := append([]byte{}, sec[cie:cieEnd]...)
	f := append([]byte{}, sec[off:end]...)
	le.PutUint32(f[4:], 0)
	buf = append(buf, f...)
	fdes, err := frame.Parse(buf, le, 0, 8, 0)
	if err != nil {
		return nil, err
	}
	for _, e := range fdes {
		if e.Cover(pc) {
			return e, nil
		}
	}
	return nil, nil
}

// FDEIndex finds .debug_frame entries by pc with a binary search: one
// pass over the entry headers when made, instead of one per lookup.
type FDEIndex struct {
	img  *elfimage.Image
	fdes []fdeSpan // by begin
	err  error
}

type fdeSpan struct {
	begin, size uint64
	off, end    int
}

// NewFDEIndex indexes img's .debug_frame (an image with .eh_frame only
// is searched by FDE).
func NewFDEIndex(img *elfimage.Image) (ix *FDEIndex) {
	ix = &FDEIndex{img: img}
	defer func() {
		if r := recover(); r != nil {
			if mmapfile.IsFault(r) {
				panic(r) // the image changed: for the caller's mmapfile.Catch
			}
			ix.fdes, ix.err = nil, fmt.Errorf("malformed .debug_frame: %v", r)
		}
	}()
	ix.err = eachFDE(img.Section(".debug_frame"), func(off, end int, begin, size uint64) (bool, error) {
		ix.fdes = append(ix.fdes, fdeSpan{begin, size, off, end})
		return true, nil
	})
	slices.SortFunc(ix.fdes, func(a, b fdeSpan) int { return cmp.Compare(a.begin, b.begin) })
	return ix
}

// FDE returns the entry covering pc, as the function FDE does.
func (ix *FDEIndex) FDE(pc uint64) (fde *frame.FrameDescriptionEntry, err error) {
	sec := ix.img.Section(".debug_frame")
	if len(sec) == 0 {
		return ehFrame(ix.img, pc)
	}
	if ix.err != nil {
		return nil, ix.err
	}
	defer func() {
		if r := recover(); r != nil {
			if mmapfile.IsFault(r) {
				panic(r)
			}
			err = fmt.Errorf("malformed .debug_frame: %v", r)
		}
	}()
	i, _ := slices.BinarySearchFunc(ix.fdes, pc+1, func(s fdeSpan, t uint64) int { return cmp.Compare(s.begin, t) })
	// Entries may overlap (a discarded function's at 0): look back a few.
	for k := i - 1; k >= 0 && k >= i-8; k-- {
		s := ix.fdes[k]
		if pc-s.begin < s.size {
			if e, err := parseFDE(sec, s.off, s.end, pc); e != nil || err != nil {
				return e, err
			}
		}
	}
	return nil, fmt.Errorf("no .debug_frame entry covers %#x", pc)
}

// ehFrame looks pc up in .eh_frame, which user-space objects carry
// instead of .debug_frame (the kernel builds with
// -fno-asynchronous-unwind-tables and has .debug_frame only).
func ehFrame(img *elfimage.Image, pc uint64) (*frame.FrameDescriptionEntry, error) {
	s := img.ELF.Section(".eh_frame")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("no .debug_frame or .eh_frame")
	}
	data, err := s.Data()
	if err != nil {
		return nil, err
	}
	fdes, err := frame.Parse(data, binary.LittleEndian, 0, 8, s.Addr)
	if err != nil {
		return nil, fmt.Errorf("reading .eh_frame: %w", err)
	}
	for _, f := range fdes {
		if f.Cover(pc) {
			return f, nil
		}
	}
	return nil, fmt.Errorf("no .eh_frame entry covers %#x", pc)
}
