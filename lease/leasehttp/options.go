package leasehttp

import (
	"errors"
	"log/slog"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// defaultMaxBody is Options.MaxBody when it is 0: a grant request is a few
// dozen bytes.
const defaultMaxBody = 4 << 10

// ErrInvalid is matched by the error of New for a bad option or argument;
// the error names it.
var ErrInvalid = errors.New("leasehttp: invalid argument")

// Options shape a Handler. The zero value is ready to use.
type Options struct {
	// Hosts are the host names the server is reached by, besides loopback
	// names (localhost, *.localhost) and IP addresses, which always pass:
	// "example.com" is that name, ".example.com" it and every name under
	// it, "*" any name (for a server behind a proxy that checks Host
	// itself). A request for another Host gets 403 unknown_host: a page
	// served under a name its owner then points at 127.0.0.1 (DNS
	// rebinding) would otherwise use the leases as if it were the
	// server's own page. Nil answers loopback names and addresses only.
	Hosts []string
	// MaxBody is the largest request body accepted, in bytes; a longer one
	// is answered with 413 body_too_large. Zero means 4 KiB; negative is
	// an error.
	MaxBody int64
	// Clock is the time source for the time left in a heartbeat answer.
	// Nil means real time.
	Clock func() time.Time
	// Logger receives internal errors (error) and refusals (debug). Nil
	// means discard.
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxBody < 0 {
		return o, errs.Invalid(ErrInvalid, "leasehttp: MaxBody (%d) is negative", o.MaxBody)
	}
	if o.MaxBody == 0 {
		o.MaxBody = defaultMaxBody
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
