package distribute

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"godist/distlib/optim"
)

func TestPSOptimizerConstructors(t *testing.T) {
	catch := func(fn func() *PSOptimizer) (o *PSOptimizer, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%v", p)
			}
		}()
		return fn(), nil
	}
	tests := []struct {
		name string
		fn   func() *PSOptimizer
		want optim.Spec
		err  string
	}{
		{"sgd", func() *PSOptimizer { return NewPSSGD(0.5, 0.25) }, optim.NewSGD(0.5, 0.25, false), ""},
		{"adam", func() *PSOptimizer { return NewPSAdam(0.5) }, optim.NewAdam(0.5, 0.9, 0.999, 1e-7), ""},
		{"rmsprop", func() *PSOptimizer { return NewPSRMSprop(0.5) }, optim.NewRMSprop(0.5, 0.9, 0, 1e-7), ""},
		{"sgd momentum 1", func() *PSOptimizer { return NewPSSGD(0.5, 1) }, optim.Spec{}, "NewPSSGD(learning_rate=0.5, momentum=1)"},
		{"sgd lr 0", func() *PSOptimizer { return NewPSSGD(0, 0) }, optim.Spec{}, "want learning_rate > 0"},
		{"rmsprop lr -1", func() *PSOptimizer { return NewPSRMSprop(-1) }, optim.Spec{}, "NewPSRMSprop(learning_rate=-1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := catch(tc.fn)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("panic = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := o.Spec(); got != tc.want {
				t.Fatalf("Spec() = %+v, want %+v", got, tc.want)
			}
			if o.String() != tc.want.String() {
				t.Fatalf("String() = %q, want %q", o.String(), tc.want.String())
			}
		})
	}
	nesterov := optim.NewSGD(0.1, 0.9, true)
	if o, err := NewPSOptimizer(nesterov); err != nil || o.Spec() != nesterov {
		t.Errorf("NewPSOptimizer(%v) = %v, %v; want the spec", nesterov, o, err)
	}
	bad := optim.NewAdam(0.1, 0.9, 1.5, 1e-7)
	if _, err := NewPSOptimizer(bad); !errors.Is(err, optim.ErrInvalidSpec) || !strings.Contains(err.Error(), "beta2 1.5") {
		t.Errorf("NewPSOptimizer(%+v) error = %v, want an optim.ErrInvalidSpec naming beta2 1.5", bad, err)
	}
}
