package score

import (
	"crypto/sha256"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/klasy/klasy/accessinfer"
	"github.com/klasy/klasy/dwarfmap/elfimage"
	"github.com/klasy/klasy/internal/testenv"
	"github.com/klasy/klasy/lab"
)

// TestAccessesHash logs a hash of every field of every access inferred
// on the built and on Debian's vmlinux, and the counts: a change meant
// only to make inference faster must leave both hashes as they were.
// Set ACCESSINFER_HASH=FILE to also append the two lines to FILE;
// ACCESSINFER_HASH_KERNEL=built (or debian) keeps to one image, to time
// inference alone as a whole process.
func TestAccessesHash(t *testing.T) {
	out := os.Getenv("ACCESSINFER_HASH")
	if out == "" {
		t.Skip("ACCESSINFER_HASH=FILE not set")
	}
	var lines string
	for _, kind := range []string{lab.Built, lab.Debian} {
		if only := os.Getenv("ACCESSINFER_HASH_KERNEL"); only != "" && only != kind {
			continue
		}
		k, err := lab.FindKernel(kind)
		testenv.Need(t, kind+"-kernel", err)
		img, err := elfimage.Open(k.Vmlinux)
		if err != nil {
			t.Fatal(err)
		}
		start, cpu := time.Now(), cpuTime()
		res, err := accessinfer.Infer(img, accessinfer.Options{})
		wall, cpu := time.Since(start), cpuTime()-cpu
		img.Close()
		if err != nil {
			t.Fatal(err)
		}
		// Every field: Access's String prints only some of them.
		type fields accessinfer.Access
		h := sha256.New()
		for _, a := range res.Accesses {
			fmt.Fprintf(h, "%+v\n", fields(a))
		}
		l := fmt.Sprintf("%s: %d accesses, %d functions, %d insns, %d mem insns, sha256 %x\n",
			kind, len(res.Accesses), res.Funcs, res.Insns, res.MemInsns, h.Sum(nil))
		t.Logf("%s: inference %v, CPU %v", kind, wall.Round(time.Millisecond), cpu.Round(time.Millisecond))
		t.Log(l)
		lines += l
	}
	f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(lines); err != nil {
		t.Fatal(err)
	}
}
