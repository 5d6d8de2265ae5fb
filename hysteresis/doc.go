// Package hysteresis decides whether a system is overloaded from a few
// measured signals, without flapping.
//
//	gate, err := hysteresis.New([]hysteresis.Signal{
//		{Name: "cpu", Warn: 70, Trip: 85, Recover: 60},
//	}, hysteresis.Options{Hold: time.Minute})
//	if err != nil {
//		return err
//	}
//	defer gate.Close(ctx)
//	err = gate.Observe("cpu", 91) // from a sampler
//	if gate.Overloaded() {        // in an admission check
//		return errBusy
//	}
//
// A [Gate] watches named signals (CPU %, memory %, swap bytes, queue depth:
// anything where a higher value is worse). Each [Signal] has three
// thresholds:
//
//   - Trip: a sample at or above Trip moves the gate to [Overloaded] at once.
//     Any one signal is enough.
//   - Recover: the gate leaves Overloaded only after every signal has stayed
//     below its Recover threshold continuously for [Options.Hold] (1 minute
//     unless set; a negative Hold recovers at once). A single
//     sample at or above Recover, on any signal, restarts the hold. This is
//     the hysteresis: a value that oscillates around Trip trips the gate once
//     and keeps it tripped, instead of opening and closing it on every sample.
//   - Warn: between Warn and Trip the gate reports [Warning] (when it is not
//     Overloaded). Warning is informational: it has no hold, it never rejects
//     anything, and it ends as soon as every signal is below Warn.
//
// Between two samples a signal is taken to keep its last value.
//
// # Stale and missing signals
//
// A gate that is fed by a sampler must not stay Normal forever because the
// sampler died: the last sample before the failure would otherwise speak for
// the system indefinitely. So a signal that has not been observed within
// [Options.StaleAfter] (default 1 minute) is stale, and a signal that
// has never been observed is missing; after StaleAfter has passed since [New]
// a missing signal is stale too. A stale signal is never calm: it blocks
// recovery from Overloaded, and a stale period during a hold restarts the
// hold. Its last value still counts for Warn and Trip. What else it does is
// [Options.Stale]:
//
//   - [StaleWarn] (the default): the gate reports Warning instead of Normal
//     while any signal is stale, so the failure is visible but admission stays
//     open. An Overloaded gate stays Overloaded.
//   - [StaleTrip]: a stale signal trips the gate (fail closed).
//   - [StaleKeep]: nothing more; the gate keeps the state the last values
//     give, and only recovery is blocked.
//
// Every policy counts stale signals in [Stats]. A negative StaleAfter turns
// staleness off.
//
// # Time and events
//
// Time comes from [Options.Clock] (real time when nil). The hold and
// staleness are evaluated whenever the gate is fed and whenever it is read
// ([Gate.State], [Gate.Overloaded], [Gate.Last], [Gate.Stats]), so a reader
// always sees the current state even between samples. [Options.OnEvent]
// receives every transition as an [Event], in order, on the gate's own
// goroutine and outside its lock, through a queue of [Options.EventQueue]
// events: no caller, feeding or reading, ever
// runs or waits for the callback, so an admission check may consult the gate
// while holding its own locks, and the callback may call any method of the
// gate. When the callback falls so far behind that the queue is full, further
// transitions are dropped and counted in [Stats].EventsDropped. [Gate.Close]
// delivers what is queued and stops that goroutine.
package hysteresis
