// Package datasets loads the MNIST and Fashion-MNIST image-classification datasets from
// their IDX files, as keras.datasets and tensorflow_datasets do.
//
// Images come as float32 tensors of shape [N, 28, 28, 1] holding the raw pixel values 0..255
// (the uint8 images of tfds and keras.datasets, cast to float32: nothing is scaled), labels as
// float32 class ids of shape [N]. Scale the images yourself, as the TensorFlow tutorials do
// with their map(scale):
//
//	scale := func(el data.Element) data.Element {
//		return data.Element{tensor.Scale(el[0], 1.0/255), el[1]}
//	}
//	train = train.Map(scale)
//
// MNIST and FashionMNIST return data.Datasets of (image, label) elements; LoadMNIST and
// LoadFashionMNIST return the arrays.
//
// Where the files come from, in order (as tensorflow_datasets: an explicit directory, then
// the data directories, then a download):
//
//  1. the directory given with Dir (or MNISTFromDir); only there when given;
//  2. the directory named by the GODIST_DATA_DIR environment variable;
//  3. the system dataset directories, /usr/local/share/datasets and /usr/share/datasets
//     (Debian's dataset-fashion-mnist package puts the full Fashion-MNIST, 60,000 training
//     and 10,000 test images, in /usr/share/datasets/fashion-mnist; installer/deps.sh
//     installs it);
//  4. the cache directory (CacheDir, default ~/.cache/godist/datasets/<name>);
//  5. a download from the usual public mirrors into the cache directory, each file checked
//     against its published SHA-256 sum (NoDownload turns this off).
//
// A directory is searched for the four files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each raw or with .gz) directly and in its
// subdirectory named after the dataset ("mnist", "fashion_mnist" or "fashion-mnist").
//
// A loader never returns another dataset: every file, wherever it is found, is identified by
// the size and SHA-256 sum of its IDX bytes (decompressed, so any gzip of the published file
// is recognized). A known file of another dataset (MNIST's files in GODIST_DATA_DIR when
// Fashion-MNIST is asked for) makes the loader pass over that location and go on searching;
// if nothing is found the error says where it looked and how to get the data. A file that is
// no known file of the dataset (a subset, a variant, a corrupt copy) is an error
// (ErrUnverified) unless Unverified() is given.
//
// Test set only: when a directory holds the t10k files but not the train files (the
// course machines ship only the 10,000-image MNIST test set), the test set is split: its
// first 8,000 examples (or Split(n)) become the training set, the rest the test set. The
// returned Arrays' Source says so.
package datasets

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"godist/distlib/data"
	"godist/distlib/tensor"
)

// DataDirEnv is the environment variable naming a directory that holds the dataset files.
const DataDirEnv = "GODIST_DATA_DIR"

// DefaultSplit is the number of examples of the test set used for training when only the
// test files exist (see the package documentation).
const DefaultSplit = 8000

// FashionMNISTClassNames are the names of the ten Fashion-MNIST classes, by label.
var FashionMNISTClassNames = []string{
	"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
	"Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
}

// Arrays holds one split of a dataset in memory.
type Arrays struct {
	// Images has shape [N, rows, cols, 1]: the raw pixel values 0..255 as float32 (TF's
	// uint8 images cast to float32; divide by 255 to scale them to [0, 1]).
	Images *tensor.Tensor
	// Labels has shape [N], float32 class ids.
	Labels *tensor.Tensor
	// Source describes where the examples came from, e.g.
	// "/data/mnist/t10k-images-idx3-ubyte.gz[0:8000]"; it ends in " (unverified)" when the
	// files are no known files of the dataset (see Unverified).
	Source string
}

// unverifiedNote ends the Source of arrays read from files no known file of the dataset.
const unverifiedNote = " (unverified)"

// Len returns the number of examples.
func (a *Arrays) Len() int { return a.Labels.Shape()[0] }

// Dataset returns a dataset of (image [rows, cols, 1], label []) elements.
func (a *Arrays) Dataset() *data.Dataset { return data.FromTensorSlices(a.Images, a.Labels) }

