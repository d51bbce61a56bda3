package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
)

// Exec runs argv on the machine of target t — in a lab through its
// agent, as 'klasy lab exec' does, else here — with its output to stdout
// and stderr, and returns its exit status.
func Exec(ctx context.Context, t Target, argv []string, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("no command to run")
	}
	switch t := t.(type) {
	case *agentTarget:
		code, err := t.c.Exec(ctx, argv, nil, stdout, stderr)
		if err != nil {
			return 0, fmt.Errorf("running %s in %s: %w", argv[0], t.Name(), t.explainErr(err))
		}
		return code, nil
	case *localTarget:
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			return ee.ExitCode(), nil
		}
		if err != nil {
			return 0, fmt.Errorf("running %s: %w", argv[0], err)
		}
		return 0, nil
	}
	return 0, fmt.Errorf("%s runs no commands", t.Name())
}
