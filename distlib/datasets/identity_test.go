package datasets

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"godist/internal/testdata"
)

// TestReadIDXTrailing: ReadIDX takes exactly one IDX file, raw or one gzip stream; bytes
// after the IDX payload or after the end of the gzip stream are refused.
func TestReadIDXTrailing(t *testing.T) {
	raw, err := EncodeIDX([]int{2, 3}, []byte{1, 2, 3, 4, 5, 6})
	if err != nil {
		t.Fatal(err)
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	gzRaw := gz(t, raw)
	tests := []struct {
		name    string
		in      []byte
		wantErr string // "" for success
	}{
		{"raw", raw, ""},
		{"gzip", gzRaw, ""},
		{"raw + GARBAGE", cat(raw, []byte("GARBAGE")), "trailing data: 7 bytes"},
		{"gzip + GARBAGE", cat(gzRaw, []byte("GARBAGE")), "after the end of the gzip stream"},
		{"gzip + one zero byte", cat(gzRaw, []byte{0}), "after the end of the gzip stream"},
		{"two gzip members", cat(gzRaw, gz(t, []byte{9, 9})), "after the end of the gzip stream"},
		{"gzip of payload + GARBAGE", gz(t, cat(raw, []byte("GARBAGE"))), "trailing data: 7 bytes"},
		{"truncated gzip", gzRaw[:len(gzRaw)-6], "truncated"},
		{"gzip with a bad CRC", func() []byte {
			b := append([]byte(nil), gzRaw...)
			b[len(b)-8] ^= 0xff
			return b
		}(), "gzip"},
		{"truncated raw", raw[:len(raw)-1], "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dims, vals, err := ReadIDX(bytes.NewReader(tt.in), "x.idx")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ReadIDX: %v", err)
				}
				if !reflect.DeepEqual(dims, []int{2, 3}) || !bytes.Equal(vals, []byte{1, 2, 3, 4, 5, 6}) {
					t.Errorf("ReadIDX = %v %v, want [2 3] [1 2 3 4 5 6]", dims, vals)
				}
				return
			}
			if err == nil {
				t.Fatalf("ReadIDX succeeded, want an error containing %q", tt.wantErr)
			}
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "x.idx") {
				t.Errorf("error %q: want ErrFormat naming x.idx and containing %q", err, tt.wantErr)
			}
		})
	}
}

// mnistTestFiles returns the MNIST t10k files of the course machines (skipping without them).
func mnistTestFiles(t *testing.T) fileSet {
	t.Helper()
	dir := testdata.MNISTDir()
	if dir == "" {
		t.Skipf("no MNIST data: set %s or put the t10k files in ../shared/data/mnist beside the repository", DataDirEnv)
	}
	fs, _ := scanDir(mnistSpec, dir)
	if !fs.has(testImages, testLabels) {
		t.Skipf("no MNIST t10k files under %s", dir)
	}
	return fs
}

// gunzipTo writes the decompressed copy of the gzipped file src into dir under name.
func gunzipTo(t *testing.T, src, dir, name string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(src, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, name, b)
}

