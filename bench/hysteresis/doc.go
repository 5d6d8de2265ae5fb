// Package hysteresis benchmarks ttlkit's hysteresis.Gate. No maintained Go
// library does multi-signal trip/recover with a hold, so the peer is "naive":
// the hand-written check of the camera server's design (a mutex, an
// overloaded flag and the time of the last overload), which is what a Gate
// replaces. The ratio shows what the Gate's extra work (per-signal state,
// staleness, warning level, statistics, ordered callbacks) costs per sample.
package hysteresis
