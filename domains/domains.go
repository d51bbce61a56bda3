// Package domains reads a domains file: the kernels ("domains", after
// Xen's) that one klasy command drives at once, how klasy reaches the
// agent in each, and the key material of the mutual TLS between them.
//
//	# lab up --xen writes one like this into the lab's directory.
//	ca:
//	  cert: keys/ca.crt        # the CA of this file: it signed every certificate below
//	  key: keys/ca.key         # only `klasy agent keys` needs it, to sign new ones
//	controller:                # klasy on the host: the one client agents serve
//	  cert: keys/controller.crt
//	  key: keys/controller.key
//	domains:
//	  - name: dom0
//	    address: 127.0.0.1:40111   # the agent's host:port
//	    cert: keys/dom0.crt        # the agent's certificate and key, which
//	    key: keys/dom0.key         # the agent is started with
//	  - name: domU1
//	    address: 127.0.0.1:40112
//	    cert: keys/domU1.crt
//	    key: keys/domU1.key
//
// Relative paths are relative to the file's directory. Decoding is
// strict: an unknown key, a key given twice, a domain named twice, a
// missing required value, a second YAML document (after ---) or a named
// file that does not exist is an error at the FILE:LINE it concerns. A
// file holds at most MaxFileSize bytes and MaxDomains domains, and an
// error quotes at most the first MaxQuote characters of a value. Each domain gets its certificates from
// `klasy agent keys FILE` (GenerateKeys): one CA per domains file, so a
// certificate of another file is refused by every agent of this one.
//
// A domain is reached either over the network (address: an agent over
// mutual TLS, as above; ca and controller are then required) or as a lab
// of `klasy lab up` (lab: NAME, through the lab's own agent channel; no
// keys). Where its kernel's pieces are on the host is said by
//
//	domains:
//	  - name: b
//	    lab: b                        # or address:, with cert and key
//	    vmlinux: /path/vmlinux        # the kernel image, with DWARF
//	    headers: /path/build          # the kbuild tree modules build against
//	    modules: [drv/xen-netback.ko] # modules built with the klasy plugin
//
// A weave needs vmlinux and headers for a domain reached by address
// (NeedKernel); a lab knows its kernel, which they override.
package domains

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/klasy/klasy/agent"
	"github.com/klasy/klasy/internal/boundedread"
)

// The bounds on a domains file: its size, the domains it lists, and how
// much of a value an error quotes.
const (
	MaxFileSize = 1 << 20
	MaxDomains  = 1024
	MaxQuote    = 80
)

// maxPath is the longest path the kernel takes (PATH_MAX, with its NUL):
// a longer one names no file, and is quoted only in part.
const maxPath = 4096

