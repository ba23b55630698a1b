//go:build !race

package transforms

// raceEnabled: the race detector slows code several times over, so
// timing- and allocation-bound tests relax their bounds.
const raceEnabled = false
