package hysteresis

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// State is the condition a Gate reports.
type State int

// The states of a Gate, from best to worst.
const (
	// Normal: every signal is below its Warn threshold, or the gate has
	// recovered from Overloaded.
	Normal State = iota
	// Warning: some signal is at or above Warn (or stale, under StaleWarn),
	// none has reached Trip.
	Warning
	// Overloaded: some signal reached Trip, and the gate has not yet seen
	// every signal below Recover for the whole hold.
	Overloaded

	numStates = 3
)

// String returns "normal", "warning" or "overloaded".
func (s State) String() string {
	switch s {
	case Normal:
		return "normal"
	case Warning:
		return "warning"
	case Overloaded:
		return "overloaded"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Signal names one measured quantity and its thresholds. Higher values are
// worse. A threshold of exactly 0 counts as unset: Trip and Recover are
// required, and an unset Warn means the signal never reports Warning.
type Signal struct {
	// Name identifies the signal in Observe and in reports. Required, unique.
	Name string
	// Warn is the level at or above which the gate reports Warning.
	// It must not be above Trip. 0 means no warning level.
	Warn float64
	// Trip is the level at or above which the gate becomes Overloaded.
	Trip float64
	// Recover is the level every sample must stay below, for the whole hold,
	// before an Overloaded gate returns to Normal. It must not be above Trip.
	Recover float64
}

// ErrInvalid is matched by every error about a bad signal, option or
// argument (a sample of a signal the gate does not watch, a NaN value); the
// message names it and its value.
var ErrInvalid = errors.New("hysteresis: invalid argument")

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// validateSignals checks every signal and returns the index by name.
func validateSignals(signals []Signal) (map[string]int, error) {
	if len(signals) == 0 {
		return nil, errs.Invalid(ErrInvalid, "hysteresis: signals is empty: a gate needs at least one signal")
	}
	index := make(map[string]int, len(signals))
	for i, s := range signals {
		bad := func(field, problem string) error {
			if s.Name == "" {
				return errs.Invalid(ErrInvalid, "hysteresis: signal #%d: %s %s", i, field, problem)
			}
			return errs.Invalid(ErrInvalid, "hysteresis: signal %q: %s %s", s.Name, field, problem)
		}
		if s.Name == "" {
			return nil, bad("Name", "is empty")
		}
		if j, dup := index[s.Name]; dup {
			return nil, bad("Name", fmt.Sprintf("is a duplicate of signal #%d", j))
		}
		index[s.Name] = i
		for _, f := range []struct {
			name string
			v    float64
		}{{"Warn", s.Warn}, {"Trip", s.Trip}, {"Recover", s.Recover}} {
			if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
				return nil, bad(f.name, "is "+fmtFloat(f.v)+": thresholds must be finite")
			}
		}
		if s.Trip == 0 {
			return nil, bad("Trip", "is missing (0)")
		}
		if s.Recover == 0 {
			return nil, bad("Recover", "is missing (0)")
		}
		if s.Recover > s.Trip {
			return nil, bad("Recover", "("+fmtFloat(s.Recover)+") above Trip ("+fmtFloat(s.Trip)+")")
		}
		if s.Warn != 0 && s.Warn > s.Trip {
			return nil, bad("Warn", "("+fmtFloat(s.Warn)+") above Trip ("+fmtFloat(s.Trip)+")")
		}
	}
	return index, nil
}

// Sample is the last value a Gate holds for one signal.
type Sample struct {
	// Name is the signal's name.
	Name string
	// Value is the last observed value; 0 when Observed is false.
	Value float64
	// At is when Value was observed; zero when Observed is false.
	At time.Time
	// Observed reports whether the signal has been observed at all.
	Observed bool
	// Stale reports whether the signal is stale now: not observed within
	// Options.StaleAfter (counting from New when it was never observed).
	Stale bool
}
