package nlsafe

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

// interrupted is a listing the kernel interrupts n times, then completes.
func interrupted(n int, calls *int) func() ([]int, error) {
	return func() ([]int, error) {
		*calls++
		if *calls <= n {
			return []int{-1}, netlink.ErrDumpInterrupted
		}
		return []int{1, 2}, nil
	}
}

func TestDumpRetriesInterrupted(t *testing.T) {
	calls := 0
	out, err := dump(interrupted(attempts-1, &calls))
	if err != nil || len(out) != 2 || calls != attempts {
		t.Fatalf("dump = %v, %v after %d calls; want the complete listing after %d", out, err, calls, attempts)
	}
}

func TestDumpGivesUpWithTheError(t *testing.T) {
	calls := 0
	out, err := dump(interrupted(attempts, &calls))
	if !errors.Is(err, netlink.ErrDumpInterrupted) || out != nil || calls != attempts {
		t.Fatalf("dump = %v, %v after %d calls; want no objects and ErrDumpInterrupted after %d", out, err, calls, attempts)
	}
}

func TestDumpReturnsOtherErrorsAtOnce(t *testing.T) {
	calls := 0
	boom := errors.New("boom")
	_, err := dump(func() ([]int, error) { calls++; return nil, boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("dump = %v after %d calls; want boom after 1", err, calls)
	}
}
