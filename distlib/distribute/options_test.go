package distribute

import (
	"testing"
	"time"
)

// TestOptionsTypedPerConstructor: each option is accepted by the constructors that use it
// and by no other (an option a constructor would ignore does not compile).
func TestOptionsTypedPerConstructor(t *testing.T) {
	tests := []struct {
		name                         string
		opt                          any
		mirrored, central, multiWork bool
	}{
		{"WithDevices", WithDevices("/cpu:0"), true, true, true},
		{"WithCrossDeviceOps", WithCrossDeviceOps(NewReductionToOneDevice()), true, true, true},
		{"WithParameterDevice", WithParameterDevice("/cpu:0"), false, true, false},
		{"WithTransport", WithTransport(nil), false, false, true},
		{"WithCommunicationTimeout", WithCommunicationTimeout(time.Second), false, false, true},
		{"WithClusterToken", WithClusterToken("t"), false, false, true},
		{"WithPSToken", WithPSToken("t"), false, false, false},
	}
	for _, tt := range tests {
		_, m := tt.opt.(MirroredOption)
		_, c := tt.opt.(CentralStorageOption)
		_, w := tt.opt.(MultiWorkerOption)
		if m != tt.mirrored || c != tt.central || w != tt.multiWork {
			t.Errorf("%s is a MirroredOption %v, CentralStorageOption %v, MultiWorkerOption %v; want %v, %v, %v",
				tt.name, m, c, w, tt.mirrored, tt.central, tt.multiWork)
		}
	}
}
