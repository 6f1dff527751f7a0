package datasets

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"godist/internal/testdata"
)

// fixture returns IDX images (n x rows x cols, pixel = (i*7+j) % 256) and labels (i % 10).
func fixture(t *testing.T, n, rows, cols int) (images, labels []byte) {
	t.Helper()
	px := make([]byte, n*rows*cols)
	for i := range n {
		for j := range rows * cols {
			px[i*rows*cols+j] = byte((i*7 + j) % 256)
		}
	}
	lb := make([]byte, n)
	for i := range lb {
		lb[i] = byte(i % 10)
	}
	images, err := EncodeIDX([]int{n, rows, cols}, px)
	if err != nil {
		t.Fatal(err)
	}
	labels, err = EncodeIDX([]int{n}, lb)
	if err != nil {
		t.Fatal(err)
	}
	return images, labels
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func write(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSet writes train (nTrain) and test (nTest) files; nTrain 0 writes only the test files.
func writeSet(t *testing.T, dir string, nTrain, nTest int, compress bool) {
	t.Helper()
	enc := func(b []byte) []byte { return b }
	ext := ""
	if compress {
		enc = func(b []byte) []byte { return gz(t, b) }
		ext = ".gz"
	}
	if nTrain > 0 {
		im, lb := fixture(t, nTrain, 28, 28)
		write(t, dir, trainImages+ext, enc(im))
		write(t, dir, trainLabels+ext, enc(lb))
	}
	im, lb := fixture(t, nTest, 28, 28)
	write(t, dir, testImages+ext, enc(im))
	write(t, dir, testLabels+ext, enc(lb))
}

func noEnv(string) string { return "" }

// noSystemDirs makes a loader skip the system dataset directories.
var noSystemDirs = optionFunc(func(c *config) { c.systemDirs = nil })

func TestLoadFromDir(t *testing.T) {
	for _, compress := range []bool{false, true} {
		dir := t.TempDir()
		writeSet(t, dir, 12, 5, compress)
		train, test, err := LoadMNIST(Dir(dir), Unverified())
		if err != nil {
			t.Fatalf("compress=%v: LoadMNIST: %v", compress, err)
		}
		if got := train.Images.Shape(); !reflect.DeepEqual(got, []int{12, 28, 28, 1}) {
			t.Errorf("train images shape = %v, want [12 28 28 1]", got)
		}
		if got := test.Labels.Shape(); !reflect.DeepEqual(got, []int{5}) {
			t.Errorf("test labels shape = %v, want [5]", got)
		}
		// Example 3, pixel 10: (3*7+10) % 256 = 31.
		if got, want := train.Images.Data()[3*784+10], float32(31); got != want {
			t.Errorf("pixel = %v, want %v", got, want)
		}
		if got := train.Labels.Data()[11]; got != 1 {
			t.Errorf("label 11 = %v, want 1", got)
		}
		for _, v := range train.Images.Data() {
			if v < 0 || v > 255 || v != float32(int(v)) {
				t.Fatalf("pixel %v is not a raw value in 0..255 (images are not scaled)", v)
			}
		}
	}
}

func TestSubdirAndEnv(t *testing.T) {
	root := t.TempDir()
	writeSet(t, filepath.Join(root, "mnist"), 0, 10, true)
	t.Setenv(DataDirEnv, root)
	train, test, err := LoadMNIST(CacheDir(t.TempDir()), NoDownload(), Unverified())
	if err != nil {
		t.Fatalf("LoadMNIST with %s=%s: %v", DataDirEnv, root, err)
	}
	if train.Len() != 8 || test.Len() != 2 {
		t.Errorf("split of 10 test examples = %d/%d, want 8/2", train.Len(), test.Len())
	}
	if !strings.Contains(train.Source, "t10k-images-idx3-ubyte.gz[0:8]") {
		t.Errorf("Source = %q, want it to name the t10k file and the range", train.Source)
	}
}

func TestSplit(t *testing.T) {
	dir := t.TempDir()
	writeSet(t, dir, 0, 10, false)
	tests := []struct {
		opts      []Option
		nTr, nTe  int
		firstTest float32
		wantErr   string
	}{
		{nil, 8, 2, 8, ""},
		{[]Option{Split(6)}, 6, 4, 6, ""},
		{[]Option{Split(10)}, 0, 0, 0, "Split(10)"},
		{[]Option{Split(0)}, 0, 0, 0, "Split(0)"},
	}
	for _, tt := range tests {
		train, test, err := LoadMNIST(append([]Option{Dir(dir), Unverified()}, tt.opts...)...)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadMNIST(%s) error = %v, want %q", tt.wantErr, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if train.Len() != tt.nTr || test.Len() != tt.nTe {
			t.Errorf("split = %d/%d, want %d/%d", train.Len(), test.Len(), tt.nTr, tt.nTe)
		}
		if got := test.Labels.Data()[0]; got != tt.firstTest {
			t.Errorf("first test label = %v, want %v (the examples after the training part)", got, tt.firstTest)
		}
		if got := train.Dataset().Cardinality(); got != tt.nTr {
			t.Errorf("Dataset().Cardinality() = %d, want %d", got, tt.nTr)
		}
	}
	// MNISTFromDir returns datasets of (image, label) with the image shape (28, 28, 1).
	tr, _ := MNISTFromDir(dir, Split(5), Unverified())
	if got := tr.String(); !strings.Contains(got, "shape=(28, 28, 1)") {
		t.Errorf("MNISTFromDir train = %s", got)
	}
}

func TestLoadErrors(t *testing.T) {
	im, lb := fixture(t, 4, 28, 28)
	im3, _ := fixture(t, 3, 28, 28)
	_, lb5 := fixture(t, 5, 28, 28)
	_ = lb
	small, _ := fixture(t, 4, 27, 28)
	badLabels := append([]byte(nil), lb...)
	badLabels[len(badLabels)-1] = 12
	badMagic := append([]byte(nil), im...)
	badMagic[3] = 1 // rank 1 ubyte: a labels magic in an images file
	notIDX := []byte{0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0}
	tests := []struct {
		name   string
		files  map[string][]byte
		is     error
		substr []string
	}{
		{"empty dir", map[string][]byte{"README": []byte("x")}, nil,
			[]string{"missing", testImages, testLabels, "README"}},
		{"missing test labels", map[string][]byte{testImages + ".gz": gz(t, im)}, nil,
			[]string{"missing " + testLabels + "[.gz]", testImages + ".gz"}},
		{"train images without labels", map[string][]byte{testImages: im, testLabels: lb, trainImages: im}, nil,
			[]string{"missing " + trainLabels}},
		{"bad magic", map[string][]byte{testImages: badMagic, testLabels: lb}, ErrFormat,
			[]string{testImages, "magic number 2049", "want 2051"}},
		{"not idx", map[string][]byte{testImages: notIDX, testLabels: lb}, ErrFormat,
			[]string{testImages, "not an unsigned-byte IDX magic"}},
		{"truncated", map[string][]byte{testImages: im[:len(im)-100], testLabels: lb}, ErrFormat,
			[]string{testImages, "truncated", "3136 bytes"}},
		{"truncated gz", map[string][]byte{testImages + ".gz": gz(t, im)[:40], testLabels: lb}, ErrFormat,
			[]string{testImages + ".gz", "truncated"}},
		{"trailing", map[string][]byte{testImages: append(append([]byte(nil), im...), 1, 2), testLabels: lb}, ErrFormat,
			[]string{testImages, "trailing data"}},
		{"count mismatch", map[string][]byte{testImages: im3, testLabels: lb5}, ErrFormat,
			[]string{"3 images", "5 labels"}},
		{"wrong size", map[string][]byte{testImages: small, testLabels: lb}, ErrFormat,
			[]string{"27x28", "28x28"}},
		{"label range", map[string][]byte{testImages: im, testLabels: badLabels}, ErrFormat,
			[]string{testLabels, "label 12 of example 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range tt.files {
				write(t, dir, name, b)
			}
			_, _, err := LoadMNIST(Dir(dir), Unverified())
			if err == nil {
				t.Fatal("LoadMNIST succeeded, want an error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			for _, s := range tt.substr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if !strings.HasPrefix(err.Error(), "datasets: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

// fixtureServer serves gzipped fixture files and counts requests; files maps name to bytes.
func fixtureServer(t *testing.T, files map[string][]byte) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, ok := files[strings.TrimPrefix(r.URL.Path, "/good/")]
		if !ok || !strings.HasPrefix(r.URL.Path, "/good/") {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func testSpec(t *testing.T) (*spec, map[string][]byte) {
	trIm, trLb := fixture(t, 6, 28, 28)
	teIm, teLb := fixture(t, 3, 28, 28)
	files := map[string][]byte{
		trainImages + ".gz": gz(t, trIm), trainLabels + ".gz": gz(t, trLb),
		testImages + ".gz": gz(t, teIm), testLabels + ".gz": gz(t, teLb),
	}
	s := *mnistSpec
	s.name = "fixture"
	s.sha256 = map[string]string{}
	for n, b := range files {
		sum := sha256.Sum256(b)
		s.sha256[n] = hex.EncodeToString(sum[:])
	}
	s.files = map[string][]fileID{}
	for n, b := range map[string][]byte{trainImages: trIm, trainLabels: trLb, testImages: teIm, testLabels: teLb} {
		sum := sha256.Sum256(b)
		s.files[n] = []fileID{{size: len(b), sha256: hex.EncodeToString(sum[:])}}
	}
	return &s, files
}

func TestDownload(t *testing.T) {
	s, files := testSpec(t)
	srv, hits := fixtureServer(t, files)
	cache := t.TempDir()
	opts := []Option{CacheDir(cache), Mirrors(srv.URL+"/missing", srv.URL+"/good/"), HTTPClient(srv.Client())}
	cfgEnv := optionFunc(func(c *config) { c.envLookup = noEnv })
	train, test, err := load(s, append(opts, cfgEnv))
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	if train.Len() != 6 || test.Len() != 3 {
		t.Errorf("downloaded split = %d/%d, want 6/3", train.Len(), test.Len())
	}
	if got := hits.Load(); got != 8 {
		t.Errorf("requests = %d, want 8 (4 files, each a 404 on the first mirror)", got)
	}
	for n := range files {
		if _, err := os.Stat(filepath.Join(cache, n)); err != nil {
			t.Errorf("cached file: %v", err)
		}
	}
	// Second load: from the cache, no request.
	if _, _, err := load(s, append(opts, cfgEnv)); err != nil {
		t.Fatal(err)
	}
	if got := hits.Load(); got != 8 {
		t.Errorf("requests after a cached load = %d, want still 8", got)
	}
	// A corrupted cache file is downloaded again.
	write(t, cache, testLabels+".gz", []byte("garbage"))
	if _, _, err := load(s, append(opts, cfgEnv)); err != nil {
		t.Fatalf("reload after corruption: %v", err)
	}
	if got := hits.Load(); got != 10 {
		t.Errorf("requests after corrupting one file = %d, want 10", got)
	}
}

func TestDownloadChecksumMismatch(t *testing.T) {
	s, files := testSpec(t)
	s.sha256[testImages+".gz"] = strings.Repeat("0", 64)
	srv, _ := fixtureServer(t, files)
	cache := t.TempDir()
	_, _, err := load(s, []Option{CacheDir(cache), Mirrors(srv.URL + "/good"), HTTPClient(srv.Client()),
		optionFunc(func(c *config) { c.envLookup = noEnv })})
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), testImages+".gz") {
		t.Fatalf("error = %v, want a checksum mismatch naming %s", err, testImages+".gz")
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), testImages) {
			t.Errorf("a file failing its checksum was left in the cache: %s", e.Name())
		}
	}
}

func TestDownloadCancelled(t *testing.T) {
	s, files := testSpec(t)
	srv, _ := fixtureServer(t, files)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := load(s, []Option{CacheDir(t.TempDir()), Mirrors(srv.URL + "/good"), HTTPClient(srv.Client()), Context(ctx),
		optionFunc(func(c *config) { c.envLookup = noEnv })})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

func TestNoDownload(t *testing.T) {
	t.Setenv(DataDirEnv, t.TempDir())
	cache := t.TempDir()
	_, _, err := LoadFashionMNIST(CacheDir(cache), NoDownload(), noSystemDirs)
	if err == nil || !strings.Contains(err.Error(), "downloads are off") || !strings.Contains(err.Error(), cache) || !strings.Contains(err.Error(), DataDirEnv) {
		t.Fatalf("error = %v, want one naming the searched places", err)
	}
}

func TestPublishedChecksums(t *testing.T) {
	for _, s := range []*spec{mnistSpec, fashionSpec} {
		if len(s.sha256) != 4 {
			t.Errorf("%s: %d checksums, want 4", s.name, len(s.sha256))
		}
		for n, sum := range s.sha256 {
			if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
				t.Errorf("%s: %s: %q is not a SHA-256 sum", s.name, n, sum)
			}
		}
	}
}

// TestRealMNIST reads the real MNIST test set when the machine has it.
func TestRealMNIST(t *testing.T) {
	dir := testdata.MNISTDir()
	if dir == "" {
		t.Skipf("no MNIST data: set %s or put the t10k files in ../shared/data/mnist beside the repository", DataDirEnv)
	}
	if fs, _ := scanDir(mnistSpec, dir); !fs.has(testImages, testLabels) {
		t.Skipf("no MNIST t10k files under %s (set %s)", dir, DataDirEnv)
	}
	train, test, err := LoadMNIST(Dir(dir), Split(8000))
	if err != nil {
		t.Fatal(err)
	}
	if train.Len()+test.Len() < 10000 {
		t.Errorf("train %d + test %d < 10000", train.Len(), test.Len())
	}
	var counts [10]int
	for _, v := range train.Labels.Data() {
		counts[int(v)]++
	}
	for c, n := range counts {
		if n < 500 {
			t.Errorf("class %d has %d training examples, want several hundred", c, n)
		}
	}
}

func TestEncodeIDXErrors(t *testing.T) {
	tests := []struct {
		dims []int
		n    int
	}{{nil, 0}, {[]int{-1}, 0}, {[]int{2, 2}, 3}}
	for _, tt := range tests {
		if _, err := EncodeIDX(tt.dims, make([]byte, tt.n)); err == nil {
			t.Errorf("EncodeIDX(%v, %d bytes) succeeded, want an error", tt.dims, tt.n)
		}
	}
}
