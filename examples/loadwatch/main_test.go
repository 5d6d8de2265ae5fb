package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

var changeLine = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  \*\*\* (normal|warning|overloaded) -> (normal|warning|overloaded): .+ \*\*\*$`)

var sampleLine = regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3}  cpu +\d+\.\d%  mem +\d+\.\d%  swap +\d+\.\d MiB  (normal|warning|overloaded)$`)

// TestRunForDuration runs the real sampler on this machine, in a synctest
// bubble so that the five seconds pass at once.
func TestRunForDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, errOut bytes.Buffer
		start := time.Now()
		err := run(context.Background(), []string{"-interval", "1s", "-for", "5500ms"}, &out, &errOut)
		require.NoError(t, err)
		assert.Equal(t, 5500*time.Millisecond, time.Since(start))
		assert.Empty(t, errOut.String())

		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		require.GreaterOrEqual(t, len(lines), 2+5+1, out.String())
		assert.Equal(t, "loadwatch: every 1s; trip at cpu 85% / memory 90% / swap 100 MiB; reopen after 1m0s below 60% / 70% / 50 MiB", lines[0])
		assert.Regexp(t, `^loadwatch: cpu from the (host|cgroup)`, lines[1])
		// Between the samples, a line for each state change the real load caused.
		var samples int
		for _, l := range lines[2 : len(lines)-1] {
			if strings.Contains(l, " *** ") {
				assert.Regexp(t, changeLine, l)
				continue
			}
			samples++
			assert.Regexp(t, sampleLine, l)
			want := start.Add(time.Duration(samples) * time.Second).UTC().Format("15:04:05.000")
			assert.True(t, strings.HasPrefix(l, want), "sample %d at %s: %q", samples, want, l)
		}
		assert.Equal(t, 5, samples)
		assert.Regexp(t, `^loadwatch: 5 samples, 0 errors, \d+ trips, overloaded for .*; final state (normal|warning|overloaded)$`, lines[len(lines)-1])
	})
}

// TestRunPrintsStateChanges sets memory thresholds every machine exceeds and
// CPU and swap thresholds none can reach, so the gate trips on the first
// sample, because of memory, and stays tripped.
func TestRunPrintsStateChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		err := run(context.Background(), []string{
			"-interval", "2s", "-for", "7s", "-hold", "10s",
			"-mem-warn", "0.0001", "-mem-trip", "0.0002", "-mem-recover", "0.0001",
			"-cpu-warn", "101", "-cpu-trip", "101", "-cpu-recover", "101",
			"-swap-warn", "1e9", "-swap-trip", "1e9", "-swap-recover", "1e9",
		}, &out, &bytes.Buffer{})
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		require.Len(t, lines, 2+1+3+1, out.String())
		// The gate reports the change from its own goroutine, so the line
		// comes just before or just after the first sample's, which caused it.
		change := 2
		if !strings.Contains(lines[2], "***") {
			change = 3
		}
		assert.Regexp(t, changeLine, lines[change])
		assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}  \*\*\* normal -> overloaded: memory \d+\.\d% reached trip 0\.0002% \*\*\*$`, lines[change])
		samples := slices.Delete(slices.Clone(lines[2:6]), change-2, change-1)
		for _, l := range samples {
			assert.Regexp(t, sampleLine, l)
			assert.True(t, strings.HasSuffix(l, "  overloaded"), l)
		}
		assert.Regexp(t, `^loadwatch: 3 samples, 0 errors, 1 trips, overloaded for 5s; final state overloaded$`, lines[6])
	})
}

func TestRunStopsWhenCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(2500*time.Millisecond, cancel) // what SIGINT does through signal.NotifyContext
		var out bytes.Buffer
		require.NoError(t, run(ctx, nil, &out, &bytes.Buffer{}))
		assert.Contains(t, out.String(), "loadwatch: 2 samples,")
	})
}

func TestRunRejectsBadFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-interval 0":     "-interval (0s) must be positive",
		"-for -1s":        "-for (-1s) is negative",
		"extra":           `unexpected argument "extra"`,
		"-cpu-recover 90": `hysteresis: signal "cpu": Recover (90) above Trip (85)`,
		"-hold -1s":       "-hold (-1s) is negative",
		"-swap-warn 200":  `hysteresis: signal "swap": Warn (200) above Trip (100)`, // MiB, as typed
		"-swap-recover 0": `hysteresis: signal "swap": Recover is missing (0)`,
		"-nope":           "flag provided but not defined: -nope",
	} {
		var errOut bytes.Buffer
		err := run(context.Background(), strings.Fields(args), &bytes.Buffer{}, &errOut)
		assert.ErrorContains(t, err, want, args)
	}
	var errOut bytes.Buffer
	err := run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &errOut)
	assert.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, errOut.String(), "-cpu-trip")
}

// TestDefaultSignalsAreTheCameraServerPreset: the default thresholds are a
// camera server's admission control, and a valid gate.
func TestDefaultSignalsAreTheCameraServerPreset(t *testing.T) {
	assert.Equal(t, []hysteresis.Signal{
		{Name: "cpu", Warn: 70, Trip: 85, Recover: 60},
		{Name: "memory", Warn: 75, Trip: 90, Recover: 70},
		{Name: "swap", Warn: 50 << 20, Trip: 100 << 20, Recover: 50 << 20},
	}, defaultSignals())
	c, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, time.Minute, c.hold)
	assert.Equal(t, defaultSignals(), c.signals)
	_, err = hysteresis.New(defaultSignals(), hysteresis.Options{Hold: c.hold})
	assert.NoError(t, err)
}
