package archive_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/sandboxes/archive"
)

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("the sandbox died") }

func TestDir(t *testing.T) {
	ctx := context.Background()
	d, err := archive.NewDir(filepath.Join(t.TempDir(), "a"))
	require.NoError(t, err)
	_, err = d.Get(ctx, "c1")
	require.ErrorIs(t, err, archive.ErrNotFound)

	n, err := d.Put(ctx, "c1", strings.NewReader("first"))
	require.NoError(t, err)
	assert.Equal(t, int64(5), n)
	// A stream that fails part way never replaces a good archive.
	_, err = d.Put(ctx, "c1", io.MultiReader(strings.NewReader("half"), failing{}))
	require.Error(t, err)
	r, err := d.Get(ctx, "c1")
	require.NoError(t, err)
	b, _ := io.ReadAll(r)
	require.NoError(t, r.Close())
	assert.Equal(t, "first", string(b))
	ents, err := os.ReadDir(d.Path())
	require.NoError(t, err)
	assert.Len(t, ents, 1, "no temporary file is left")

	require.NoError(t, d.Delete(ctx, "c1"))
	require.NoError(t, d.Delete(ctx, "c1"), "deleting twice is fine")
	_, err = d.Get(ctx, "c1")
	require.ErrorIs(t, err, archive.ErrNotFound)
	for _, bad := range []string{"", "../x", ".hidden", "a/b"} {
		_, err := d.Put(ctx, bad, strings.NewReader("x"))
		assert.Error(t, err, bad)
	}
}
