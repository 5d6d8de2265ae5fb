package pgentities_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/ttl"
)

// terminate ends the server backends of application app and returns how
// many there were.
func terminate(t *testing.T, pg *pgtest.Postgres, app string) int {
	t.Helper()
	n, err := pg.Terminate(context.Background(), app)
	require.NoError(t, err)
	return n
}

// bufLen returns the number of activities buf holds.
func bufLen(ctx context.Context, buf ttl.Buffer) (int, error) {
	acts, err := buf.Peek(ctx, ttl.Activity{}, 1<<20)
	return len(acts), err
}
