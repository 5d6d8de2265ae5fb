package sysload_test

import (
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/hysteresis/sysload"
)

// A Monitor feeding the preset of a camera admission server. A real program passes a *System from
// NewSystem and leaves the clocks nil; here a scripted Sampler and a mock
// clock make the run repeatable, and Step is called by hand.
func Example() {
	loads := []sysload.Load{
		{CPU: 35, Memory: 60},
		{CPU: 72, Memory: 61},                          // CPU at warn
		{CPU: 91, Memory: 62},                          // CPU trips
		{CPU: 55, Memory: 64},                          // calm: the 60 s hold starts
		{CPU: 58, Memory: 66, Swap: 0},                 // 30 s calm
		{CPU: 50, Memory: 65, Swap: 0},                 // 60 s calm: reopen
		{CPU: 40, Memory: 93, Swap: 0},                 // memory trips
		{CPU: 40, Memory: 60, Swap: 120 * sysload.MiB}, // swap keeps it tripped
	}
	next := 0
	sampler := sysload.SamplerFunc(func(context.Context) (sysload.Load, error) {
		l := loads[next]
		next++
		return l, nil
	})

	clk := clock.NewMock()
	// OnEvent runs on the gate's own goroutine; the example hands the events
	// over a channel and prints each after the step that caused it.
	events := make(chan hysteresis.Event, 16)
	gate, err := hysteresis.New(sysload.DefaultSignals(), hysteresis.Options{
		Hold:    sysload.DefaultHold,
		Clock:   clk,
		OnEvent: func(e hysteresis.Event) { events <- e },
	})
	if err != nil {
		panic(err)
	}
	defer gate.Close(context.Background())
	mon, err := sysload.NewMonitor(sampler, gate, sysload.MonitorOptions{Interval: time.Hour})
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
			why := string(e.Reason)
			if e.Signal != "" {
				why += " " + e.Signal
			}
			fmt.Printf("   -> %s (%s)\n", e.To, why)
		}
		fmt.Printf("cpu %2.0f%%  mem %2.0f%%  swap %3d MiB  %s\n", l.CPU, l.Memory, l.Swap/sysload.MiB, gate.State())
		clk.Add(30 * time.Second)
	}
	// Output:
	// cpu 35%  mem 60%  swap   0 MiB  normal
	//    -> warning (warn cpu)
	// cpu 72%  mem 61%  swap   0 MiB  warning
	//    -> overloaded (trip cpu)
	// cpu 91%  mem 62%  swap   0 MiB  overloaded
	// cpu 55%  mem 64%  swap   0 MiB  overloaded
	// cpu 58%  mem 66%  swap   0 MiB  overloaded
	//    -> normal (recovered)
	// cpu 50%  mem 65%  swap   0 MiB  normal
	//    -> overloaded (trip memory)
	// cpu 40%  mem 93%  swap   0 MiB  overloaded
	// cpu 40%  mem 60%  swap 120 MiB  overloaded
}
