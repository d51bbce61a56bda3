package records

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseStacks(t *testing.T) {
	in := "stacks abi=19 depth=32 room=4096 used=2 full=3 collisions=4\n" +
		"stack id=18364758544493064720 frames=ffffffff8a1b2c3d,ffffffff8a000010\n" +
		"stack id=7 frames=-\n" +
		"stack id=18364758544493064720 frames=ffffffff8a1b2c3d,ffffffff8a000010\n"
	s, err := ParseStacks([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64][]uint64{18364758544493064720: {0xffffffff8a1b2c3d, 0xffffffff8a000010}, 7: nil}
	if s.Depth != 32 || s.Room != 4096 || s.Full != 3 || s.Collisions != 4 || !reflect.DeepEqual(s.Frames, want) {
		t.Errorf("got %+v, want depth 32 room 4096 full 3 collisions 4 frames %v", s, want)
	}
}

func TestParseStacksErrors(t *testing.T) {
	const hdr = "stacks abi=19 depth=2 room=4 used=0 full=0 collisions=0\n"
	for _, tt := range []struct{ in, want string }{
		{"stacks abi=10 depth=2 room=4 used=0 full=0 collisions=0\n", "runtime ABI 10, this klasy reads ABI 19"},
		{"stack id=1 frames=-\n", "want the stacks line first"},
		{hdr + "stack id=1 frames=ffff,zz\n", `"zz" is not a hex address`},
		{hdr + "stack id=1 frames=1,2,3\n", "stack 1 has 3 frames, the table keeps 2"},
		{hdr + "stack id=1 frames=1 extra=2\n", "unknown key extra"},
		{hdr + "stacks abi=19 depth=2 room=4 used=0 full=0 collisions=0\n", "only there"},
		{hdr + "frame id=1\n", `unknown line kind "frame"`},
		{"stacks abi=19 depth=2 room=4 used=0 full=0\n", "no collisions="},
	} {
		_, err := ParseStacks([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseStacks(%q) error = %v, want one containing %q", tt.in, err, tt.want)
		}
	}
}
