package accessinfer

import (
	"reflect"
	"testing"
)

// TestTrackedValuesHoldNoPointers: the values tracking copies at every
// instruction (registers, stack slots, DWARF's facts) and look's cached
// results hold no pointers, so that copying them needs no write barrier
// and the collector has nothing in them to scan (issue 19's index time:
// the collector was a fifth of inference's instructions).
func TestTrackedValuesHoldNoPointers(t *testing.T) {
	for _, v := range []any{val{}, slot{}, fact{}, regVal{}, object{}, memResult{}, lookEntry{}, [16]val{}} {
		if ty := reflect.TypeOf(v); holdsPointer(ty) {
			t.Errorf("%v holds a pointer", ty)
		}
	}
}

func holdsPointer(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.String, reflect.Map, reflect.Interface,
		reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return holdsPointer(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if holdsPointer(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}
