package main

import (
	"context"
	"errors"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"godist/interp"
	"godist/kernel"
)

func init() {
	register("kernel", "run the Jupyter kernel on CONNECTION_FILE (Jupyter starts it)", runKernel)
}

// runKernel serves the Jupyter protocol until a shutdown_request. The kernel's own log
// goes to a duplicate of standard error taken before the session captures descriptors 1
// and 2 for the cells' output.
func runKernel(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: godist kernel CONNECTION_FILE")
	}
	ci, err := kernel.ReadConnectionFile(args[0])
	if err != nil {
		return err
	}
	logger := log.New(logOutput(), "godist kernel: ", log.LstdFlags|log.Lmicroseconds)
	hist, err := kernel.NewHistory(historyPath())
	if err != nil {
		logger.Printf("history disabled: %v", err)
		hist, _ = kernel.NewHistory("")
	}
	if _, err := ensureOnPath(); err != nil {
		logger.Printf("PATH: %v", err)
	}
	dir, _ := os.Getwd()
	ex := newSessionExecutor(interp.Options{CaptureFDs: true, Dir: dir})
	k, err := kernel.New(kernel.Config{
		Connection: ci,
		Executor:   ex,
		History:    hist,
		Log:        logger,
		Info: kernel.Info{
			ImplementationVersion: Version,
			Banner: "godist " + Version + ": Go " + runtime.Version() + " in Jupyter (cells interpreted by yaegi)\n" +
				"distributed training: import \"godist/distlib/distribute\"; help: name? ",
			HelpLinks: []kernel.HelpLink{
				{Text: "Go documentation", URL: "https://go.dev/doc/"},
				{Text: "Go standard library", URL: "https://pkg.go.dev/std"},
			},
		},
	})
	if err != nil {
		ex.Close()
		return err
	}
	k.RegisterCommTarget("godist.echo", kernel.EchoTarget{})
	installWidgets(k)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		for s := range sig {
			if s == os.Interrupt {
				k.Interrupt()
			} else {
				k.Shutdown()
			}
		}
	}()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go watchParent(ctx, parentPoll, func(reason string) {
		logger.Printf("%s: shutting down", reason)
		k.Shutdown()
		// Run gives a busy cell ShutdownGrace; should closing hang, exit anyway.
		time.AfterFunc(parentExitDeadline, func() {
			logger.Printf("still running %v after the parent exited: exiting", parentExitDeadline)
			os.Exit(1)
		})
	})
	return k.Run(ctx)
}

// ensureOnPath puts the directory of this godist binary at the front of PATH when
// `godist` on PATH is not this binary (godist install --prefix DIR, or a binary run from
// its build directory): shell cells (`!srun ... godist worker`) and the processes they start
// then run the kernel's own godist. It returns the directory added ("" when none).
func ensureOnPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", err
	}
	if found, err := exec.LookPath("godist"); err == nil {
		if f, err := filepath.EvalSymlinks(found); err == nil && f == exe {
			return "", nil
		}
	}
	dir := filepath.Dir(exe)
	path := os.Getenv("PATH")
	if first, _, _ := strings.Cut(path, string(os.PathListSeparator)); first == dir {
		return "", nil
	}
	return dir, os.Setenv("PATH", dir+string(os.PathListSeparator)+path)
}

// parentExitDeadline bounds the shutdown that follows the parent's exit.
const parentExitDeadline = 15 * time.Second

// historyPath returns where executed cells are kept: $GODIST_HISTORY ("off" disables
// the file), else godist/history.jsonl under the user's data dir.
func historyPath() string {
	switch p := os.Getenv("GODIST_HISTORY"); p {
	case "off":
		return ""
	case "":
	default:
		return p
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "godist", "history.jsonl")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".local", "share", "godist", "history.jsonl")
}
