package distribute

import (
	"testing"
	"time"
)

// TestOptionsTypedPerConstructor: each option is accepted by the constructors that use it
// and by no other (an option a constructor would ignore does not compile).
func TestOptionsTypedPerConstructor(t *testing.T) {
	tests := []struct {
		name                             string
		opt                              any
		mirrored, central, multiWork, ps bool
	}{
		{"WithDevices", WithDevices("/cpu:0"), true, true, true, false},
		{"WithCrossDeviceOps", WithCrossDeviceOps(NewReductionToOneDevice()), true, true, true, false},
		{"WithParameterDevice", WithParameterDevice("/cpu:0"), false, true, false, false},
		{"WithTransport", WithTransport(nil), false, false, true, false},
		{"WithCommunicationTimeout", WithCommunicationTimeout(time.Second), false, false, true, false},
		{"WithClusterToken", WithClusterToken("t"), false, false, true, true},
		{"WithPSTimeout", WithPSTimeout(time.Second), false, false, false, true},
		{"WithRemoteWorkers", WithRemoteWorkers(), false, false, false, true},
	}
	for _, tt := range tests {
		_, m := tt.opt.(MirroredOption)
		_, c := tt.opt.(CentralStorageOption)
		_, w := tt.opt.(MultiWorkerOption)
		_, p := tt.opt.(PSOption)
		if m != tt.mirrored || c != tt.central || w != tt.multiWork || p != tt.ps {
			t.Errorf("%s is a MirroredOption %v, CentralStorageOption %v, MultiWorkerOption %v, PSOption %v; want %v, %v, %v, %v",
				tt.name, m, c, w, p, tt.mirrored, tt.central, tt.multiWork, tt.ps)
		}
	}
}
