// Command godist is the godist Jupyter kernel, its installer and the launcher of
// distributed training jobs.
//
//	godist kernel CONNECTION_FILE   run the kernel (Jupyter starts this)
//	godist install [--user|--prefix DIR|--uninstall]
//	godist launch --workers N [--ps M] [--chief] [--slurm] [--no-pin] -- program args
//	godist worker [--slurm] [--resolve-only]   serve this task of a cluster (TF_CONFIG or Slurm)
//	godist worker-cell FILE                   one task of a %%distributed cell (the kernel starts these)
//	godist version
//
// It imports package gpu, so the kernel and its workers see the machine's GPUs (the NVIDIA
// libraries are opened at run time; the same binary runs without them).
package main

import (
	"fmt"
	"os"
	"sort"

	// The CUDA backend: the kernel and its workers list GPUs when the machine has them. It
	// loads nothing until devices are first listed or used.
	_ "godist/gpu"
)

type subcommand struct {
	summary string
	run     func(args []string) error
}

var subcommands = map[string]subcommand{}

// register adds a subcommand; each subcommand's file calls it from init.
func register(name, summary string, run func(args []string) error) {
	if _, dup := subcommands[name]; dup {
		panic("godist: subcommand registered twice: " + name)
	}
	subcommands[name] = subcommand{summary, run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: godist COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, subcommands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	sc, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "godist: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := sc.run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "godist %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