// Slice returns the examples [from, to) (sharing storage). It panics when the range is
// outside [0, Len()].
func (a *Arrays) Slice(from, to int) *Arrays {
	n := a.Len()
	if from < 0 || to > n || from > to {
		panic(fmt.Errorf("datasets: Slice [%d:%d] out of range [0:%d]", from, to, n))
	}
	shape := a.Images.Shape()
	per := shape[1] * shape[2] * shape[3]
	img := tensor.MustNew(append([]int{to - from}, shape[1:]...), a.Images.Data()[from*per:to*per])
	lab := tensor.MustNew([]int{to - from}, a.Labels.Data()[from:to])
	src, note := a.Source, ""
	if base, ok := strings.CutSuffix(src, unverifiedNote); ok {
		src, note = base, unverifiedNote
	}
	return &Arrays{Images: img, Labels: lab, Source: fmt.Sprintf("%s[%d:%d]%s", src, from, to, note)}
}

// String describes the arrays: "Arrays(images=(8000, 28, 28, 1), labels=(8000,), source=...)".
func (a *Arrays) String() string {
	return fmt.Sprintf("Arrays(images=%s, labels=%s, source=%s)",
		data.FormatShape(a.Images.Shape()), data.FormatShape(a.Labels.Shape()), a.Source)
}

// Option configures a loader.
type Option interface{ apply(*config) }

