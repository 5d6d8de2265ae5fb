// Command loadwatch watches the load of this machine (or of the container it
// runs in) through a hysteresis gate, with the thresholds of a camera
// server's admission control: CPU warn 70 % / trip 85 % / recover below 60 %,
// memory 75 / 90 / 70 %, swap 50 / 100 / 50 MiB, and a 60 s hold before the
// gate reopens.
//
// It prints one line per sample (CPU %, memory %, swap, gate state) and a
// line starting with *** on every state change, and exits 0 after -for
// elapses or on Ctrl-C (SIGINT) or SIGTERM.
//
//	go run ./examples/loadwatch                  # until Ctrl-C
//	go run ./examples/loadwatch -for 10s -interval 500ms
//	go run ./examples/loadwatch -cpu-trip 50 -cpu-recover 30 -hold 10s
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/hysteresis/sysload"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadwatch:", err)
		os.Exit(1)
	}
}

// mib is 2^20 bytes, the unit of the swap flags.
const mib = 1 << 20

// defaultSignals are the thresholds of a camera server's admission
// control: CPU warn 70 % / trip 85 % / recover below 60 %, memory 75 / 90 /
// 70 %, swap 50 / 100 / 50 MiB (in bytes, as sysload feeds swap).
func defaultSignals() []hysteresis.Signal {
	return []hysteresis.Signal{
		{Name: sysload.CPU, Warn: 70, Trip: 85, Recover: 60},
		{Name: sysload.Memory, Warn: 75, Trip: 90, Recover: 70},
		{Name: sysload.Swap, Warn: 50 * mib, Trip: 100 * mib, Recover: 50 * mib},
	}
}

// config is what the flags set.
type config struct {
	interval, duration, hold time.Duration
	signals                  []hysteresis.Signal
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("loadwatch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadwatch [flags]\n\nSamples this machine's CPU, memory and swap and prints the state of a hysteresis gate.\n\nFlags:")
		fs.PrintDefaults()
	}
	c := config{signals: defaultSignals()}
	fs.DurationVar(&c.interval, "interval", time.Second, "time between samples")
	fs.DurationVar(&c.duration, "for", 0, "how long to run; 0 runs until Ctrl-C")
	fs.DurationVar(&c.hold, "hold", time.Minute, "how long every signal must stay below recover before the gate reopens")
	cpu, mem, swap := &c.signals[0], &c.signals[1], &c.signals[2]
	fs.Float64Var(&cpu.Warn, "cpu-warn", cpu.Warn, "CPU % at which the gate warns")
	fs.Float64Var(&cpu.Trip, "cpu-trip", cpu.Trip, "CPU % at which the gate trips")
	fs.Float64Var(&cpu.Recover, "cpu-recover", cpu.Recover, "CPU % to stay below before reopening")
	fs.Float64Var(&mem.Warn, "mem-warn", mem.Warn, "memory % at which the gate warns")
	fs.Float64Var(&mem.Trip, "mem-trip", mem.Trip, "memory % at which the gate trips")
	fs.Float64Var(&mem.Recover, "mem-recover", mem.Recover, "memory % to stay below before reopening")
	swapWarn, swapTrip, swapRecover := swap.Warn/mib, swap.Trip/mib, swap.Recover/mib
	fs.Float64Var(&swapWarn, "swap-warn", swapWarn, "swap MiB at which the gate warns")
	fs.Float64Var(&swapTrip, "swap-trip", swapTrip, "swap MiB at which the gate trips")
	fs.Float64Var(&swapRecover, "swap-recover", swapRecover, "swap MiB to stay below before reopening")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.interval <= 0 {
		return c, fmt.Errorf("-interval (%v) must be positive", c.interval)
	}
	if c.duration < 0 {
		return c, fmt.Errorf("-for (%v) is negative", c.duration)
	}
	if c.hold < 0 {
		return c, fmt.Errorf("-hold (%v) is negative", c.hold)
	}
	// Check the thresholds in the flags' units (swap in MiB), so that an
	// error quotes the values as they were typed, not in bytes.
	typed := slices.Clone(c.signals)
	typed[2].Warn, typed[2].Trip, typed[2].Recover = swapWarn, swapTrip, swapRecover
	if _, err := hysteresis.New(typed, hysteresis.Options{}); err != nil {
		return c, err
	}
	swap.Warn, swap.Trip, swap.Recover = swapWarn*mib, swapTrip*mib, swapRecover*mib
	return c, nil
}

