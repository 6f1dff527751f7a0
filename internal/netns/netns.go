// Package netns gives a test several hosts on one machine: Linux network namespaces, each
// with one interface (eth0) plugged by a veth pair into a bridge that lives in a namespace of
// its own, with addresses in a private /24 that exists only inside those namespaces. Nothing
// is added to the machine's own network namespace, and traffic between the hosts never leaves
// them.
//
// New creates the hosts and removes them (namespaces, links, the processes left inside) when
// the test ends, failed or not. Command and Run start processes on a host (`ip netns exec`);
// CutLink and RestoreLink unplug and replug a host's cable, so that its peers see timeouts
// rather than refused connections. New skips the test with a reason when it does not run as
// root, when `ip` is missing, or when the kernel does not let it create namespaces.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// MaxHosts is the largest number of hosts New makes (one /24).
const MaxHosts = 250

// prefix starts the name of every namespace this package creates: godist-<pid>-<seq>-<host>.
const prefix = "godist-"

// Iface is the name of each host's interface.
const Iface = "eth0"

// Hosts is a set of network namespaces joined by a bridge.
type Hosts struct {
	t      testing.TB
	ip     string   // path of the ip command
	names  []string // namespace of each host
	bridge string   // namespace holding the bridge "br0" and the hosts' peer ends h<i>
	subnet string   // "10.251.<k>"
	once   sync.Once
}

var seq atomic.Uint32

// Unavailable returns why no hosts can be made here ("" when they can, as far as can be told
// without trying): not Linux, not root, or no `ip` command.
func Unavailable() string {
	if runtime.GOOS != "linux" { // macOS's `ip` (iproute2mac) has no namespaces
		return "network namespaces need Linux, not " + runtime.GOOS
	}
	if os.Geteuid() != 0 {
		return "needs root to create network namespaces (run the tests as root, as CI does)"
	}
	if _, err := lookPath("ip"); err != nil {
		return "missing the ip command: install Debian's iproute2 (bash installer/deps.sh)"
	}
	return ""
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("netns: %s not found on PATH or in /usr/sbin", name)
}

// New creates n hosts (1 <= n <= MaxHosts) with addresses 10.251.k.1 ... 10.251.k.n/24 (k
// differs between the sets of one test process, for readable logs; sets are separate
// networks in any case). It skips the test when namespaces cannot be made here.
func New(t testing.TB, n int) *Hosts {
	t.Helper()
	if n < 1 || n > MaxHosts {
		t.Fatalf("netns: New(t, %d): want 1 to %d hosts", n, MaxHosts)
	}
	if reason := Unavailable(); reason != "" {
		t.Skip("netns: " + reason)
	}
	ip, _ := lookPath("ip")
	removeStale(ip)
	k := seq.Add(1)
	base := fmt.Sprintf("%s%d-%d-", prefix, os.Getpid(), k)
	h := &Hosts{t: t, ip: ip, bridge: base + "br", subnet: fmt.Sprintf("10.251.%d", k%250+1)}
	for i := range n {
		h.names = append(h.names, base+strconv.Itoa(i))
	}
	// The first namespace tells whether this kernel (or sandbox) permits them at all.
	if out, err := h.ipRun("netns", "add", h.bridge); err != nil {
		t.Skipf("netns: creating a network namespace is not permitted here: %v: %s", err, out)
	}
	t.Cleanup(h.remove)
	if err := h.setup(); err != nil {
		t.Fatalf("netns: set up %d hosts: %v", n, err)
	}
	return h
}