type config struct {
	dir        string
	split      int
	cacheDir   string
	mirrors    []string
	client     *http.Client
	noDL       bool
	ctx        context.Context
	envLookup  func(string) string
	systemDirs []string
	unverified bool
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Dir makes the loader read the files from dir only (see the package documentation for the
// file names); a missing file is an error naming it and listing what dir holds.
func Dir(dir string) Option { return optionFunc(func(c *config) { c.dir = dir }) }

// Split sets how many examples of the test set become the training set when a directory
// holds only the test (t10k) files; the rest stay the test set. Default DefaultSplit.
func Split(nTrain int) Option { return optionFunc(func(c *config) { c.split = nTrain }) }

// CacheDir sets the directory downloads go to and are read from (default
// <os.UserCacheDir>/godist/datasets/<dataset>).
func CacheDir(dir string) Option { return optionFunc(func(c *config) { c.cacheDir = dir }) }

// Mirrors replaces the base URLs files are downloaded from (each is tried in order; a file
// is fetched from base + "/" + file name).
func Mirrors(baseURLs ...string) Option {
	return optionFunc(func(c *config) { c.mirrors = append([]string(nil), baseURLs...) })
}

// HTTPClient sets the client used for downloads (default: one with a 5-minute timeout).
func HTTPClient(client *http.Client) Option { return optionFunc(func(c *config) { c.client = client }) }

// Unverified makes a loader accept files that are no known file of the dataset (your own
// subset or variant of it); their Source says "(unverified)". Known files of another dataset
// are refused all the same.
func Unverified() Option { return optionFunc(func(c *config) { c.unverified = true }) }

// NoDownload makes a loader fail instead of downloading when no local copy exists.
func NoDownload() Option { return optionFunc(func(c *config) { c.noDL = true }) }

// Context bounds the downloads by ctx (cancellation stops them).
func Context(ctx context.Context) Option { return optionFunc(func(c *config) { c.ctx = ctx }) }

// spec describes one dataset: its files, where to download them and their SHA-256 sums.
type spec struct {
	name       string              // "mnist"
	title      string              // "MNIST", in messages
	howTo      string              // how to get the files, in messages
	files      map[string][]fileID // the known IDX files by base name
	subdirs    []string            // subdirectory names searched in a data directory
	mirrors    []string
	sha256     map[string]string // by .gz file name
	numClasses int
	rows, cols int
}

const (
	trainImages = "train-images-idx3-ubyte"
	trainLabels = "train-labels-idx1-ubyte"
	testImages  = "t10k-images-idx3-ubyte"
	testLabels  = "t10k-labels-idx1-ubyte"
)

var mnistSpec = &spec{
	name:  "mnist",
	title: "MNIST",
	howTo: "copy the four IDX files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, " +
		"t10k-labels-idx1-ubyte.gz) from an MNIST mirror into a directory and set GODIST_DATA_DIR to it or pass datasets.Dir(path)",
	files:   mnistFiles,
	subdirs: []string{"mnist", "MNIST"},
	mirrors: []string{
		"https://storage.googleapis.com/cvdf-datasets/mnist",
		"https://ossci-datasets.s3.amazonaws.com/mnist",
		"http://yann.lecun.com/exdb/mnist",
	},
	sha256: map[string]string{
		trainImages + ".gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
		trainLabels + ".gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
		testImages + ".gz":  "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
		testLabels + ".gz":  "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
	},
	numClasses: 10, rows: 28, cols: 28,
}

var fashionSpec = &spec{
	name:  "fashion_mnist",
	title: "Fashion-MNIST",
	howTo: "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist, or installer/deps.sh), which puts " +
		"them in /usr/share/datasets/fashion-mnist, or copy the four IDX files of Fashion-MNIST into a directory and set " +
		"GODIST_DATA_DIR to it or pass datasets.Dir(path)",
	files:   fashionFiles,
	subdirs: []string{"fashion_mnist", "fashion-mnist", "FashionMNIST"},
	mirrors: []string{
		"https://storage.googleapis.com/tensorflow/tf-keras-datasets",
		"https://fashion-mnist.s3.eu-central-1.amazonaws.com",
		"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com",
	},
	sha256: map[string]string{
		trainImages + ".gz": "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
		trainLabels + ".gz": "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
		testImages + ".gz":  "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
		testLabels + ".gz":  "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
	},
	numClasses: 10, rows: 28, cols: 28,
}

// LoadMNIST loads the MNIST handwritten digits (60,000 training and 10,000 test images).
func LoadMNIST(opts ...Option) (train, test *Arrays, err error) { return load(mnistSpec, opts) }

// LoadFashionMNIST loads Fashion-MNIST (Zalando's clothing images, same format as MNIST;
// class names in FashionMNISTClassNames).
func LoadFashionMNIST(opts ...Option) (train, test *Arrays, err error) {
	return load(fashionSpec, opts)
}

// MNIST returns the MNIST training and test sets as datasets of (image, label) elements,
// like tfds.load("mnist", as_supervised=True). It panics with the loader's error (which
// names the missing or bad file); LoadMNIST returns it instead.
func MNIST(opts ...Option) (train, test *data.Dataset) {
	tr, te, err := LoadMNIST(opts...)
	if err != nil {
		panic(err)
	}
	return tr.Dataset(), te.Dataset()
}

// MNISTFromDir is MNIST reading only from dir, e.g.
// MNISTFromDir("/work/shared/data/mnist", Split(8000)).
func MNISTFromDir(dir string, opts ...Option) (train, test *data.Dataset) {
	return MNIST(append([]Option{Dir(dir)}, opts...)...)
}

// FashionMNIST returns the Fashion-MNIST training and test sets as datasets of (image, label)
// elements. It panics with the loader's error; LoadFashionMNIST returns it instead.
func FashionMNIST(opts ...Option) (train, test *data.Dataset) {
	tr, te, err := LoadFashionMNIST(opts...)
	if err != nil {
		panic(err)
	}
	return tr.Dataset(), te.Dataset()
}

// fileSet is what was found for a dataset in one directory: path by base name (no .gz).
type fileSet struct {
	dir   string
	paths map[string]string
}

func (f fileSet) has(names ...string) bool {
	for _, n := range names {
		if f.paths[n] == "" {
			return false
		}
	}
	return true
}

// scanDir looks for the four files in dir and dir/<subdir>; it returns the first directory
// holding at least the test files, else what it found in dir (for error messages).
func scanDir(s *spec, dir string) (fileSet, []string) {
	var seen []string
	candidates := []string{dir}
	for _, sd := range s.subdirs {
		candidates = append(candidates, filepath.Join(dir, sd))
	}
	var first fileSet
	for i, d := range candidates {
		fs := fileSet{dir: d, paths: map[string]string{}}
		entries, err := os.ReadDir(d)
		if err != nil {
			if i == 0 {
				first = fs
			}
			continue
		}
		for _, e := range entries {
			seen = append(seen, filepath.Join(d, e.Name()))
			for _, base := range []string{trainImages, trainLabels, testImages, testLabels} {
				if (e.Name() == base || e.Name() == base+".gz") && fs.paths[base] == "" {
					fs.paths[base] = filepath.Join(d, e.Name())
				}
			}
		}
		if i == 0 {
			first = fs
		}
		if fs.has(testImages, testLabels) {
			return fs, seen
		}
	}
	return first, seen
}

// systemDataDirs are the system dataset directories, searched after GODIST_DATA_DIR.
var systemDataDirs = []string{"/usr/local/share/datasets", "/usr/share/datasets"}

func load(s *spec, opts []Option) (train, test *Arrays, err error) {
	cfg := config{split: -1, ctx: context.Background(), envLookup: os.Getenv, systemDirs: systemDataDirs}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.dir != "" {
		fs, seen := scanDir(s, cfg.dir)
		train, test, err := loadFrom(s, fs, seen, cfg)
		if errors.Is(err, ErrOtherDataset) {
			return nil, nil, fmt.Errorf("%w; to get %s: %s", err, s.title, s.howTo)
		}
		return train, test, err
	}
	// searched lists the locations passed over, for the error when nothing is found.
	var searched []string
	// try loads from dir when it holds the test files; done reports whether to stop there.
	try := func(what, dir string) (done bool, train, test *Arrays, err error) {
		fs, seen := scanDir(s, dir)
		if !fs.has(testImages, testLabels) {
			searched = append(searched, fmt.Sprintf("%s (found %s)", what, listing(seen)))
			return false, nil, nil, nil
		}
		train, test, err = loadFrom(s, fs, seen, cfg)
		if errors.Is(err, ErrOtherDataset) {
			searched = append(searched, fmt.Sprintf("%s (passed over: %v)", what, err))
			return false, nil, nil, nil
		}
		return true, train, test, err
	}
	if env := cfg.envLookup(DataDirEnv); env != "" {
		if done, train, test, err := try(DataDirEnv+"="+env, env); done {
			return train, test, err
		}
	}
	for _, dir := range cfg.systemDirs {
		if done, train, test, err := try("system directory "+dir, dir); done {
			return train, test, err
		}
	}
	cache := cfg.cacheDir
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, nil, fmt.Errorf("datasets: %s: no cache directory (%v); pass Dir or CacheDir, or set %s", s.name, err, DataDirEnv)
		}
		cache = filepath.Join(base, "godist", "datasets", s.name)
	}
	fs, seen := scanDir(s, cache)
	if fs.has(trainImages, trainLabels, testImages, testLabels) && verifyCached(s, fs) == nil {
		return loadFrom(s, fs, seen, cfg)
	}
	searched = append(searched, fmt.Sprintf("cache %s (found %s)", cache, listing(seen)))
	if cfg.noDL {
		return nil, nil, fmt.Errorf("datasets: %s not found and downloads are off; searched %s; to get %s: %s",
			s.name, strings.Join(searched, "; "), s.title, s.howTo)
	}
	if err := download(cfg, s, cache); err != nil {
		return nil, nil, fmt.Errorf("%w; %s not found elsewhere: searched %s; to get %s: %s",
			err, s.name, strings.Join(searched, "; "), s.title, s.howTo)
	}
	fs, seen = scanDir(s, cache)
	return loadFrom(s, fs, seen, cfg)
}

