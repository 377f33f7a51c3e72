// Package all links in every built-in extension. It is the single list of
// what ships; each line is a blank import that registers one config key.
package all
