module github.com/klasy/klasy

go 1.26.0

require (
	github.com/alecthomas/participle/v2 v2.1.4
	golang.org/x/sys v0.49.0
)
