module github.com/klasy/klasy

go 1.26.0

require (
	github.com/go-delve/delve v1.27.2
	golang.org/x/arch v0.32.0
)
