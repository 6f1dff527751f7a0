package distribute

import (
	"strings"

	"godist/distlib/device"
)

// Options are typed per constructor, as grpc-go's: an option a constructor would ignore
// does not compile (WithParameterDevice is no MirroredOption; WithTransport is only a
// MultiWorkerOption). Options that several constructors take are of a type that
// implements each of their interfaces.

// MirroredOption configures NewMirroredStrategy: WithDevices, WithCrossDeviceOps.
type MirroredOption interface{ applyMirrored(*options) }

// CentralStorageOption configures NewCentralStorageStrategy: WithDevices,
// WithCrossDeviceOps, WithParameterDevice.
type CentralStorageOption interface{ applyCentralStorage(*options) }

// MultiWorkerOption configures NewMultiWorkerMirroredStrategy: WithDevices,
// WithCrossDeviceOps, WithClusterResolver, WithTransport, WithCommunication,
// WithCommunicationTimeout, WithClusterToken.
type MultiWorkerOption interface{ applyMultiWorker(*options) }

// LocalDevicesOption is an option of every strategy whose replicas run on this process's
// devices (WithDevices, WithCrossDeviceOps): a MirroredOption, a CentralStorageOption and
// a MultiWorkerOption.
type LocalDevicesOption struct{ f func(*options) }

func (o LocalDevicesOption) applyMirrored(x *options)       { o.f(x) }
func (o LocalDevicesOption) applyCentralStorage(x *options) { o.f(x) }
func (o LocalDevicesOption) applyMultiWorker(x *options)    { o.f(x) }

// ClusterTokenOption is the option of every constructor that joins a cluster
// (WithClusterToken): a MultiWorkerOption and a PSOption.
type ClusterTokenOption struct{ token string }

func (o ClusterTokenOption) applyMultiWorker(x *options) { x.multi().token = o.token }
func (o ClusterTokenOption) applyPS(x *psOptions)        { x.token = o.token }

// WithClusterToken sets the shared secret of the cluster's connections (by default the
// GODIST_CLUSTER_TOKEN environment variable, which godist launch sets), for
// NewMultiWorkerMirroredStrategy and for NewParameterServerStrategy, ServeParameterServer
// and ServeWorker.
func WithClusterToken(token string) ClusterTokenOption { return ClusterTokenOption{token} }

// centralStorageOption is an option of NewCentralStorageStrategy alone.
type centralStorageOption func(*options)

func (f centralStorageOption) applyCentralStorage(o *options) { f(o) }

// multiWorkerOption is an option of NewMultiWorkerMirroredStrategy alone.
type multiWorkerOption func(*options)

func (f multiWorkerOption) applyMultiWorker(o *options) { f(o) }

type options struct {
	devices   []string
	ops       CrossDeviceOps
	paramDev  string
	setDevs   bool
	setParams bool
	mw        *multiOptions
}

// WithDevices sets the devices of the replicas, like MirroredStrategy(devices=[...]): names
// such as "/gpu:0", "/CPU:1" or full names. Each must be a visible logical device.
func WithDevices(devices ...string) LocalDevicesOption {
	return LocalDevicesOption{func(o *options) {
		o.devices = append([]string(nil), devices...)
		o.setDevs = true
	}}
}

// WithCrossDeviceOps sets how the strategy reduces across local devices, like
// MirroredStrategy(cross_device_ops=...).
func WithCrossDeviceOps(ops CrossDeviceOps) LocalDevicesOption {
	return LocalDevicesOption{func(o *options) { o.ops = ops }}
}

// WithParameterDevice sets where CentralStorageStrategy keeps the variables.
func WithParameterDevice(dev string) CentralStorageOption {
	return centralStorageOption(func(o *options) {
		o.paramDev = dev
		o.setParams = true
	})
}

func mirroredOptions(opts []MirroredOption) *options {
	o := &options{}
	for _, opt := range opts {
		if opt != nil {
			opt.applyMirrored(o)
		}
	}
	return o
}

func centralStorageOptions(opts []CentralStorageOption) *options {
	o := &options{}
	for _, opt := range opts {
		if opt != nil {
			opt.applyCentralStorage(o)
		}
	}
	return o
}

func multiWorkerOptions(opts []MultiWorkerOption) *options {
	o := &options{}
	for _, opt := range opts {
		if opt != nil {
			opt.applyMultiWorker(o)
		}
	}
	return o
}

// DefaultStrategy is the strategy in effect outside any scope: one replica on the default
// device, a pass-through (Run simply calls the function), like TensorFlow's default strategy.
type DefaultStrategy struct{ base }

var defaultStrategy = newDefault()

func newDefault() *DefaultStrategy {
	s := &DefaultStrategy{}
	s.base = base{name: "DefaultDistributionStrategy", devices: []string{device.Default()},
		varDevice: device.Default(), ops: &ReductionToOneDevice{}, workers: 1, chief: true}
	s.ops.(*ReductionToOneDevice).once.Do(func() {})
	s.self, s.ext = s, newSyncExtended(&s.base)
	return s
}

