package sysload

import (
	"time"

	"github.com/ttlkit/ttlkit/hysteresis"
)

// Names of the signals a Monitor feeds to a Gate.
const (
	// CPU is the busy share of the available CPU, in percent (0-100).
	CPU = "cpu"
	// Memory is the used share of the available memory, in percent (0-100).
	Memory = "memory"
	// Swap is the swap in use, in bytes.
	Swap = "swap"
)

// MiB is 2^20 bytes, the unit of the swap thresholds.
const MiB = 1 << 20

// DefaultHold is how long every signal must stay below its Recover threshold
// before the gate reopens, as a camera admission server configures them.
const DefaultHold = 60 * time.Second

// DefaultSignals returns the thresholds of a camera server's admission
// control, one of the systems ttlkit was built from:
//
//	signal  warn     trip      recover below
//	cpu     70 %     85 %      60 %
//	memory  75 %     90 %      70 %
//	swap    50 MiB   100 MiB   50 MiB
//
// Use them with DefaultHold:
//
//	gate, err := hysteresis.New(sysload.DefaultSignals(), hysteresis.Options{Hold: sysload.DefaultHold})
func DefaultSignals() []hysteresis.Signal {
	return []hysteresis.Signal{
		{Name: CPU, Warn: 70, Trip: 85, Recover: 60},
		{Name: Memory, Warn: 75, Trip: 90, Recover: 70},
		{Name: Swap, Warn: 50 * MiB, Trip: 100 * MiB, Recover: 50 * MiB},
	}
}