// run is the program: it returns nil when ctx ends or -for elapses.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	sys, err := sysload.NewSystem(sysload.Options{})
	if err != nil {
		return err
	}

	var mu sync.Mutex // OnEvent, OnSample and the summary share stdout
	printf := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stdout, format, a...)
	}
	gate, err := hysteresis.New(c.signals, hysteresis.Options{
		Hold: cmp.Or(c.hold, -1), // -hold 0: reopen at the first calm sample
		// Three missed samples make the gate say so instead of staying Normal.
		StaleAfter: 3 * c.interval,
		// OnEvent runs on the gate's own goroutine, so a change may print
		// just after the sample line that caused it.
		OnEvent: func(e hysteresis.Event) {
			printf("%s  *** %s -> %s: %s ***\n", clock(e.Time), e.From, e.To, explain(e, c.hold))
		},
	})
	if err != nil {
		return err
	}

	// A first reading says which limits apply; the Monitor's first sample
	// then covers the time since it.
	first, err := sys.Sample(ctx)
	if err != nil {
		return err
	}
	printf("loadwatch: every %v; trip at cpu %g%% / memory %g%% / swap %g MiB; reopen after %v below %g%% / %g%% / %g MiB\n",
		c.interval, c.signals[0].Trip, c.signals[1].Trip, c.signals[2].Trip/mib,
		c.hold, c.signals[0].Recover, c.signals[1].Recover, c.signals[2].Recover/mib)
	printf("loadwatch: cpu from %s, memory from %s\n", where(first.CPUCgroup), where(first.MemoryCgroup))

	mon, err := sysload.NewMonitor(sys, gate, sysload.MonitorOptions{
		Interval: c.interval,
		OnSample: func(l sysload.Load) {
			printf("%s  cpu %5.1f%%  mem %5.1f%%  swap %8.1f MiB  %s\n",
				clock(l.At), l.CPU, l.Memory, float64(l.Swap)/mib, gate.State())
		},
		OnError: func(err error) { printf("%s  sample failed: %v\n", clock(time.Now()), err) },
	})
	if err != nil {
		return err
	}
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	<-ctx.Done()
	// The sampler only reads /proc and cgroup files, and the gate's
	// callback only prints: a second is plenty for both to finish.
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := errors.Join(mon.Close(stopCtx), gate.Close(stopCtx)); err != nil {
		return err
	}

	st, ms := gate.Stats(), mon.Stats()
	printf("loadwatch: %d samples, %d errors, %d trips, overloaded for %v; final state %s\n",
		ms.Samples, ms.Errors, st.Trips, st.TimeIn[hysteresis.Overloaded].Round(time.Millisecond), st.State)
	return nil
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05.000") }

func where(cgroupDir string) string {
	if cgroupDir == "" {
		return "the host (/proc)"
	}
	return "the cgroup limit in /" + cgroupDir
}

// explain says in words why the gate changed.
func explain(c hysteresis.Event, hold time.Duration) string {
	switch {
	case c.Stale:
		return c.Signal + " not sampled recently"
	case c.From == hysteresis.Overloaded:
		return fmt.Sprintf("every signal stayed below recover for %v", hold)
	case c.To == hysteresis.Overloaded:
		return fmt.Sprintf("%s %s reached trip %s", c.Signal, value(c.Signal, c.Value), threshold(c.Signal, c.Threshold))
	case c.To == hysteresis.Warning:
		return fmt.Sprintf("%s %s reached warn %s", c.Signal, value(c.Signal, c.Value), threshold(c.Signal, c.Threshold))
	}
	return "every signal below warn"
}

// value formats a sample, to one decimal.
func value(signal string, v float64) string {
	if signal == sysload.Swap {
		return fmt.Sprintf("%.1f MiB", v/mib)
	}
	return fmt.Sprintf("%.1f%%", v)
}

// threshold formats a threshold as it was given, without rounding it away
// (a trip at 0.0002 % must not read "0.0%").
func threshold(signal string, v float64) string {
	if signal == sysload.Swap {
		return fmt.Sprintf("%g MiB", v/mib)
	}
	return fmt.Sprintf("%g%%", v)
}
