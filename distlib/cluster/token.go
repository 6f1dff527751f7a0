package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SecretFileEnv names the file that holds the user's cluster secret (default
// $HOME/.config/godist/cluster-secret), from which a Slurm job's token is derived.
const SecretFileEnv = "GODIST_CLUSTER_SECRET_FILE"

// Token returns the cluster's shared token for this task, the secret every task of a job
// presents to the others:
//
//   - GODIST_CLUSTER_TOKEN when it is set (godist launch sets it for the tasks it starts);
//   - inside a Slurm job (SLURM_JOB_ID set), a token derived from the job id and the user's
//     cluster secret (HMAC-SHA256 of "slurm-job:<id>" under the secret): the same on every
//     task of the job and different for every job, with nothing to set. The secret lives in
//     the file SecretFileEnv names, by default $HOME/.config/godist/cluster-secret; the
//     first task that finds it missing creates it (32 random bytes, mode 0600), so the home
//     directory must be shared by the job's nodes, as it is on Slurm clusters (otherwise
//     copy the file to every node, or set GODIST_CLUSTER_TOKEN);
//   - otherwise an error saying what to set.
func Token() (string, error) {
	return tokenFrom(os.Getenv)
}

func tokenFrom(env func(string) string) (string, error) {
	if t := env(TokenEnv); t != "" {
		return t, nil
	}
	job := env("SLURM_JOB_ID")
	if job == "" {
		return "", fmt.Errorf("cluster: no cluster token: set %s to the same secret on every task (godist launch does; under Slurm it is derived from the job id)", TokenEnv)
	}
	path := env(SecretFileEnv)
	if path == "" {
		home := env("HOME")
		if home == "" {
			return "", fmt.Errorf("cluster: no cluster token for Slurm job %s: HOME is not set, so there is no cluster secret file: set %s or %s", job, SecretFileEnv, TokenEnv)
		}
		path = filepath.Join(home, ".config", "godist", "cluster-secret")
	}
	secret, err := readOrCreateSecret(path)
	if err != nil {
		return "", fmt.Errorf("cluster: no cluster token for Slurm job %s: %w (or set %s)", job, err, TokenEnv)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("slurm-job:" + job))
	return hex.EncodeToString(mac.Sum(nil)), nil
}

// readOrCreateSecret reads the secret at path, creating it when it does not exist. Tasks
// racing to create it agree: each writes a temporary file and links it into place; the
// first link wins and the others read the winner's.
func readOrCreateSecret(path string) ([]byte, error) {
	secret, err := readSecret(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return secret, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create the cluster secret's directory: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("create the cluster secret: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cluster-secret-*")
	if err != nil {
		return nil, fmt.Errorf("create the cluster secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("write the cluster secret: %w", werr)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create the cluster secret %s: %w", path, err)
	}
	return readSecret(path)
}

func readSecret(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the cluster secret %s is readable by others (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 16 {
		return nil, fmt.Errorf("the cluster secret %s holds %d characters, want at least 16 (delete it to have a new one made)", path, len(s))
	}
	return []byte(s), nil
}
