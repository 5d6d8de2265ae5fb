// Package bench holds ttlkit's side-by-side benchmarks against its peers.
//
// It is a separate module so that peers never enter the library's go.mod.
// See README.md for the naming convention and the command that runs them.
package bench
