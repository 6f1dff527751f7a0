package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestToken(t *testing.T) {
	dir := t.TempDir()
	envOf := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	secret := filepath.Join(dir, "s1")
	// Tasks of one job racing to create the secret agree on one token.
	var wg sync.WaitGroup
	toks := make([]string, 8)
	errs := make([]error, 8)
	for i := range toks {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			toks[i], errs[i] = tokenFrom(envOf("SLURM_JOB_ID", "42", SecretFileEnv, secret))
		}(i)
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] || len(toks[0]) != 64 {
			t.Fatalf("task %d: token %q, %v; want the same 64-hex-digit token as task 0 (%q)", i, toks[i], errs[i], toks[0])
		}
	}
	if st, err := os.Stat(secret); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	other, _ := tokenFrom(envOf("SLURM_JOB_ID", "43", SecretFileEnv, secret))
	if other == toks[0] {
		t.Error("two jobs got the same token")
	}

	loose := filepath.Join(dir, "loose")
	os.WriteFile(loose, []byte(strings.Repeat("a", 64)), 0o644)
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc"), 0o600)
	tests := []struct {
		name    string
		env     func(string) string
		want    string // token, or "" with wantErr
		wantErr string
	}{
		{"explicit token wins", envOf(TokenEnv, "tok", "SLURM_JOB_ID", "42", SecretFileEnv, secret), "tok", ""},
		{"no token outside Slurm", envOf("HOME", dir), "", "set GODIST_CLUSTER_TOKEN"},
		{"default secret under HOME", envOf("SLURM_JOB_ID", "7", "HOME", dir), "", ""},
		{"secret readable by others", envOf("SLURM_JOB_ID", "7", SecretFileEnv, loose), "", "chmod 600"},
		{"secret too short", envOf("SLURM_JOB_ID", "7", SecretFileEnv, short), "", "at least 16"},
		{"no HOME", envOf("SLURM_JOB_ID", "7"), "", "HOME is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tokenFrom(tt.env)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("tokenFrom = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("tokenFrom: %v", err)
			case tt.want != "" && got != tt.want:
				t.Fatalf("tokenFrom = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, ".config", "godist", "cluster-secret")); err != nil {
		t.Errorf("the default secret file was not made under HOME: %v", err)
	}
}
