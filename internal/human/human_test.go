package human

import (
	"testing"
	"time"
)

func TestHuman(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{Plural(1, "hook"), "1 hook"},
		{Plural(0, "hook"), "0 hooks"},
		{Plural(2, "record"), "2 records"},
		{Value(-22), "-22"},                               // an errno
		{Value(-0x777ffc4b1800), "0xffff888003b4e800"},    // a kernel address
		{Value(-4096), "0xfffffffffffff000"},              // above the errnos: an address
		{Value(-0x1000000000000), "18446462598732840960"}, // neither
		{Value(1500), "1500"},
		{Dur(340 * time.Millisecond), "340 ms"},
		{Dur(2345 * time.Millisecond), "2.3 s"},
		{DurPrecise(250 * time.Microsecond), "250 µs"},
		{DurPrecise(3500 * time.Microsecond), "3.5 ms"},
		{NS(999), "999 ns"},
		{NS(1500), "1.5 µs"},
		{Micros(1_060), "1.06"},
		{ElapsedMicros(-1_060), "-1.06"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
