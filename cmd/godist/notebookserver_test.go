package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"godist/internal/freeport"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"godist/internal/syncbuf"
)

// This file starts Debian's Notebook 6 server for the browser test, with Jupyter's
// config, data and runtime directories in a temporary directory: the godist kernelspec
// of a freshly built binary, the widget nbextension enabled in that config, a random
// free port and a random token.

// widgetExtensionJS is where Debian's jupyter-nbextension-jupyter-js-widgets puts the
// Notebook 6 widget front end.
const widgetExtensionJS = "/usr/share/jupyter/nbextensions/jupyter-js-widgets/extension.js"

// notebookServer is a running Notebook 6 server.
type notebookServer struct {
	URL   string // http://127.0.0.1:PORT
	Token string
	Dir   string // the notebook directory
	Bin   string // the godist binary its kernelspec starts
	cmd   *exec.Cmd
	log   *syncbuf.Buffer
}

// startNotebookServer builds godist, installs its kernelspec into a temporary
// JUPYTER_DATA_DIR and starts the Notebook server on it; it stops the server, its kernels
// and their workers when the test ends. It skips the test when the notebook server or the
// widget extension is missing. args are more options for the server.
func startNotebookServer(t *testing.T, args ...string) *notebookServer {
	t.Helper()
	kernelNeedPython(t, "notebook, jupyter_client")
	if _, err := os.Stat(widgetExtensionJS); err != nil {
		t.Skipf("the Notebook widget extension is missing (installer/deps.sh installs jupyter-nbextension-jupyter-js-widgets): %v", err)
	}
	bin := kernelTestBinary(t)
	root := t.TempDir()
	s := &notebookServer{Dir: filepath.Join(root, "notebooks"), Bin: bin, log: &syncbuf.Buffer{}}
	config := filepath.Join(root, "config")
	for _, d := range []string{s.Dir, filepath.Join(config, "nbconfig")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The widget front end, enabled in this config only (Debian's package also enables it
	// system-wide in /etc/jupyter/nbconfig/notebook.d; this does not depend on that).
	nbconfig := `{"load_extensions": {"jupyter-js-widgets/extension": true}}` + "\n"
	if err := os.WriteFile(filepath.Join(config, "nbconfig", "notebook.json"), []byte(nbconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"JUPYTER_CONFIG_DIR="+config,
		"JUPYTER_DATA_DIR="+filepath.Join(root, "data"),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(root, "runtime"),
		"JUPYTER_PATH=",
		"JUPYTER_CONFIG_PATH=",
		"IPYTHONDIR="+filepath.Join(root, "ipython"),
		"GODIST_HISTORY="+filepath.Join(root, "history.jsonl"),
		"JUPYTER_PLATFORM_DIRS=0")
	if out, err := kernelRun(t, env, time.Minute, bin, "install"); err != nil {
		t.Fatalf("godist install: %v\n%s", err, out)
	}
	s.Token = randomHex(t, 24)
	var lastErr error
	for try := 0; try < 3; try++ { // a free port can be taken between probe and bind
		port := freePort(t)
		s.URL = "http://127.0.0.1:" + strconv.Itoa(port)
		s.log = &syncbuf.Buffer{}
		s.cmd = exec.Command(kernelPython, "-m", "notebook", "--no-browser", "--allow-root",
			"--ip=127.0.0.1", "--port="+strconv.Itoa(port), "--port-retries=0",
			"--NotebookApp.token="+s.Token, "--NotebookApp.password=",
			"--notebook-dir="+s.Dir, "--NotebookApp.open_browser=False",
			"--MappingKernelManager.cull_idle_timeout=0")
		s.cmd.Args = append(s.cmd.Args, args...)
		s.cmd.Env = env
		s.cmd.Dir = root
		s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("start the notebook server: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- s.cmd.Wait() }()
		if lastErr = s.waitReady(exited, 60*time.Second); lastErr == nil {
			t.Cleanup(func() { s.stop(t, exited) })
			return s
		}
		s.kill(exited)
		if !strings.Contains(s.log.String(), "already in use") {
			break
		}
	}
	t.Fatalf("the notebook server did not start: %v\n%s", lastErr, s.log.String())
	return nil
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// freePort returns a port free now, below the ephemeral range (package freeport).
func freePort(t *testing.T) int {
	ports, err := freeport.Consecutive("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// waitReady polls /api/status until the server answers or exits.
func (s *notebookServer) waitReady(exited chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var v map[string]any
		err := s.api(context.Background(), "GET", "/api/status", &v)
		if err == nil {
			return nil
		}
		select {
		case e := <-exited:
			exited <- e // for kill and stop
			return fmt.Errorf("the server exited: %v", e)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s/api/status in %v: %w", s.URL, timeout, err)
		}
	}
}

// api calls the server's REST API with the token and decodes the JSON reply into v (when
// not nil).
func (s *notebookServer) api(ctx context.Context, method, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "token "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if v == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// kill ends the server's process group at once.
func (s *notebookServer) kill(exited chan error) {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// stop ends the server with SIGTERM (it shuts its kernels down), escalating to SIGKILL of
// its process group, then kills any process still running the test's godist binary (a
// kernel or a worker the shutdown missed: kernels run in sessions of their own).
func (s *notebookServer) stop(t *testing.T, exited chan error) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Logf("the notebook server ignored SIGTERM for 15s; killing it")
		s.kill(exited)
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processesOf(s.Bin, "")
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of %s outlived the notebook server by 5s: %v; killing them", s.Bin, left)
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if t.Failed() {
		t.Logf("notebook server log (last 8 KiB):\n%s", tail(s.log.String(), 8192))
	}
}

// processesOf returns the pids of the processes running bin (by /proc/PID/exe) whose first
// argument is sub ("" for any).
func processesOf(bin, sub string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || exe != bin {
			continue
		}
		if sub != "" {
			raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			args := strings.Split(string(raw), "\x00")
			if err != nil || len(args) < 2 || args[1] != sub {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// writeNotebook writes an nbformat 4 notebook for the godist kernel with one code cell per
// source into the server's directory and returns its name.
func (s *notebookServer) writeNotebook(t *testing.T, name string, sources ...string) string {
	t.Helper()
	cells := make([]map[string]any, len(sources))
	for i, src := range sources {
		cells[i] = map[string]any{"cell_type": "code", "execution_count": nil, "metadata": map[string]any{},
			"outputs": []any{}, "source": src}
	}
	nb := map[string]any{
		"nbformat": 4, "nbformat_minor": 4,
		"metadata": map[string]any{
			"kernelspec":    map[string]any{"name": "godist", "display_name": "Go (godist)", "language": "go"},
			"language_info": map[string]any{"name": "go"},
		},
		"cells": cells,
	}
	raw, err := json.MarshalIndent(nb, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, name), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}