func listing(seen []string) string {
	if len(seen) == 0 {
		return "nothing"
	}
	if len(seen) > 12 {
		return strings.Join(seen[:12], ", ") + fmt.Sprintf(" and %d more", len(seen)-12)
	}
	return strings.Join(seen, ", ")
}

// loadFrom reads the files of fs: train and test files, or only the test files split.
func loadFrom(s *spec, fs fileSet, seen []string, cfg config) (train, test *Arrays, err error) {
	missing := func(names ...string) error {
		var miss []string
		for _, n := range names {
			if fs.paths[n] == "" {
				miss = append(miss, n+"[.gz]")
			}
		}
		return fmt.Errorf("datasets: %s: missing %s in %s; found %s", s.name, strings.Join(miss, ", "), fs.dir, listing(seen))
	}
	if !fs.has(testImages, testLabels) {
		err := missing(testImages, testLabels)
		return nil, nil, fmt.Errorf("%w (the test files are required; %s and %s are optional, see Split)", err, trainImages, trainLabels)
	}
	hasTrainImages, hasTrainLabels := fs.paths[trainImages] != "", fs.paths[trainLabels] != ""
	if hasTrainImages != hasTrainLabels {
		return nil, nil, missing(trainImages, trainLabels)
	}
	test, err = readPair(s, fs, testImages, testLabels, cfg.unverified)
	if err != nil {
		return nil, nil, err
	}
	if hasTrainImages {
		train, err = readPair(s, fs, trainImages, trainLabels, cfg.unverified)
		if err != nil {
			return nil, nil, err
		}
		return train, test, nil
	}
	n := cfg.split
	if n < 0 {
		n = DefaultSplit
		if n >= test.Len() {
			n = test.Len() * 4 / 5
		}
	}
	if n < 1 || n >= test.Len() {
		return nil, nil, fmt.Errorf("datasets: %s: Split(%d): only the test files exist in %s (%d examples); the split must be in [1, %d)",
			s.name, cfg.split, fs.dir, test.Len(), test.Len())
	}
	return test.Slice(0, n), test.Slice(n, test.Len()), nil
}

