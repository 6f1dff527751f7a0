package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"godist/installer"
)

func init() {
	register("install", "install the Jupyter kernelspec (--user, --prefix DIR, --uninstall)", runInstall)
}

// runInstall writes or removes the "godist" kernelspec. By default it goes to the user's
// Jupyter data dir ($JUPYTER_DATA_DIR, else ~/.local/share/jupyter); --prefix DIR puts it
// under DIR/share/jupyter. Installing also enables the Notebook's widget extension where
// it is installed and not yet enabled (in the user's config dir, or DIR/etc/jupyter), and
// prints one line saying which.
func runInstall(args []string) error {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	user := fs.Bool("user", false, "install for the current user (the default)")
	prefix := fs.String("prefix", "", "install under `DIR`/share/jupyter instead of the user data dir")
	uninstall := fs.Bool("uninstall", false, "remove the kernelspec instead of installing it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *user && *prefix != "" {
		return errors.New("--user and --prefix exclude each other")
	}
	var dataDir, configDir string
	configDirs := installer.ConfigDirs()
	if *prefix != "" {
		abs, err := filepath.Abs(*prefix)
		if err != nil {
			return fmt.Errorf("--prefix %q: %w", *prefix, err)
		}
		dataDir = installer.PrefixDataDir(abs)
		configDir = installer.PrefixConfigDir(abs)
		configDirs = append([]string{configDir}, configDirs...)
	} else {
		d, err := installer.UserDataDir()
		if err != nil {
			return err
		}
		dataDir = d
		if configDir, err = installer.UserConfigDir(); err != nil {
			return err
		}
	}
	if *uninstall {
		if err := installer.Uninstall(dataDir); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "removed kernelspec %s\n", installer.SpecDir(dataDir))
		return nil
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate the godist binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(bin); err == nil {
		bin = resolved
	}
	dir, err := installer.Install(dataDir, installer.NewSpec(bin))
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "installed kernelspec %s (kernel %q, binary %s)\n", dir, installer.KernelName, bin)
	// The Notebook's widget front end draws Fit's bar and the cluster panel.
	w, err := installer.EnableWidgets(installer.DataDirs(), configDirs, configDir)
	if err != nil {
		return fmt.Errorf("widgets: %w", err)
	}
	fmt.Fprintln(os.Stderr, w)
	return nil
}
