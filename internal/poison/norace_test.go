//go:build !race

package poison

const raceEnabled = false
