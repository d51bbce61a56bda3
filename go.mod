module github.com/klasy/klasy

go 1.26.0

require (
	github.com/alecthomas/participle/v2 v2.1.4
	github.com/go-delve/delve v1.27.2
	golang.org/x/arch v0.32.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
)

require gopkg.in/yaml.v3 v3.0.1