// NewDefaultStrategy returns the default strategy, a singleton as in TensorFlow: the value
// GetStrategy returns outside any scope.
func NewDefaultStrategy() *DefaultStrategy { return defaultStrategy }

// OneDeviceStrategy places variables and computation on one device, like
// tf.distribute.OneDeviceStrategy.
type OneDeviceStrategy struct{ base }

// NewOneDeviceStrategy returns a strategy on dev ("/cpu:0", "/gpu:0", ...). It panics with
// a *DeviceError when dev is not a visible device.
func NewOneDeviceStrategy(dev string) *OneDeviceStrategy {
	full := resolveDevices([]string{dev})[0]
	s := &OneDeviceStrategy{}
	ops := &ReductionToOneDevice{}
	ops.once.Do(func() {})
	s.base = base{name: "OneDeviceStrategy", devices: []string{full}, varDevice: full, ops: ops, workers: 1, chief: true}
	s.self, s.ext = s, newSyncExtended(&s.base)
	return s
}

// MirroredStrategy trains synchronously on several devices of one machine with one
// replica and one copy of every variable per device, like tf.distribute.MirroredStrategy.
type MirroredStrategy struct{ base }

// NewMirroredStrategy returns a MirroredStrategy over WithDevices, or by default every
// visible GPU, or else every logical CPU (split the CPU with
// device.SetLogicalDeviceConfiguration to get several replicas). Cross-device reductions
// use WithCrossDeviceOps, or NCCL on GPUs and ReductionToOneDevice otherwise. It prints
// "Using MirroredStrategy with devices (...)" and panics with a *DeviceError when a
// device is not visible.
func NewMirroredStrategy(opts ...MirroredOption) *MirroredStrategy {
	o := mirroredOptions(opts)
	var devs []string
	if o.setDevs {
		devs = resolveDevices(o.devices)
	} else {
		devs = defaultDevices()
	}
	s := &MirroredStrategy{}
	s.base = base{name: "MirroredStrategy", devices: devs, mirror: true, varDevice: devs[0], workers: 1, chief: true}
	s.self, s.ext = s, newSyncExtended(&s.base)
	logf("INFO", "Using MirroredStrategy with devices (%s)", quoteList(devs))
	if o.ops != nil {
		s.ops = o.ops
	} else {
		s.ops = selectCrossDeviceOps(devs)
	}
	return s
}

// CrossDeviceOps returns how the strategy reduces across devices.
func (s *MirroredStrategy) CrossDeviceOps() CrossDeviceOps { return s.ops }

// CentralStorageStrategy keeps one copy of every variable on the parameter device (the CPU
// when there are several compute devices) and replicates the computation on the compute
// devices, like tf.distribute.experimental.CentralStorageStrategy.
type CentralStorageStrategy struct{ base }

// NewCentralStorageStrategy returns a CentralStorageStrategy computing on WithDevices, or by
// default every visible GPU, or else the CPU, with variables on WithParameterDevice, or by
// default the CPU when there are several compute devices and the single compute device
// otherwise. It panics with a *DeviceError when a device is not visible.
func NewCentralStorageStrategy(opts ...CentralStorageOption) *CentralStorageStrategy {
	o := centralStorageOptions(opts)
	var devs []string
	switch {
	case o.setDevs:
		devs = resolveDevices(o.devices)
	default:
		for _, d := range device.ListLogicalDevices(device.GPU) {
			devs = append(devs, d.Name)
		}
		if len(devs) == 0 {
			devs = []string{device.Default()}
		}
	}
	varDev := devs[0]
	if len(devs) > 1 {
		varDev = device.Default()
	}
	if o.setParams {
		varDev = resolveDevices([]string{o.paramDev})[0]
	}
	s := &CentralStorageStrategy{}
	ops := NewReductionToOneDevice()
	ops.reduceTo = varDev
	if o.ops != nil {
		s.ops = o.ops
	} else {
		s.ops = ops
	}
	s.base = base{name: "CentralStorageStrategy", devices: devs, varDevice: varDev, ops: s.ops, workers: 1, chief: true}
	s.self, s.ext = s, newSyncExtended(&s.base)
	q := make([]string, len(devs))
	for i, d := range devs {
		q[i] = "'" + d + "'"
	}
	logf("INFO", "ParameterServerStrategy (CentralStorageStrategy if you are using a single machine) with compute_devices = [%s], variable_device = '%s'",
		strings.Join(q, ", "), varDev)
	return s
}

// compile-time checks that the strategies implement Strategy.
var (
	_ Strategy = (*DefaultStrategy)(nil)
	_ Strategy = (*OneDeviceStrategy)(nil)
	_ Strategy = (*MirroredStrategy)(nil)
	_ Strategy = (*CentralStorageStrategy)(nil)
)