func (h *Hosts) setup() error {
	cmds := [][]string{
		{"-n", h.bridge, "link", "add", "br0", "type", "bridge"},
		{"-n", h.bridge, "link", "set", "br0", "up"},
	}
	for i, ns := range h.names {
		if out, err := h.ipRun("netns", "add", ns); err != nil {
			return fmt.Errorf("add namespace %s: %v: %s", ns, err, out)
		}
		peer := "h" + strconv.Itoa(i)
		cmds = append(cmds,
			// Both ends are created directly in their namespaces: nothing in the machine's own.
			[]string{"link", "add", Iface, "netns", ns, "type", "veth", "peer", "name", peer, "netns", h.bridge},
			[]string{"-n", h.bridge, "link", "set", peer, "master", "br0"},
			[]string{"-n", h.bridge, "link", "set", peer, "up"},
			[]string{"-n", ns, "addr", "add", h.Addr(i) + "/24", "dev", Iface},
			[]string{"-n", ns, "link", "set", Iface, "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, c := range cmds {
		if out, err := h.ipRun(c...); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	for i := range h.names {
		if err := h.waitCarrier(i, true); err != nil {
			return err
		}
	}
	return nil
}

func (h *Hosts) ipRun(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, h.ip, args...).CombinedOutput()
	return bytes.TrimSpace(out), err
}

// Len returns the number of hosts.
func (h *Hosts) Len() int { return len(h.names) }

// Addr returns host i's IPv4 address, such as "10.251.1.1".
func (h *Hosts) Addr(i int) string {
	h.check(i)
	return fmt.Sprintf("%s.%d", h.subnet, i+1)
}

// Name returns host i's namespace name (for `ip netns exec NAME`).
func (h *Hosts) Name(i int) string {
	h.check(i)
	return h.names[i]
}

func (h *Hosts) check(i int) {
	if i < 0 || i >= len(h.names) {
		panic(fmt.Sprintf("netns: host %d outside the %d hosts", i, len(h.names)))
	}
}

// Command returns a command that runs name with args on host i (through `ip netns exec`),
// in its own process group, killed with the group when ctx ends. The test starts it; what it
// leaves running on the host is killed when the test ends.
func (h *Hosts) Command(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	h.check(i)
	cmd := exec.CommandContext(ctx, h.ip, append([]string{"netns", "exec", h.names[i], name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// Run runs name with args on host i and returns its combined output; the error names the
// host and holds the output when the command fails.
func (h *Hosts) Run(ctx context.Context, i int, name string, args ...string) ([]byte, error) {
	out, err := h.Command(ctx, i, name, args...).CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return out, fmt.Errorf("netns: host %d (%s): %s %s: %w: %s", i, h.Addr(i), name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// CutLink unplugs host i's cable: the bridge's end of its veth pair goes down, so packets to
// and from the host are dropped (connections time out; nothing is refused).
func (h *Hosts) CutLink(i int) error {
	h.check(i)
	if out, err := h.ipRun("-n", h.bridge, "link", "set", "h"+strconv.Itoa(i), "down"); err != nil {
		return fmt.Errorf("netns: cut link of host %d: %v: %s", i, err, out)
	}
	return h.waitCarrier(i, false)
}

// RestoreLink plugs host i's cable back and waits until the link is up.
func (h *Hosts) RestoreLink(i int) error {
	h.check(i)
	if out, err := h.ipRun("-n", h.bridge, "link", "set", "h"+strconv.Itoa(i), "up"); err != nil {
		return fmt.Errorf("netns: restore link of host %d: %v: %s", i, err, out)
	}
	return h.waitCarrier(i, true)
}

// waitCarrier waits (bounded) until host i's interface has or has lost its carrier.
func (h *Hosts) waitCarrier(i int, up bool) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := h.ipRun("-n", h.names[i], "-o", "link", "show", Iface)
		if err != nil {
			return fmt.Errorf("netns: host %d: ip link show: %v: %s", i, err, out)
		}
		flags := ""
		if a, b, ok := strings.Cut(string(out), "<"); ok && a != "" {
			flags, _, _ = strings.Cut(b, ">")
		}
		has := strings.Contains(","+flags+",", ",LOWER_UP,")
		if has == up {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: host %d: link carrier still %v after 5s: %s", i, has, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// remove kills what runs on the hosts and deletes the namespaces (and with them the links).
func (h *Hosts) remove() {
	h.once.Do(func() {
		var errs []error
		for _, ns := range append(append([]string{}, h.names...), h.bridge) {
			if _, err := os.Stat(filepath.Join("/run/netns", ns)); err != nil {
				continue
			}
			// Processes the test started on the host, found by id.
			if out, err := h.ipRun("netns", "pids", ns); err == nil {
				for _, f := range strings.Fields(string(out)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			if out, err := h.ipRun("netns", "del", ns); err != nil {
				errs = append(errs, fmt.Errorf("delete namespace %s: %v: %s", ns, err, out))
			}
		}
		if err := errors.Join(errs...); err != nil {
			h.t.Errorf("netns: cleanup: %v", err)
		}
	})
}

// removeStale deletes the namespaces left by test processes that died before their cleanup
// (godist-<pid>-... whose process no longer exists).
func removeStale(ip string) {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // its process is alive
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = exec.CommandContext(ctx, ip, "netns", "del", e.Name()).Run()
		cancel()
	}
}
