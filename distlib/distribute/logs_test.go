package distribute

import (
	"strings"
	"testing"
)

// TestCreationLogs: making a strategy on CPUs prints one INFO line (TensorFlow's), and a
// fallback is logged once with what is used instead, never contradicted by a later line.
func TestCreationLogs(t *testing.T) {
	splitCPU(t, 2)
	tests := []struct {
		name  string
		make  func() Strategy
		lines []string // substrings, one per expected line, in order
	}{
		{"mirrored on CPUs", func() Strategy { return NewMirroredStrategy() },
			[]string{"INFO:distribute:Using MirroredStrategy with devices ("}},
		{"multi-worker asking for NCCL on CPUs", func() Strategy {
			return NewMultiWorkerMirroredStrategy(WithCommunication(CommunicationNCCL))
		}, []string{"WARNING:distribute:CommunicationImplementation.NCCL needs an NCCL all-reduce", "communication = CommunicationImplementation.RING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := captureLog(t)
			t.Setenv("TF_CONFIG", "")
			tt.make()
			got := strings.Split(strings.TrimSpace(log.String()), "\n")
			if len(got) != len(tt.lines) {
				t.Fatalf("%d log lines, want %d:\n%s", len(got), len(tt.lines), log)
			}
			for i, want := range tt.lines {
				if !strings.Contains(got[i], want) {
					t.Errorf("line %d = %q, want it to contain %q", i, got[i], want)
				}
			}
		})
	}
}

// TestCrossDeviceOpsString: CrossDeviceOps print their name and settings.
func TestCrossDeviceOpsString(t *testing.T) {
	splitCPU(t, 2)
	captureLog(t)
	tests := []struct {
		ops  CrossDeviceOps
		want string
	}{
		{NewReductionToOneDevice(), "ReductionToOneDevice(reduce_to_device=the first replica's device)"},
		{NewReductionToOneDevice("/cpu:1"), "ReductionToOneDevice(reduce_to_device=/job:localhost/replica:0/task:0/device:CPU:1)"},
		{NewHierarchicalCopyAllReduce(2), "HierarchicalCopyAllReduce(num_packs=2)"},
		{NewNcclAllReduce(), "NcclAllReduce(num_packs=1)"},
		{NewMirroredStrategy().CrossDeviceOps(), "ReductionToOneDevice(reduce_to_device=the first replica's device)"},
	}
	for _, tt := range tests {
		if got := tt.ops.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}
