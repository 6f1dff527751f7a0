package transport

import (
	"os"
	"strconv"
	"strings"
	"sync"
)

var (
	sockMaxOnce sync.Once
	sockMax     map[string]int
)

// socketBufferMax returns the system's cap on a socket buffer size a program sets
// (/proc/sys/net/core/rmem_max or wmem_max on Linux), or -1 where it cannot be read.
func socketBufferMax(name string) int {
	sockMaxOnce.Do(func() {
		sockMax = map[string]int{}
		for _, n := range []string{"rmem_max", "wmem_max"} {
			sockMax[n] = -1
			if b, err := os.ReadFile("/proc/sys/net/core/" + n); err == nil {
				if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					sockMax[n] = v
				}
			}
		}
	})
	if v, ok := sockMax[name]; ok {
		return v
	}
	return -1
}
