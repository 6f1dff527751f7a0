package datasets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// ErrOtherDataset reports a file that is a known file of another dataset (MNIST's files
// where Fashion-MNIST's were asked for, say) or of another role (the training labels under
// the test labels' name). A loader never returns another dataset.
var ErrOtherDataset = errors.New("datasets: the file belongs to another dataset")

// ErrUnverified reports a file whose contents are not a known file of the dataset (a
// subset, a variant, a corrupt copy). Unverified() loads such files anyway.
var ErrUnverified = errors.New("datasets: not a known file of the dataset")

// fileID is the identity of a known IDX file: the size and SHA-256 sum of its IDX bytes
// (decompressed), so the same file is recognized raw or gzipped by any gzip.
type fileID struct {
	size   int
	sha256 string
	note   string // "" for the published file; else what this known copy is
}

// Sizes of the IDX bytes of the published files (MNIST and Fashion-MNIST alike).
const (
	trainImagesSize = 16 + 60000*28*28
	trainLabelsSize = 8 + 60000
	testImagesSize  = 16 + 10000*28*28
	testLabelsSize  = 8 + 10000
)

var mnistFiles = map[string][]fileID{
	trainImages: {{size: trainImagesSize, sha256: "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"}},
	trainLabels: {{size: trainLabelsSize, sha256: "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"}},
	testImages: {
		{size: testImagesSize, sha256: "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"},
		// The course machines' copy (../shared/data/mnist beside the repository): the
		// published labels with images whose bytes differ from the published file.
		{size: testImagesSize, sha256: "1fe3fed5dea48594c16abac2cb1f4943a043ad82e4e5dd833ff46685cfe0ddfb",
			note: "the course machines' copy of the MNIST test images"},
	},
	testLabels: {{size: testLabelsSize, sha256: "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"}},
}

var fashionFiles = map[string][]fileID{
	trainImages: {{size: trainImagesSize, sha256: "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"}},
	trainLabels: {{size: trainLabelsSize, sha256: "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"}},
	testImages:  {{size: testImagesSize, sha256: "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"}},
	testLabels:  {{size: testLabelsSize, sha256: "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"}},
}

// knownSpecs are the datasets whose files are recognized wherever they turn up.
func knownSpecs() []*spec { return []*spec{mnistSpec, fashionSpec} }

// identify checks that raw (the IDX bytes of path, found as s's file base) is a known file
// of s with that role. A known file of another dataset or role fails with ErrOtherDataset;
// an unknown one with ErrUnverified unless unverified is set. It returns a note for the
// Source ("" for a published file).
func identify(s *spec, base, path string, raw []byte, unverified bool) (string, error) {
	sum := sha256.Sum256(raw)
	got := hex.EncodeToString(sum[:])
	for _, id := range s.files[base] {
		if id.size == len(raw) && id.sha256 == got {
			return id.note, nil
		}
	}
	specs := append([]*spec{s}, knownSpecs()...)
	for _, o := range specs {
		for ob, ids := range o.files {
			for _, id := range ids {
				if id.size != len(raw) || id.sha256 != got {
					continue
				}
				if o.name == s.name {
					return "", fmt.Errorf("%w: %s is %s's %s, not its %s (sha256 %s); put each file under its own name",
						ErrOtherDataset, path, o.title, ob, base, got)
				}
				return "", fmt.Errorf("%w: %s is %s's %s (sha256 %s), not %s's: this location holds %s, not %s",
					ErrOtherDataset, path, o.title, ob, got, s.title, o.title, s.title)
			}
		}
	}
	if unverified {
		return "unverified", nil
	}
	var want bytes.Buffer
	for i, id := range s.files[base] {
		if i > 0 {
			want.WriteString(" or ")
		}
		fmt.Fprintf(&want, "%d bytes with sha256 %s", id.size, id.sha256)
	}
	return "", fmt.Errorf("%w: %s is not a known %s file: its IDX data has %d bytes with sha256 %s, the published %s has %s; "+
		"it was not loaded. Use the published files (%s), or pass datasets.Unverified() to load your own subset or variant",
		ErrUnverified, path, s.title, len(raw), got, base, want.String(), s.howTo)
}

// readIDXFile reads the IDX file path (raw or gzipped), checks that it is the known file
// base of s (see identify) and parses it, checking the magic number first.
func readIDXFile(s *spec, base, path string, magic int, unverified bool) (dims []int, values []byte, note string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, "", fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	raw, err := idxBytes(f, path)
	if err != nil {
		return nil, nil, "", err
	}
	if dims, values, err = parseIDX(raw, path, magic); err != nil {
		return nil, nil, "", err
	}
	if note, err = identify(s, base, path, raw, unverified); err != nil {
		return nil, nil, "", err
	}
	return dims, values, note, nil
}
