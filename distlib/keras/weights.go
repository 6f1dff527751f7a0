package keras

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// weightsMagic starts every weights file; see the FORMAT section of the package doc.
const weightsMagic = "GDKERASW"

// weightsVersion is the format version SaveWeights writes.
const weightsVersion = 1

type weightsHeader struct {
	Model      string           `json:"model"`
	InputShape []int            `json:"input_shape"`
	Variables  []weightsVarSpec `json:"variables"`
	CRC32C     uint32           `json:"crc32c"`
}

type weightsVarSpec struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
}

// SaveWeights writes the model's variables to path in the portable format described in
// the package doc (FORMAT), like model.save_weights. The file is written to a temporary
// name and renamed, so a reader never sees half a file.
func (m *Model) SaveWeights(path string) (err error) {
	defer recoverErr("SaveWeights", &err)
	if err := checkWeightsPath("SaveWeights", path); err != nil {
		return err
	}
	if !m.Built() {
		return fmt.Errorf("%w: SaveWeights: model %s is not built yet", ErrInvalidArgument, m.name)
	}
	vs := m.Variables()
	var body bytes.Buffer
	h := weightsHeader{Model: m.name, InputShape: m.inputShape}
	for _, v := range vs {
		h.Variables = append(h.Variables, weightsVarSpec{Name: v.Name(), Shape: v.Shape()})
		d := v.Value().Data()
		buf := make([]byte, 4*len(d))
		for i, x := range d {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		}
		body.Write(buf)
	}
	h.CRC32C = crc32.Checksum(body.Bytes(), castagnoli)
	hj, err := json.Marshal(h)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	out.WriteString(weightsMagic)
	var n [8]byte
	binary.LittleEndian.PutUint32(n[:4], weightsVersion)
	binary.LittleEndian.PutUint32(n[4:], uint32(len(hj)))
	out.Write(n[:])
	out.Write(hj)
	out.Write(body.Bytes())

	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("keras: SaveWeights: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("keras: SaveWeights %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("keras: SaveWeights %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("keras: SaveWeights: %w", err)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func readWeights(path string) (*weightsHeader, []byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("keras: LoadWeights: %w", err)
	}
	if bytes.HasPrefix(raw, []byte(hdf5Signature)) {
		return nil, nil, fmt.Errorf("%w: %s is an HDF5 file (Keras' .h5 / .weights.h5), which godist does not read: "+
			"load weights written by godist's SaveWeights or ModelCheckpoint, or a model written by Save (.keras)", ErrWeights, path)
	}
	if len(raw) < 16 || string(raw[:8]) != weightsMagic {
		return nil, nil, fmt.Errorf("%w: %s is not a godist weights file (no %q header)", ErrWeights, path, weightsMagic)
	}
	if v := binary.LittleEndian.Uint32(raw[8:12]); v != weightsVersion {
		return nil, nil, fmt.Errorf("%w: %s has format version %d, this build reads %d", ErrWeights, path, v, weightsVersion)
	}
	hl := int(binary.LittleEndian.Uint32(raw[12:16]))
	if hl > len(raw)-16 {
		return nil, nil, fmt.Errorf("%w: %s is truncated (header of %d bytes)", ErrWeights, path, hl)
	}
	var h weightsHeader
	if err := json.Unmarshal(raw[16:16+hl], &h); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: bad header: %v", ErrWeights, path, err)
	}
	body := raw[16+hl:]
	want := 0
	for _, v := range h.Variables {
		want += 4 * prodInts(v.Shape)
	}
	if len(body) != want {
		return nil, nil, fmt.Errorf("%w: %s holds %d bytes of values, its header describes %d", ErrWeights, path, len(body), want)
	}
	if c := crc32.Checksum(body, castagnoli); c != h.CRC32C {
		return nil, nil, fmt.Errorf("%w: %s is corrupt (crc32c %#x, header says %#x)", ErrWeights, path, c, h.CRC32C)
	}
	return &h, body, nil
}

