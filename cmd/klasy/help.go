package main

import "embed"

// Each command's help text is help/NAME.txt, as 'klasy help NAME'
// prints it (with the texts a command shares, such as help/target.txt,
// appended by the command).
//
//go:embed help/*.txt
var helpFiles embed.FS

// helpText is the text of help/NAME.txt.
func helpText(name string) string {
	b, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic("klasy: no help text: " + err.Error())
	}
	return string(b)
}

// targetHelp ends the help of each command that acts on one kernel;
// domainsHelp that of each command that also takes --domains FILE.
var (
	targetHelp  = helpText("target")
	domainsHelp = helpText("domains")
)
