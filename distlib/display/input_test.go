package display

import (
	"errors"
	"strings"
	"testing"
)

type askPublisher struct {
	prompts   []string
	passwords []bool
	answer    string
	err       error
}

func (*askPublisher) Display(Bundle, Bundle, string) {}
func (*askPublisher) Update(Bundle, Bundle, string)  {}
func (*askPublisher) ClearOutput(bool)               {}
func (a *askPublisher) Input(prompt string, password bool) (string, error) {
	a.prompts = append(a.prompts, prompt)
	a.passwords = append(a.passwords, password)
	return a.answer, a.err
}

type showOnly struct{}

func (showOnly) Display(Bundle, Bundle, string) {}
func (showOnly) Update(Bundle, Bundle, string)  {}
func (showOnly) ClearOutput(bool)               {}

func TestInputPassword(t *testing.T) {
	stdinErr := errors.New("stdin not allowed")
	tests := []struct {
		name     string
		ask      func(string) (string, error)
		password bool
		err      error
	}{
		{"input", Input, false, nil},
		{"password", Password, true, nil},
		{"refused", Password, true, stdinErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &askPublisher{answer: "s3cret", err: tt.err}
			prev := SetPublisher(p)
			defer SetPublisher(prev)
			got, err := tt.ask("key? ")
			if !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if tt.err == nil && got != "s3cret" {
				t.Errorf("answer %q, want s3cret", got)
			}
			if len(p.prompts) != 1 || p.prompts[0] != "key? " || p.passwords[0] != tt.password {
				t.Errorf("asked %q password %v, want %q password %v", p.prompts, p.passwords, "key? ", tt.password)
			}
		})
	}
	prev := SetPublisher(showOnly{})
	defer SetPublisher(prev)
	if _, err := Password("key? "); err == nil || !strings.Contains(err.Error(), "cannot ask for input") {
		t.Errorf("Password with a publisher that cannot ask = %v, want an error", err)
	}
}

func TestReadLine(t *testing.T) {
	tests := []struct {
		in, want, rest string
		fails          bool
	}{
		{"abc\nnext", "abc", "next", false},
		{"abc\r\n", "abc", "", false},
		{"last", "last", "", false},
		{"\n", "", "", false},
		{"", "", "", true},
	}
	for _, tt := range tests {
		r := strings.NewReader(tt.in)
		got, err := readLine(r)
		if (err != nil) != tt.fails || got != tt.want {
			t.Errorf("readLine(%q) = %q, %v, want %q (fails %v)", tt.in, got, err, tt.want, tt.fails)
		}
		if rest := tt.in[len(tt.in)-r.Len():]; rest != tt.rest {
			t.Errorf("readLine(%q) left %q, want %q", tt.in, rest, tt.rest)
		}
	}
}