// LoadWeights reads a file SaveWeights wrote into the model's variables (every replica
// copy), like model.load_weights. Variables are matched in order; a count or shape that
// differs is an error naming the variables. An unbuilt model is built for the input shape
// the file records. A ".keras" file (Model.Save) gives its weights, as in Keras 3.
func (m *Model) LoadWeights(path string) (err error) {
	defer recoverErr("LoadWeights", &err)
	if filepath.Ext(path) == modelExt {
		// A whole model Save wrote: its weights (Keras 3's load_weights takes .keras too).
		_, w, err := readModelFile(path)
		if err != nil {
			return err
		}
		st, err := decodeBackup(w, path+"/"+modelWeightsEntry)
		if err != nil {
			return err
		}
		return m.restoreState(nil, path, st)
	}
	h, body, err := readWeights(path)
	if err != nil {
		return err
	}
	if !m.Built() {
		if err := m.build(h.InputShape); err != nil {
			return fmt.Errorf("keras: LoadWeights %s: build for input %v: %w", path, h.InputShape, err)
		}
	}
	vs := m.Variables()
	if len(vs) != len(h.Variables) {
		names := make([]string, len(vs))
		for i, v := range vs {
			names[i] = v.Name()
		}
		fnames := make([]string, len(h.Variables))
		for i, v := range h.Variables {
			fnames[i] = v.Name
		}
		return fmt.Errorf("%w: %s holds %d variables %v, model %s has %d %v", ErrWeights, path, len(h.Variables), fnames, m.name, len(vs), names)
	}
	for i, v := range vs {
		if !sameInts(v.Shape(), h.Variables[i].Shape) {
			return fmt.Errorf("%w: variable %d: model's %s has shape %v, %s's %s has shape %v",
				ErrWeights, i, v.Name(), v.Shape(), path, h.Variables[i].Name, h.Variables[i].Shape)
		}
	}
	data := make([][]float32, len(vs))
	off := 0
	for i, spec := range h.Variables {
		n := prodInts(spec.Shape)
		d := make([]float32, n)
		for j := range d {
			d[j] = math.Float32frombits(binary.LittleEndian.Uint32(body[off+4*j:]))
		}
		data[i] = d
		off += 4 * n
	}
	m.assignAll(func(i int) []float32 { return data[i] })
	return nil
}

// LatestCheckpoint returns the latest checkpoint in dir, like tf.train.latest_checkpoint:
// the one Checkpoint.Save recorded last, else the most recently written weights file
// (ModelCheckpoint, SaveWeights; by modification time, then name), or "" when there is
// none. Checkpoint.Restore takes either; Model.LoadWeights takes a weights file.
func LatestCheckpoint(dir string) string {
	if p := latestSaved(dir); p != "" {
		return p
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	type cand struct {
		path string
		mod  int64
	}
	var cs []cand
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // the temporary file of a write in progress (writeFileAtomic)
		}
		p := filepath.Join(dir, e.Name())
		if !isWeightsFile(p) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		cs = append(cs, cand{p, info.ModTime().UnixNano()})
	}
	if len(cs) == 0 {
		return ""
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].mod != cs[j].mod {
			return cs[i].mod < cs[j].mod
		}
		return naturalLess(cs[i].path, cs[j].path)
	})
	return cs[len(cs)-1].path
}

// isWeightsFile reports whether path starts with the weights format's magic.
func isWeightsFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [8]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == weightsMagic
}

// naturalLess compares names with digit runs as numbers ("ckpt_9" < "ckpt_10").
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := a[:da], b[:db]
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// WeightsExt is the file name ending SaveWeights suggests for its own format (any name
// but a foreign format's is accepted).
const WeightsExt = ".godist.weights"

// hdf5Signature starts every HDF5 file.
const hdf5Signature = "\x89HDF\r\n\x1a\n"

// checkWeightsPath refuses names that say another format: ".h5", ".hdf5" and
// ".weights.h5" are HDF5 (Keras' save_weights), ".keras" is a Save archive. godist's
// weights file is its own (GDKERASW); the error gives the name to write.
func checkWeightsPath(op, path string) error {
	lower := strings.ToLower(path)
	var stem string
	switch {
	case strings.HasSuffix(lower, ".weights.h5"):
		stem = path[:len(path)-len(".weights.h5")]
	case strings.HasSuffix(lower, ".h5"):
		stem = path[:len(path)-len(".h5")]
	case strings.HasSuffix(lower, ".hdf5"):
		stem = path[:len(path)-len(".hdf5")]
	case strings.HasSuffix(lower, modelExt):
		return fmt.Errorf("%w: %s %s: a .keras file is a whole model (Save writes it, with the architecture and the optimizer); "+
			"write Save(%q), or %s(%q) for the weights alone", ErrInvalidArgument, op, path, path, op, path[:len(path)-len(modelExt)]+WeightsExt)
	default:
		return nil
	}
	return fmt.Errorf("%w: %s %s: godist does not write HDF5, and its weights file is its own format (magic GDKERASW, "+
		"see the keras package doc), not Keras' .weights.h5: write %s(%q), or Save(%q) for the whole model",
		ErrInvalidArgument, op, path, op, stem+WeightsExt, stem+modelExt)
}