// clip is s, cut to its first n characters and "…" when longer.
func clip(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// quote is a value of the file as an error quotes it: in Go's quotes, at
// most MaxQuote characters of it.
func quote(s string) string {
	return strconv.Quote(clip(s, MaxQuote))
}

// nameOf is a domain's name as errors say it: as it is when it is a
// name, quoted (and clipped) when it is not.
func nameOf(d *Domain) string {
	if nameRE.MatchString(d.Name) {
		return d.Name
	}
	return quote(d.Name)
}

// File is a decoded domains file. Paths in it are absolute once Parse or
// Load returns.
type File struct {
	// Path is the file it was read from.
	Path       string   `yaml:"-"`
	CA         KeyPair  `yaml:"ca"`
	Controller KeyPair  `yaml:"controller"`
	Domains    []Domain `yaml:"domains"`
}

// KeyPair is a certificate and its private key, PEM files.
type KeyPair struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Domain is one kernel klasy drives.
type Domain struct {
	// Name names the domain in commands and traces (file@domain in
	// pointcuts), and is the name its agent's certificate is issued to.
	Name string `yaml:"name"`
	// Lab is the name of a lab of klasy lab up the domain is (reached
	// through the lab's agent channel); Address is the host:port of an
	// agent reached over mutual TLS. Exactly one is given.
	Lab     string `yaml:"lab"`
	Address string `yaml:"address"`
	// KeyPair is the agent's certificate and key: the agent is started
	// with them; the controller checks the agent's certificate against
	// the CA and Name, and never needs the key.
	KeyPair `yaml:",inline"`
	// Vmlinux is the domain's kernel image with DWARF, Headers the kbuild
	// tree its modules build against (both required with Address; with
	// Lab, "" is the lab's own). Modules are modules built with the
	// klasy plugin that the domain runs, whose join points are woven too.
	Vmlinux string   `yaml:"vmlinux"`
	Headers string   `yaml:"headers"`
	Modules []string `yaml:"modules"`

	// Line is where the domain's entry starts in the file.
	Line int `yaml:"-"`
}

// nameRE: a domain name is also a DNS name in its certificate and a
// word in pointcuts (file@domain).
var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,62}$`)

// Error is a problem at a place in a domains file.
type Error struct {
	File string
	Line int // 0: the file as a whole
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Errors are every problem Parse found, in file order.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Load reads and checks the domains file at path: its syntax and keys
// (Parse), and that every file it names exists.
func Load(path string) (*File, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, n, err := parse(path, data)
	if err != nil {
		return nil, err
	}
	var errs Errors
	for _, ref := range f.files(n) {
		if len(ref.path) >= maxPath {
			errs = append(errs, &Error{File: path, Line: ref.line, Msg: fmt.Sprintf("%s %s: a path of %d bytes, longer than any the system takes (%d)", ref.what, quote(ref.path), len(ref.path), maxPath-1)})
			continue
		}
		st, err := os.Stat(ref.path)
		if err == nil && st.IsDir() != ref.dir {
			want := "a file"
			if ref.dir {
				want = "a directory"
			}
			errs = append(errs, &Error{File: path, Line: ref.line, Msg: fmt.Sprintf("%s %s: not %s", ref.what, ref.path, want)})
			continue
		}
		if err != nil {
			msg := err.Error()
			if errors.Is(err, os.ErrNotExist) {
				msg = fmt.Sprintf("%s: no such file", ref.path)
				if ref.generated {
					msg += fmt.Sprintf(" (klasy agent keys %s makes the key material)", path)
				}
			}
			errs = append(errs, &Error{File: path, Line: ref.line, Msg: ref.what + " " + msg})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

// ReadFile reads the domains file at path, refusing one over MaxFileSize
// bytes and special files such as devices.
func ReadFile(path string) ([]byte, error) {
	data, err := boundedread.File(path, MaxFileSize, "a domains file")
	if err != nil {
		return nil, fmt.Errorf("reading the domains file: %w", err)
	}
	return data, nil
}

// Parse decodes and checks a domains file's text without touching the
// files it names; path names it in errors and is where relative paths
// start from. Errors are Errors.
func Parse(path string, data []byte) (*File, error) {
	f, _, err := parse(path, data)
	return f, err
}

func parse(path string, data []byte) (*File, *yaml.Node, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	fail := func(line int, format string, a ...any) (*File, *yaml.Node, error) {
		return nil, nil, Errors{{File: path, Line: line, Msg: fmt.Sprintf(format, a...)}}
	}
	if len(data) > MaxFileSize {
		return fail(0, "larger than the %s limit for a domains file", boundedread.Size(MaxFileSize))
	}
	var root yaml.Node
	docs := yaml.NewDecoder(bytes.NewReader(data))
	if err := docs.Decode(&root); err != nil && err != io.EOF {
		return nil, nil, yamlErrors(path, err)
	}
	if len(root.Content) == 0 {
		return fail(0, "empty domains file")
	}
	// Every document is read: a second one would be ignored silently.
	var next yaml.Node
	switch err := docs.Decode(&next); {
	case err == io.EOF:
	case err != nil:
		return nil, nil, yamlErrors(path, err)
	default:
		return fail(next.Line, "a second YAML document (after ---): a domains file is one document")
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return fail(doc.Line, "want a mapping with ca, controller and domains")
	}
	if seq := lookup(doc, "domains"); seq != nil && seq.Kind == yaml.SequenceNode && len(seq.Content) > MaxDomains {
		return fail(seq.Content[MaxDomains].Line, "domain %d: more than the limit of %d domains in a domains file", MaxDomains+1, MaxDomains)
	}
	f := &File{Path: path}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil {
		return nil, nil, yamlErrors(path, err)
	}
	var errs Errors
	add := func(line int, format string, a ...any) {
		errs = append(errs, &Error{File: path, Line: line, Msg: fmt.Sprintf(format, a...)})
	}
	need := func(n *yaml.Node, val string, keys ...string) {
		if val != "" {
			return
		}
		line := doc.Line
		for i := range keys {
			if v := lookup(doc, keys[:i+1]...); v != nil {
				line = v.Line
			}
		}
		add(line, "%s: missing", strings.Join(keys, "."))
	}
	// The key material is the controller's for agents reached by
	// address; labs need none.
	if slices.ContainsFunc(f.Domains, func(d Domain) bool { return d.Address != "" }) {
		need(doc, f.CA.Cert, "ca", "cert")
		need(doc, f.Controller.Cert, "controller", "cert")
		need(doc, f.Controller.Key, "controller", "key")
	}
	seq := lookup(doc, "domains")
	if seq == nil || len(f.Domains) == 0 {
		line := doc.Line
		if seq != nil {
			line = seq.Line
		}
		add(line, "domains: none listed")
	}
	seen := map[string]int{}
	for i := range f.Domains {
		d := &f.Domains[i]
		item := seq.Content[i]
		d.Line = item.Line
		lineOf := func(key string) int {
			if v := lookup(item, key); v != nil {
				return v.Line
			}
			return item.Line
		}
		switch {
		case d.Name == "":
			add(item.Line, "domain %d: name: missing", i+1)
		case !nameRE.MatchString(d.Name):
			add(lineOf("name"), "domain name %s: use a letter, then letters, digits or '-' (at most 63)", quote(d.Name))
		default:
			key := strings.ToLower(d.Name)
			if first, dup := seen[key]; dup {
				add(lineOf("name"), "domain %s is named twice (first at line %d)", d.Name, first)
			} else {
				seen[key] = lineOf("name")
			}
		}
		switch {
		case d.Address != "" && d.Lab != "":
			add(lineOf("lab"), "domain %s: lab and address: give one (a lab is reached through its own agent channel)", nameOf(d))
		case d.Address == "" && d.Lab == "":
			add(item.Line, "domain %s: lab or address: missing", nameOf(d))
		case d.Address != "":
			if err := checkAddress(d.Address); err != nil {
				add(lineOf("address"), "domain %s: address %s: %v", nameOf(d), quote(d.Address), err)
			}
		case d.Cert != "" || d.Key != "":
			add(lineOf(first(d.Cert != "", "cert", "key")), "domain %s: cert and key are an agent's reached by address, not a lab's", nameOf(d))
		}
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}
	dir := filepath.Dir(path)
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	for _, p := range []*string{&f.CA.Cert, &f.CA.Key, &f.Controller.Cert, &f.Controller.Key} {
		abs(p)
	}
	for i := range f.Domains {
		d := &f.Domains[i]
		for _, p := range []*string{&d.Cert, &d.Key, &d.Vmlinux, &d.Headers} {
			abs(p)
		}
		for j := range d.Modules {
			abs(&d.Modules[j])
		}
	}
	return f, doc, nil
}

func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" {
		return errors.New("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %s: want 1..65535", quote(port))
	}
	return nil
}

// lookup follows keys down mappings from n and returns the value node of
// the last, nil if one is missing.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// fileRef is a file the domains file names, where.
type fileRef struct {
	what, path string
	line       int
	generated  bool // key material klasy agent keys makes
	dir        bool // a directory
}

// files lists the files the controller needs, and the domains' own
// certificates and keys where given.
func (f *File) files(doc *yaml.Node) []fileRef {
	at := func(n *yaml.Node, keys ...string) int {
		if v := lookup(n, keys...); v != nil {
			return v.Line
		}
		return 0
	}
	var refs []fileRef
	add := func(what, path string, line int, generated, dir bool) {
		if path != "" {
			refs = append(refs, fileRef{what, path, line, generated, dir})
		}
	}
	add("ca.cert", f.CA.Cert, at(doc, "ca", "cert"), true, false)
	add("controller.cert", f.Controller.Cert, at(doc, "controller", "cert"), true, false)
	add("controller.key", f.Controller.Key, at(doc, "controller", "key"), true, false)
	add("ca.key", f.CA.Key, at(doc, "ca", "key"), true, false)
	seq := lookup(doc, "domains")
	for i, d := range f.Domains {
		item := seq.Content[i]
		add("domain "+d.Name+" cert", d.Cert, at(item, "cert"), true, false)
		add("domain "+d.Name+" key", d.Key, at(item, "key"), true, false)
		add("domain "+d.Name+" vmlinux", d.Vmlinux, at(item, "vmlinux"), false, false)
		add("domain "+d.Name+" headers", d.Headers, at(item, "headers"), false, true)
		mods := lookup(item, "modules")
		for j, m := range d.Modules {
			line := at(item, "modules")
			if mods != nil && j < len(mods.Content) {
				line = mods.Content[j].Line
			}
			add("domain "+d.Name+" module", m, line, false, false)
		}
	}
	return refs
}

var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
var notFoundRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
var definedRE = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)

// yamlErrors turns yaml.v3's errors into FILE:LINE errors.
func yamlErrors(path string, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var errs Errors
	for _, m := range msgs {
		e := &Error{File: path, Msg: strings.TrimPrefix(m, "yaml: ")}
		if sm := yamlLineRE.FindStringSubmatch(m); sm != nil {
			e.Line, _ = strconv.Atoi(sm[1])
			e.Msg = sm[2]
		}
		if sm := notFoundRE.FindStringSubmatch(e.Msg); sm != nil {
			e.Msg = fmt.Sprintf("unknown key %s", quote(sm[1]))
		}
		if sm := definedRE.FindStringSubmatch(e.Msg); sm != nil {
			e.Msg = fmt.Sprintf("mapping key %s already defined at line %s", quote(sm[1]), sm[2])
		}
		// Whatever else yaml.v3 quotes of the file, not all of it.
		e.Msg = clip(e.Msg, 4*MaxQuote)
		errs = append(errs, e)
	}
	return errs
}

// NeedKernel says, at the domain's line, what of its kernel is missing
// for weaving into it: a domain reached by address needs vmlinux and
// headers, a lab knows its own.
func (f *File) NeedKernel(d *Domain) error {
	if d.Lab != "" {
		return nil
	}
	var missing []string
	if d.Vmlinux == "" {
		missing = append(missing, "vmlinux")
	}
	if d.Headers == "" {
		missing = append(missing, "headers")
	}
	if len(missing) == 0 {
		return nil
	}
	return &Error{File: f.Path, Line: d.Line, Msg: fmt.Sprintf("domain %s: %s: missing; weaving into a domain reached by address needs its kernel image and headers (only a lab knows its kernel)", d.Name, strings.Join(missing, " and "))}
}

// Domain returns the domain called name.
func (f *File) Domain(name string) (*Domain, error) {
	for i := range f.Domains {
		if f.Domains[i].Name == name {
			return &f.Domains[i], nil
		}
	}
	names := make([]string, len(f.Domains))
	for i, d := range f.Domains {
		names[i] = d.Name
	}
	return nil, fmt.Errorf("%s names no domain %s (it has %s)", f.Path, quote(name), strings.Join(names, ", "))
}

// ClientTLS is the controller's TLS configuration for the agent of
// domain name: the controller's certificate, and only that domain's
// certificate from this file's CA accepted.
func (f *File) ClientTLS(name string) (*tls.Config, error) {
	d, err := f.Domain(name)
	if err != nil {
		return nil, err
	}
	if d.Address == "" {
		return nil, &Error{File: f.Path, Line: d.Line, Msg: "domain " + d.Name + " is lab " + d.Lab + ", reached through the lab's own channel, not over TLS"}
	}
	return agent.ClientTLSConfig(agent.TLSFiles{CA: f.CA.Cert, Cert: f.Controller.Cert, Key: f.Controller.Key}, d.Name)
}

// AgentTLS is what the agent of domain name is started with
// (klasy agent --tls-ca --tls-cert --tls-key).
func (f *File) AgentTLS(name string) (agent.TLSFiles, error) {
	d, err := f.Domain(name)
	if err != nil {
		return agent.TLSFiles{}, err
	}
	if d.Cert == "" || d.Key == "" {
		return agent.TLSFiles{}, &Error{File: f.Path, Line: d.Line, Msg: "domain " + d.Name + ": cert and key: missing"}
	}
	return agent.TLSFiles{CA: f.CA.Cert, Cert: d.Cert, Key: d.Key}, nil
}

// Dial connects to the agent of domain name over mutual TLS.
func (f *File) Dial(ctx context.Context, name string) (*agent.Client, error) {
	cfg, err := f.ClientTLS(name)
	if err != nil {
		return nil, err
	}
	d, _ := f.Domain(name)
	return agent.DialTLS(ctx, d.Address, cfg)
}
