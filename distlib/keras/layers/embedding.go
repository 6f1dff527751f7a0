package layers

import (
	"fmt"
	"strings"

	"godist/distlib/tensor"
)

// EmbeddingLayer maps integer ids to dense vectors; see Embedding.
type EmbeddingLayer struct {
	base
	kernelPenalty
	inputDim, outputDim int
}

// Embedding returns a layer that turns each id in [0, inputDim) into a trainable vector of
// outputDim values, like tf.keras.layers.Embedding(input_dim, output_dim): inputs of shape
// (batch, ...) holding ids (integers stored as float32) give outputs of shape
// (batch, ..., outputDim). The table starts uniform in [-0.05, 0.05], as in Keras. An id
// outside [0, inputDim) panics with an error naming it (Keras raises too). Options:
// KernelRegularizer (Keras's embeddings_regularizer), InputShape, Name.
func Embedding(inputDim, outputDim int, opts ...Option) *EmbeddingLayer {
	if inputDim <= 0 || outputDim <= 0 {
		panic(fmt.Errorf("%w: Embedding(input_dim=%d, output_dim=%d): both must be positive", ErrInvalidArgument, inputDim, outputDim))
	}
	o := parseOptions("Embedding", opts, "kernel_regularizer")
	return &EmbeddingLayer{base: newBase("Embedding", "embedding", o), kernelPenalty: kernelPenalty{o.regularizer}, inputDim: inputDim, outputDim: outputDim}
}

// Build implements Layer.
func (l *EmbeddingLayer) Build(in []int, seed uint64) ([]int, []Param, error) {
	table := tensor.RandomUniform([]int{l.inputDim, l.outputDim}, -0.05, 0.05, seed)
	return append(append([]int(nil), in...), l.outputDim), []Param{{Name: "embeddings", Init: table, Trainable: true}}, nil
}

// Forward implements Layer.
func (l *EmbeddingLayer) Forward(x *tensor.Tensor, p []*tensor.Tensor, _ bool, _ uint64) *tensor.Tensor {
	defer func() {
		if r := recover(); r != nil {
			panic(fmt.Errorf("%w: %s (input_dim %d): %v", ErrInvalidArgument, l.name, l.inputDim, r))
		}
	}()
	return tensor.Gather(p[0], x)
}

// StringLookupLayer maps strings to integer ids; see StringLookup.
type StringLookupLayer struct {
	vocab []string
	ids   map[string]int
	oov   int
	name  string
}

// StringLookup returns a vocabulary lookup like tf.keras.layers.StringLookup(vocabulary,
// num_oov_indices): id 0 .. numOOV-1 stand for strings outside the vocabulary ("[UNK]";
// Keras's default is one) and the vocabulary's strings follow in order. godist tensors hold
// numbers, so a lookup runs on Go strings, before the data enters a Dataset:
//
//	lookup := layers.StringLookup([]string{"avenger", "ironman", "batman"}, 1)
//	ids := lookup.Lookup("ironman", "joker") // [2 0]
//
// With numOOV 0 (num_oov_indices=0) a string outside the vocabulary panics with an error
// naming it. An empty or repeated vocabulary entry panics too.
func StringLookup(vocabulary []string, numOOV int) *StringLookupLayer {
	if numOOV < 0 {
		panic(fmt.Errorf("%w: StringLookup num_oov_indices %d must be >= 0", ErrInvalidArgument, numOOV))
	}
	l := &StringLookupLayer{ids: map[string]int{}, oov: numOOV, name: uniqueName("string_lookup")}
	for i, s := range vocabulary {
		if s == "" {
			panic(fmt.Errorf("%w: StringLookup vocabulary entry %d is empty", ErrInvalidArgument, i))
		}
		if _, dup := l.ids[s]; dup {
			panic(fmt.Errorf("%w: StringLookup vocabulary has %q twice", ErrInvalidArgument, s))
		}
		l.ids[s] = numOOV + i
		l.vocab = append(l.vocab, s)
	}
	return l
}

// Name returns the lookup's name ("string_lookup", "string_lookup_1", ...).
func (l *StringLookupLayer) Name() string { return l.name }

// Vocabulary returns the strings of the ids in order, "[UNK]" for the out-of-vocabulary
// ids, like get_vocabulary().
func (l *StringLookupLayer) Vocabulary() []string {
	out := make([]string, 0, l.oov+len(l.vocab))
	for i := 0; i < l.oov; i++ {
		out = append(out, "[UNK]")
	}
	return append(out, l.vocab...)
}

// VocabularySize returns the number of ids, the input_dim of an Embedding over them.
func (l *StringLookupLayer) VocabularySize() int { return l.oov + len(l.vocab) }

// Lookup returns the ids of values as a tensor of shape [len(values)].
func (l *StringLookupLayer) Lookup(values ...string) *tensor.Tensor {
	return tensor.MustNew([]int{len(values)}, l.lookup(values))
}

// LookupRows returns the ids of rows of strings (each of the same length) as a tensor of
// shape [len(rows), len(rows[0])], the (batch, features) input of an Embedding.
func (l *StringLookupLayer) LookupRows(rows [][]string) *tensor.Tensor {
	if len(rows) == 0 {
		panic(fmt.Errorf("%w: %s.LookupRows: no rows", ErrInvalidArgument, l.name))
	}
	n := len(rows[0])
	var ids []float32
	for i, r := range rows {
		if len(r) != n {
			panic(fmt.Errorf("%w: %s.LookupRows: row %d has %d strings, row 0 has %d", ErrInvalidArgument, l.name, i, len(r), n))
		}
		ids = append(ids, l.lookup(r)...)
	}
	return tensor.MustNew([]int{len(rows), n}, ids)
}

func (l *StringLookupLayer) lookup(values []string) []float32 {
	out := make([]float32, len(values))
	for i, s := range values {
		id, ok := l.ids[s]
		switch {
		case ok:
		case l.oov == 0:
			shown := l.vocab[:min(len(l.vocab), 10)]
			more := ""
			if len(l.vocab) > len(shown) {
				more = fmt.Sprintf(", ... %d more", len(l.vocab)-len(shown))
			}
			panic(fmt.Errorf("%w: %s: %q is not in the vocabulary (%s%s) and num_oov_indices is 0", ErrInvalidArgument, l.name, s, strings.Join(shown, ", "), more))
		default:
			id = int(hash(s) % uint64(l.oov)) // Keras hashes out-of-vocabulary strings into the OOV ids
		}
		out[i] = float32(id)
	}
	return out
}

// hash is FNV-1a: a fixed spread of out-of-vocabulary strings over the OOV ids.
func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
