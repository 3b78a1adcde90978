//go:build !race

package daemon

// raceEnabled: this test binary was built with -race.
const raceEnabled = false
