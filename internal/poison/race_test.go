//go:build race

package poison

const raceEnabled = true