// readPair reads the images file and the labels file of fs and checks that they fit
// together. The labels are read first: they are small, and identify a file of another
// dataset as well as the images do.
func readPair(s *spec, fs fileSet, imagesName, labelsName string, unverified bool) (*Arrays, error) {
	imagesPath, labelsPath := fs.paths[imagesName], fs.paths[labelsName]
	ldims, lvals, lnote, err := readIDXFile(s, labelsName, labelsPath, LabelsMagic, unverified)
	if err != nil {
		return nil, err
	}
	idims, ivals, inote, err := readIDXFile(s, imagesName, imagesPath, ImagesMagic, unverified)
	if err != nil {
		return nil, err
	}
	if idims[1] != s.rows || idims[2] != s.cols {
		return nil, fmt.Errorf("%w: %s: images are %dx%d, %s images are %dx%d", ErrFormat, imagesPath, idims[1], idims[2], s.name, s.rows, s.cols)
	}
	if idims[0] != ldims[0] {
		return nil, fmt.Errorf("%w: %s holds %d images but %s holds %d labels", ErrFormat, imagesPath, idims[0], labelsPath, ldims[0])
	}
	labels := make([]float32, len(lvals))
	for i, v := range lvals {
		if int(v) >= s.numClasses {
			return nil, fmt.Errorf("%w: %s: label %d of example %d is not a class id in [0, %d)", ErrFormat, labelsPath, v, i, s.numClasses)
		}
		labels[i] = float32(v)
	}
	pixels := make([]float32, len(ivals))
	for i, v := range ivals {
		pixels[i] = float32(v) // raw 0..255, like tf.cast(uint8_image, tf.float32)
	}
	img, err := tensor.New([]int{idims[0], idims[1], idims[2], 1}, pixels)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", imagesPath, err)
	}
	lab, err := tensor.New([]int{ldims[0]}, labels)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", labelsPath, err)
	}
	source := imagesPath
	if inote == "unverified" || lnote == "unverified" {
		source += unverifiedNote
	}
	return &Arrays{Images: img, Labels: lab, Source: source}, nil
}
