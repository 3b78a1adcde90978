package bench

import (
	"runtime"
	"testing"
)

func TestMachineInfo(t *testing.T) {
	m := MachineInfo()
	if m.GoVersion != runtime.Version() || m.OS != runtime.GOOS || m.CPUs < 1 {
		t.Fatalf("%+v", m)
	}
	if runtime.GOOS == "linux" && (m.CPUModel == "" || m.MemoryMiB <= 0 || m.Kernel == "") {
		t.Errorf("on Linux /proc gives CPU model, memory and kernel: %+v", m)
	}
}
