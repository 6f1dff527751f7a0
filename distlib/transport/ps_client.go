package transport

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrPSUnavailable is wrapped by PSClient errors that come from the connection (the ps
// did not answer, the connection broke or was closed), not from the request itself: the
// call may be retried elsewhere or the ps is gone.
var ErrPSUnavailable = errors.New("transport: parameter server unavailable")

// PSClientOptions configures DialPS.
type PSClientOptions struct {
	// Token is the cluster token (required).
	Token string
	// Caller is the caller's rank in the cluster (0 to 4095), sent with every call.
	Caller int
	// Timeout bounds every call whose context has no deadline (default 30 s).
	Timeout time.Duration
	// NoSharedMemory makes the client send every value in its messages. By default a
	// client on the ps's host moves large values (Update, UpdateRead and ReadInto of at
	// least 1024 float32s) through a region of shared memory it offers the ps at its first
	// such call (a sparse file in /dev/shm, removed once offered); a ps on another host,
	// or one that cannot map it, gets payloads.
	NoSharedMemory bool
}

// PSClient calls one parameter server's variable store.
type PSClient struct {
	taskClient
	caller int
	shm    psShmClient
}

// DialPS returns a client of the ps at addr ("host:port"). It connects lazily; WaitReady
// waits for the server.
func DialPS(addr string, opts PSClientOptions) (*PSClient, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	c := &PSClient{caller: opts.Caller}
	c.shm.no = opts.NoSharedMemory
	if err := c.init(addr, psServiceName, "ps", ErrPSUnavailable, opts.Token, opts.Caller, opts.Timeout, "ps client", "PSClientOptions"); err != nil {
		return nil, err
	}
	return c, nil
}

// Addr is the server's address.
func (c *PSClient) Addr() string { return c.addr }

// Close closes the connection; calls in flight and later calls fail with ErrPSUnavailable.
func (c *PSClient) Close() error {
	c.closeShm()
	return c.close()
}

// WaitReady waits until the server answers or ctx ends (a connection that breaks
// meanwhile is made again).
func (c *PSClient) WaitReady(ctx context.Context) error {
	return c.waitReady(ctx)
}

// Ping checks that the server answers now (it does not wait for a connection).
func (c *PSClient) Ping(ctx context.Context) error {
	_, err := c.invoke(ctx, "Ping", "", nil, false)
	return err
}

// Create makes variable key with shape and initial value data. Creating an existing
// variable of the same shape keeps its value unless overwrite is set (restoring a
// checkpoint); a different shape is an error.
func (c *PSClient) Create(ctx context.Context, key string, shape []int, data []float32, overwrite bool) error {
	var e psEncoder
	e.u8(boolByte(overwrite))
	e.ints(shape)
	e.floats(data)
	_, err := c.invoke(ctx, "Create", key, e.b, false)
	return err
}

// Read returns the shape and value of variable key.
func (c *PSClient) Read(ctx context.Context, key string) ([]int, []float32, error) {
	b, err := c.invoke(ctx, "Read", key, nil, false)
	if err != nil {
		return nil, nil, err
	}
	d := psDecoder{b: b}
	shape, data := d.ints(), d.floats()
	if err := d.done(); err != nil {
		return nil, nil, fmt.Errorf("transport: ps at %s: Read %q: %w", c.addr, key, err)
	}
	return shape, data, nil
}

// Gather returns rows of variable key (along its first axis), concatenated in order.
func (c *PSClient) Gather(ctx context.Context, key string, rows []int) ([]float32, error) {
	var e psEncoder
	e.ints(rows)
	b, err := c.invoke(ctx, "Gather", key, e.b, false)
	if err != nil {
		return nil, err
	}
	d := psDecoder{b: b}
	data := d.floats()
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("transport: ps at %s: Gather %q: %w", c.addr, key, err)
	}
	return data, nil
}

// Update applies u to variable key. It reports false when the server had already applied
// an update with u.ID (a retried step), in which case nothing changed.
func (c *PSClient) Update(ctx context.Context, key string, u Update) (applied bool, err error) {
	op := PSOp{Key: key, Update: &u}
	err = c.Do(ctx, []*PSOp{&op})
	return op.Applied, err
}

// UpdateRead applies u to variable key like Update and returns the variable's value right
// after it, in one round trip (a training step's push and the next step's read). The
// value is written into dst when dst has the variable's size, else into a new slice.
// When the server had already applied u.ID, applied is false and value is the current one.
func (c *PSClient) UpdateRead(ctx context.Context, key string, u Update, dst []float32) (applied bool, value []float32, err error) {
	op := PSOp{Key: key, Update: &u, Read: true, Dst: dst}
	if err := c.Do(ctx, []*PSOp{&op}); err != nil {
		return false, nil, err
	}
	return op.Applied, op.Value, nil
}

// ReadInto is Read that writes the value into dst when dst has the variable's size
// (else into a new slice), and returns the value without the shape.
func (c *PSClient) ReadInto(ctx context.Context, key string, dst []float32) ([]float32, error) {
	op := PSOp{Key: key, Read: true, Dst: dst}
	if err := c.Do(ctx, []*PSOp{&op}); err != nil {
		return nil, err
	}
	return op.Value, nil
}

// Forget drops the record of updates of steps below step (steps the coordinator knows are
// finished and will not be retried), bounding the server's memory.
func (c *PSClient) Forget(ctx context.Context, below uint64) error {
	var e psEncoder
	e.u64(below)
	_, err := c.invoke(ctx, "Forget", "", e.b, false)
	return err
}

// List returns the keys of the server's variables, sorted.
func (c *PSClient) List(ctx context.Context) ([]string, error) {
	b, err := c.invoke(ctx, "List", "", nil, false)
	if err != nil {
		return nil, err
	}
	d := psDecoder{b: b}
	keys := make([]string, d.count(4))
	for i := range keys {
		keys[i] = d.str()
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("transport: ps at %s: List: %w", c.addr, err)
	}
	return keys, nil
}

// Stats returns the server's counters.
func (c *PSClient) Stats(ctx context.Context) (PSStats, error) {
	b, err := c.invoke(ctx, "Stats", "", nil, false)
	if err != nil {
		return PSStats{}, err
	}
	d := psDecoder{b: b}
	st := PSStats{Variables: int(d.u64()), Applied: int64(d.u64()), Duplicates: int64(d.u64()), Reads: int64(d.u64()),
		BytesIn: int64(d.u64()), BytesOut: int64(d.u64()), SharedIn: int64(d.u64()), SharedOut: int64(d.u64())}
	return st, d.done()
}

// BytesSent returns the request payload bytes (keys included) this client has sent.
func (c *PSClient) BytesSent() int64 { return c.sent.Load() }

// BytesReceived returns the answer payload bytes this client has received.
func (c *PSClient) BytesReceived() int64 { return c.recv.Load() }