// TestLoaderNeverReturnsAnotherDataset: MNIST's files, gzipped or raw, found in an explicit
// directory or in GODIST_DATA_DIR, are not Fashion-MNIST: the loader fails (or, searching,
// passes over them) with an error saying where it looked and how to get the data.
func TestLoaderNeverReturnsAnotherDataset(t *testing.T) {
	fs := mnistTestFiles(t)
	rawDir := t.TempDir()
	gunzipTo(t, fs.paths[testImages], rawDir, testImages)
	gunzipTo(t, fs.paths[testLabels], rawDir, testLabels)
	empty := t.TempDir()
	tests := []struct {
		name string
		env  string
		opts []Option
		want []string
	}{
		{"Dir with MNIST's gz files", "", []Option{Dir(fs.dir)},
			[]string{fs.dir, "is MNIST's t10k-labels-idx1-ubyte", "not Fashion-MNIST's", "apt-get install dataset-fashion-mnist"}},
		{"Dir with MNIST's raw files", "", []Option{Dir(rawDir)},
			[]string{rawDir, "is MNIST's t10k-labels-idx1-ubyte", "apt-get install dataset-fashion-mnist"}},
		{"GODIST_DATA_DIR with MNIST's files", fs.dir, []Option{CacheDir(empty), NoDownload(), noSystemDirs},
			[]string{"fashion_mnist not found", DataDirEnv + "=" + fs.dir, "passed over", "holds MNIST, not Fashion-MNIST",
				"cache " + empty, "apt-get install dataset-fashion-mnist", "/usr/share/datasets/fashion-mnist"}},
		{"Unverified does not accept another dataset", "", []Option{Dir(fs.dir), Unverified()},
			[]string{"is MNIST's t10k-labels-idx1-ubyte"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(DataDirEnv, tt.env)
			train, test, err := LoadFashionMNIST(tt.opts...)
			if err == nil {
				t.Fatalf("LoadFashionMNIST returned %v and %v from MNIST's files, want an error", train, test)
			}
			if !errors.Is(err, ErrOtherDataset) && !strings.Contains(err.Error(), "not found") {
				t.Errorf("error %v is neither ErrOtherDataset nor a not-found error", err)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
	// The same files are MNIST, gzipped or raw, verified.
	for _, dir := range []string{fs.dir, rawDir} {
		train, _, err := LoadMNIST(Dir(dir))
		if err != nil {
			t.Fatalf("LoadMNIST(Dir(%s)): %v", dir, err)
		}
		if strings.Contains(train.Source, "unverified") {
			t.Errorf("Source %q: the MNIST test files are known files", train.Source)
		}
	}
}

// TestUnknownFilesNeedUnverified: a file that is no known file of the dataset (a variant,
// a subset) is refused, naming it and its sum, unless Unverified() is given.
func TestUnknownFilesNeedUnverified(t *testing.T) {
	fs := mnistTestFiles(t)
	variant := t.TempDir()
	gunzipTo(t, fs.paths[testLabels], variant, testLabels)
	gunzipTo(t, fs.paths[testImages], variant, testImages)
	b, err := os.ReadFile(filepath.Join(variant, testImages))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1 // one pixel changed
	write(t, variant, testImages, b)
	subset := t.TempDir()
	writeSet(t, subset, 0, 10, true)

	tests := []struct {
		name    string
		dir     string
		opts    []Option
		wantErr []string
		wantLen int // test+train examples when it loads
	}{
		{"one pixel changed", variant, nil, []string{filepath.Join(variant, testImages), "not a known MNIST file", "7840016 bytes",
			"0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7", "datasets.Unverified()"}, 0},
		{"fixture subset", subset, nil, []string{testLabels, "not a known MNIST file", "18 bytes", "10008 bytes"}, 0},
		{"one pixel changed, Unverified", variant, []Option{Unverified()}, nil, 10000},
		{"fixture subset, Unverified", subset, []Option{Unverified()}, nil, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			train, test, err := LoadMNIST(append([]Option{Dir(tt.dir)}, tt.opts...)...)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if n := train.Len() + test.Len(); n != tt.wantLen {
					t.Errorf("loaded %d examples, want %d", n, tt.wantLen)
				}
				if !strings.HasSuffix(train.Source, "(unverified)") || !strings.HasSuffix(test.Source, "(unverified)") {
					t.Errorf("Sources %q, %q do not say (unverified)", train.Source, test.Source)
				}
				return
			}
			if !errors.Is(err, ErrUnverified) {
				t.Fatalf("error %v, want ErrUnverified", err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// TestWrongRole: a known file under another file's name (the training labels as the test
// labels) is refused.
func TestWrongRole(t *testing.T) {
	s, files := testSpec(t)
	dir := t.TempDir()
	write(t, dir, testImages+".gz", files[testImages+".gz"])
	write(t, dir, testLabels+".gz", files[trainLabels+".gz"])
	// The training labels (6) do not match the test images (3) either, but identity comes first.
	_, _, err := load(s, []Option{Dir(dir)})
	if !errors.Is(err, ErrOtherDataset) || !strings.Contains(err.Error(), "MNIST's train-labels-idx1-ubyte, not its t10k-labels-idx1-ubyte") {
		t.Fatalf("error = %v, want ErrOtherDataset naming both roles", err)
	}
}

// TestFashionMNISTFromSystemDir: with Debian's dataset-fashion-mnist installed,
// LoadFashionMNIST() with no environment loads the full 60,000/10,000 from
// /usr/share/datasets/fashion-mnist; so does it when GODIST_DATA_DIR names MNIST's files,
// which it passes over.
func TestFashionMNISTFromSystemDir(t *testing.T) {
	const dir = "/usr/share/datasets/fashion-mnist"
	if _, err := os.Stat(filepath.Join(dir, testImages+".gz")); err != nil {
		t.Skipf("Debian's dataset-fashion-mnist is not installed (%v): apt-get install dataset-fashion-mnist (installer/deps.sh does)", err)
	}
	envs := []string{""}
	if d := testdata.MNISTDir(); d != "" {
		envs = append(envs, d)
	}
	for _, env := range envs {
		t.Setenv(DataDirEnv, env)
		train, test, err := LoadFashionMNIST()
		if err != nil {
			t.Fatalf("%s=%q: LoadFashionMNIST(): %v", DataDirEnv, env, err)
		}
		if train.Len() != 60000 || test.Len() != 10000 {
			t.Errorf("%s=%q: %d/%d examples, want 60000/10000", DataDirEnv, env, train.Len(), test.Len())
		}
		if !strings.HasPrefix(train.Source, dir) || !strings.HasPrefix(test.Source, dir) {
			t.Errorf("%s=%q: Sources %q, %q, want files in %s", DataDirEnv, env, train.Source, test.Source, dir)
		}
		// Fashion-MNIST's first labels (MNIST's test set starts 7 2 1 0 4).
		wantTrain, wantTest := []float32{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, []float32{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}
		if got := train.Labels.Data()[:10]; !reflect.DeepEqual(got, wantTrain) {
			t.Errorf("first training labels %v, want %v", got, wantTrain)
		}
		if got := test.Labels.Data()[:10]; !reflect.DeepEqual(got, wantTest) {
			t.Errorf("first test labels %v, want %v", got, wantTest)
		}
	}
}

// TestKnownFiles: every known identity is a SHA-256 sum with the published size.
func TestKnownFiles(t *testing.T) {
	sizes := map[string]int{trainImages: 47040016, trainLabels: 60008, testImages: 7840016, testLabels: 10008}
	for _, s := range knownSpecs() {
		if len(s.files) != 4 {
			t.Errorf("%s: %d known files, want 4", s.name, len(s.files))
		}
		for base, ids := range s.files {
			for _, id := range ids {
				if len(id.sha256) != 64 || strings.Trim(id.sha256, "0123456789abcdef") != "" {
					t.Errorf("%s %s: %q is not a SHA-256 sum", s.name, base, id.sha256)
				}
				if id.size != sizes[base] {
					t.Errorf("%s %s: size %d, want %d", s.name, base, id.size, sizes[base])
				}
			}
		}
	}
}
