package pool

import _ "unsafe" // for go:linkname

// nanotime is the runtime's monotonic clock, as jackc/puddle uses it: the
// wait statistics read it twice per wait, and time.Now also reads the wall
// clock. Under testing/synctest it is not faked; WaitDuration then counts
// real time.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
