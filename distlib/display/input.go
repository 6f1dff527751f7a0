package display

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Inputter is implemented by a Publisher that can ask the user for a line of text: the
// kernel sends the front end an input_request with the prompt, and with password set the
// front end hides what is typed.
type Inputter interface {
	Input(prompt string, password bool) (string, error)
}

// Input asks the user for a line of text after prompt, like Python's input(prompt), and
// returns it without its line ending. In a notebook the front end shows the prompt and a
// text box (interrupting the cell stops the wait); elsewhere the prompt goes to standard
// output and the line is read from standard input.
func Input(prompt string) (string, error) { return ask(prompt, false) }

// Password asks the user for a secret after prompt, like Python's getpass.getpass(prompt):
// in a notebook the front end hides what is typed (input_request with password: true).
// Outside a notebook it reads a line from standard input only when that is not a terminal,
// which would echo the secret: there it returns an error (pass the secret in an
// environment variable or a file instead).
func Password(prompt string) (string, error) { return ask(prompt, true) }

func ask(prompt string, password bool) (string, error) {
	if p := current(); p != nil {
		in, ok := p.(Inputter)
		if !ok {
			return "", fmt.Errorf("display: the notebook's publisher (%T) cannot ask for input", p)
		}
		return in.Input(prompt, password)
	}
	if password {
		if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return "", errors.New("display: Password outside a notebook would echo the secret on the terminal; pass it in an environment variable or a file instead")
		}
	}
	fmt.Fprint(os.Stdout, prompt)
	return readLine(os.Stdin)
}

// readLine reads one line from r, without its line ending; a last line without one counts.
// It reads a byte at a time so that what follows the line stays in r for later readers.
func readLine(r io.Reader) (string, error) {
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			line = append(line, b[0])
		}
		if err == io.EOF && len(line) > 0 {
			break
		}
		if err != nil {
			return "", fmt.Errorf("display: reading standard input: %w", err)
		}
	}
	return strings.TrimRight(string(line), "\r"), nil
}
