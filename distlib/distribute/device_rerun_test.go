package distribute

import (
	"errors"
	"testing"

	"godist/distlib/device"
)

// TestFailedStrategyLeavesDevicesConfigurable: a strategy asked for devices that do not
// exist (MirroredStrategy on "/gpu:0" without GPUs, or on a CPU not yet split) fails
// without initializing the devices, so the setup cell can be fixed and run again: splitting
// the CPU afterwards works, and the strategy then gets the logical devices.
func TestFailedStrategyLeavesDevicesConfigurable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		devices []string
		want    string
	}{
		{"gpu without GPUs", []string{"/gpu:0"}, "/gpu:0"},
		{"second CPU before the split", []string{"/cpu:0", "/cpu:1"}, "/cpu:1"},
		{"CentralStorage on gpu", nil, "/GPU:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			device.Reset()
			t.Cleanup(device.Reset)
			if len(device.ListPhysicalDevices(device.GPU)) > 0 {
				t.Skip("this machine has GPUs")
			}
			err := recoverErr(func() {
				if tc.devices == nil {
					NewCentralStorageStrategy(WithDevices("/GPU:0"))
					return
				}
				NewMirroredStrategy(WithDevices(tc.devices...))
			})
			var de *DeviceError
			if !errors.As(err, &de) || de.Device != tc.want {
				t.Fatalf("strategy on %v: error %v, want a *DeviceError naming %s", tc.devices, err, tc.want)
			}
			if device.IsInitialized() {
				t.Fatalf("a failed strategy initialized the devices (error %v)", err)
			}
			cpus := device.ListPhysicalDevices(device.CPU)
			if err := device.SetLogicalDeviceConfiguration(cpus[0], []device.LogicalDeviceConfiguration{{}, {}}); err != nil {
				t.Fatalf("splitting the CPU after the failed strategy: %v", err)
			}
			s := NewMirroredStrategy(WithDevices("/cpu:0", "/cpu:1"))
			if n := s.NumReplicasInSync(); n != 2 {
				t.Errorf("replicas after the split = %d, want 2", n)
			}
		})
	}
}
