package loc

import (
	"debug/elf"
	"encoding/binary"
	"fmt"

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
}

// NewFrame returns the frame at pc of a function with frame base base in
// img.
func NewFrame(img *elfimage.Image, pc uint64, base []byte) *Frame {
	return &Frame{Base: base, img: img, pc: pc}
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
	fde, err := FDE(f.img, f.pc)
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
	le := binary.LittleEndian
	for off := 0; off+4 <= len(sec); {
		n := int(le.Uint32(sec[off:]))
		if n >= 0xfffffff0 {
			return nil, fmt.Errorf("64-bit .debug_frame is not supported")
		}
		end := off + 4 + n
		if n < 4+16 || end > len(sec) {
			off = end
			continue
		}
		cie := int(le.Uint32(sec[off+4:]))
		if cie != 0xffffffff {
			begin, size := le.Uint64(sec[off+8:]), le.Uint64(sec[off+16:])
			if pc-begin < size {
				if cie+4 > len(sec) {
					return nil, fmt.Errorf("FDE at %#x names CIE at %#x outside .debug_frame", off, cie)
				}
				cieEnd := cie + 4 + int(le.Uint32(sec[cie:]))
				if cieEnd > len(sec) || cieEnd < cie {
					return nil, fmt.Errorf("CIE at %#x runs past .debug_frame", cie)
				}
				// A two-entry .debug_frame: the CIE at offset 0, then the
				// FDE pointing at it.
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
			}
		}
		off = end
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
