package sysload_test

import (
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/hysteresis/sysload"
)

// samplerFunc adapts a function to the sysload.Sampler interface.
type samplerFunc func(context.Context) (sysload.Load, error)

func (f samplerFunc) Sample(ctx context.Context) (sysload.Load, error) { return f(ctx) }

// mib is 2^20 bytes, the unit of the swap thresholds.
const mib = 1 << 20

// signals are the thresholds of an admission controller: CPU warn 70 % /
// trip 85 % / recover below 60 %, memory 75 / 90 / 70 %, swap 50 / 100 /
// 50 MiB.
func signals() []hysteresis.Signal {
	return []hysteresis.Signal{
		{Name: sysload.CPU, Warn: 70, Trip: 85, Recover: 60},
		{Name: sysload.Memory, Warn: 75, Trip: 90, Recover: 70},
		{Name: sysload.Swap, Warn: 50 * mib, Trip: 100 * mib, Recover: 50 * mib},
	}
}

// A Monitor feeding an admission controller's gate. A real program passes
// a *System from NewSystem and leaves the clocks nil; here a scripted
// Sampler and a mock clock make the run repeatable, and Step is called by
// hand (a negative Interval: no loop).
func Example() {
	loads := []sysload.Load{
		{CPU: 35, Memory: 60},
		{CPU: 72, Memory: 61},                  // CPU at warn
		{CPU: 91, Memory: 62},                  // CPU trips
		{CPU: 55, Memory: 64},                  // calm: the 60 s hold starts
		{CPU: 58, Memory: 66, Swap: 0},         // 30 s calm
		{CPU: 50, Memory: 65, Swap: 0},         // 60 s calm: reopen
		{CPU: 40, Memory: 93, Swap: 0},         // memory trips
		{CPU: 40, Memory: 60, Swap: 120 * mib}, // swap keeps it tripped
	}
	next := 0
	sampler := samplerFunc(func(context.Context) (sysload.Load, error) {
		l := loads[next]
		next++
		return l, nil
	})

	clk := clock.NewMock()
	// OnEvent runs on the gate's own goroutine; the example hands the events
	// over a channel and prints each after the step that caused it.
	events := make(chan hysteresis.Event, 16)
	gate, err := hysteresis.New(signals(), hysteresis.Options{
		Hold:    time.Minute,
		Clock:   clk,
		OnEvent: func(e hysteresis.Event) { events <- e },
	})
	if err != nil {
		panic(err)
	}
	defer gate.Close(context.Background())
	mon, err := sysload.NewMonitor(sampler, gate, sysload.MonitorOptions{Interval: -1})
	if err != nil {
		panic(err)
	}
	defer mon.Close(context.Background())

	var printed uint64
	for range loads {
		l, err := mon.Step(context.Background())
		if err != nil {
			panic(err)
		}
		for ; printed < gate.Stats().Transitions; printed++ {
			e := <-events
			why := e.Signal // the signal that crossed a threshold
			if why == "" {
				why = "every signal calm for the hold"
			}
			fmt.Printf("   -> %s (%s)\n", e.To, why)
		}
		fmt.Printf("cpu %2.0f%%  mem %2.0f%%  swap %3d MiB  %s\n", l.CPU, l.Memory, l.Swap/mib, gate.State())
		clk.Add(30 * time.Second)
	}
	// Output:
	// cpu 35%  mem 60%  swap   0 MiB  normal
	//    -> warning (cpu)
	// cpu 72%  mem 61%  swap   0 MiB  warning
	//    -> overloaded (cpu)
	// cpu 91%  mem 62%  swap   0 MiB  overloaded
	// cpu 55%  mem 64%  swap   0 MiB  overloaded
	// cpu 58%  mem 66%  swap   0 MiB  overloaded
	//    -> normal (every signal calm for the hold)
	// cpu 50%  mem 65%  swap   0 MiB  normal
	//    -> overloaded (memory)
	// cpu 40%  mem 93%  swap   0 MiB  overloaded
	// cpu 40%  mem 60%  swap 120 MiB  overloaded
}
