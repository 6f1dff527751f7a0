package distribute

import (
	"testing"

	"godist/distlib/transport"
)

// TestExtendedCapabilities: every strategy's Extended offers the capabilities its training
// takes and no other; the parameter-server one no ApplyGradients of local copies (they
// would not reach the ps), PSExtended instead.
func TestExtendedCapabilities(t *testing.T) {
	captureLog(t)
	ps, _ := psCluster(t, 1, 1)
	mw := NewMultiWorkerMirroredStrategy(WithTransport(transport.NewMem(1)[0]))
	for _, tc := range []struct {
		s                                       Strategy
		applier, terms, buckets, termsApp, onPS bool
	}{
		{NewDefaultStrategy(), true, true, false, false, false},
		{NewOneDeviceStrategy("/cpu:0"), true, true, false, false, false},
		{NewMirroredStrategy(WithDevices("/cpu:0")), true, true, false, false, false},
		{NewCentralStorageStrategy(WithDevices("/cpu:0")), true, true, false, false, false},
		{mw, true, true, true, true, false},
		{ps, false, false, false, false, true},
	} {
		ext := tc.s.Extended()
		if ext == nil {
			t.Fatalf("%s: Extended() is nil", tc.s.Name())
		}
		_, applier := ext.(ReplicaGradientApplier)
		_, terms := ext.(ReplicaTermsSummer)
		_, buckets := ext.(GradientBucketing)
		_, termsApp := ext.(GradientTermsApplier)
		_, onPS := ext.(PSExtended)
		if applier != tc.applier || terms != tc.terms || buckets != tc.buckets || termsApp != tc.termsApp || onPS != tc.onPS {
			t.Errorf("%s: extended offers ReplicaGradientApplier %v, ReplicaTermsSummer %v, GradientBucketing %v, GradientTermsApplier %v, PSExtended %v; want %v, %v, %v, %v, %v",
				tc.s.Name(), applier, terms, buckets, termsApp, onPS, tc.applier, tc.terms, tc.buckets, tc.termsApp, tc.onPS)
		}
		if tc.s.Extended() != ext {
			t.Errorf("%s: Extended() returns a new value each call", tc.s.Name())
		}
	}
}
