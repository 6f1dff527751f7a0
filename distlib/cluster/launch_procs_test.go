package cluster

import (
	"reflect"
	"testing"
)

func TestCoLocated(t *testing.T) {
	cpus := func(n int) []int {
		c := make([]int, n)
		for i := range c {
			c[i] = i
		}
		return c
	}
	w := func(i int) Task { return Task{Worker, i} }
	tests := []struct {
		name string
		env  []string
		jobs map[string]int
		cpus []int
		pin  bool
		want map[Task]placement
	}{
		{"two workers on two cores", nil, map[string]int{"worker": 2}, cpus(2), true,
			map[Task]placement{w(0): {"1", []int{0}}, w(1): {"1", []int{1}}}},
		{"two workers on eight cores", nil, map[string]int{"worker": 2}, cpus(8), true,
			map[Task]placement{w(0): {"4", []int{0, 1, 2, 3}}, w(1): {"4", []int{4, 5, 6, 7}}}},
		{"unbound when asked", nil, map[string]int{"worker": 2}, cpus(8), false,
			map[Task]placement{w(0): {"4", nil}, w(1): {"4", nil}}},
		{"the CPUs this process may use", nil, map[string]int{"worker": 2}, []int{2, 3, 6, 7}, true,
			map[Task]placement{w(0): {"2", []int{2, 3}}, w(1): {"2", []int{6, 7}}}},
		{"chief first, the rest left over", nil, map[string]int{"worker": 2, "chief": 1}, cpus(7), true,
			map[Task]placement{{Chief, 0}: {"2", []int{0, 1}}, w(0): {"2", []int{2, 3}}, w(1): {"2", []int{4, 5}}}},
		{"more tasks than cores: unbound", nil, map[string]int{"worker": 3, "chief": 1}, cpus(2), true,
			map[Task]placement{{Chief, 0}: {"1", nil}, w(0): {"1", nil}, w(1): {"1", nil}, w(2): {"1", nil}}},
		{"ps jobs: unbound, ps tasks get one core", nil, map[string]int{"worker": 2, "ps": 1}, cpus(4), true,
			map[Task]placement{w(0): {"2", nil}, w(1): {"2", nil}, {PS, 0}: {"1", nil}}},
		{"the user's GOMAXPROCS wins and fits the share", []string{"HOME=/root", "GOMAXPROCS=1"}, map[string]int{"worker": 2}, cpus(4), true,
			map[Task]placement{w(0): {"", []int{0, 1}}, w(1): {"", []int{2, 3}}}},
		{"a GOMAXPROCS over the share: unbound", []string{"GOMAXPROCS=1", "GOMAXPROCS=3"}, map[string]int{"worker": 2}, cpus(4), true,
			map[Task]placement{w(0): {"", nil}, w(1): {"", nil}}},
		{"a GOMAXPROCS that is not a number: unbound", []string{"GOMAXPROCS=all"}, map[string]int{"worker": 2}, cpus(4), true,
			map[Task]placement{w(0): {"", nil}, w(1): {"", nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := coLocated(tt.env, tt.jobs, tt.cpus, tt.pin); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("coLocated(%v, %v, %v, %v) = %v, want %v", tt.env, tt.jobs, tt.cpus, tt.pin, got, tt.want)
			}
		})
	}
}
