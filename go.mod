module github.com/klasy/klasy

go 1.26
