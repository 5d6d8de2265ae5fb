//go:build linux

package host

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func newHost(t testing.TB) *Host {
	h, err := New(Options{Dir: t.TempDir(), Command: []string{"/bin/true"}})
	require.NoError(t, err)
	return h
}

// TestArchiveRestore: files go into the archive and the directory goes;
// a restore brings them back and removes the archive; each step repeated
// is harmless.
func TestArchiveRestore(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	dir := h.FilesDir("ws")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("b"), 0o644))

	require.NoError(t, h.Archive(ctx, "ws"))
	_, err := os.Stat(dir)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, h.Archive(ctx, "ws"), "archived already")

	require.NoError(t, h.Restore(ctx, "ws"))
	b, err := os.ReadFile(filepath.Join(dir, "sub", "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "b", string(b))
	_, err = os.Stat(h.ArchivePath("ws"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, h.Restore(ctx, "ws"), "restored already")

	// A workspace never started archives to an empty archive.
	require.NoError(t, h.Archive(ctx, "new"))
	require.NoError(t, h.Restore(ctx, "new"))
	ents, err := os.ReadDir(h.FilesDir("new"))
	require.NoError(t, err)
	assert.Empty(t, ents)
}

func tarGz(t testing.TB, entries map[string]string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range entries {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestRestoreRefusesEscapes: an archive tampered with to write outside the
// workspace is refused, and nothing outside is written.
func TestRestoreRefusesEscapes(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"../evil", "/etc/evil", "a/../../evil", "sub/../../evil"} {
		h := newHost(t)
		require.NoError(t, os.WriteFile(h.ArchivePath("ws"), tarGz(t, map[string]string{name: "x"}), 0o644))
		err := h.Restore(ctx, "ws")
		assert.Error(t, err, name)
		assertNothingOutside(t, h)
	}
}

// assertNothingOutside fails if the data directory holds anything but its
// three directories, the workspace's files and its archive.
func assertNothingOutside(t testing.TB, h *Host) {
	t.Helper()
	err := filepath.WalkDir(h.opts.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.opts.Dir, p)
		switch {
		case rel == "." || rel == "files" || rel == "archives" || rel == "run":
		case rel == filepath.Join("archives", "ws.tar.gz"):
		case len(rel) > len("files/ws") && rel[:len("files/ws")+1] == "files/ws/", rel == "files/ws":
		default:
			t.Fatalf("%s was written", rel)
		}
		return nil
	})
	require.NoError(t, err)
}

// FuzzRestore unpacks arbitrary archives: nothing panics and nothing is
// written outside the workspace's directory.
func FuzzRestore(f *testing.F) {
	f.Add(tarGz(f, map[string]string{"a.txt": "a", "dir/b.txt": "b"}))
	f.Add(tarGz(f, map[string]string{"../x": "x"}))
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, archive []byte) {
		h := newHost(t)
		require.NoError(t, os.WriteFile(h.ArchivePath("ws"), archive, 0o644))
		_ = h.Restore(context.Background(), "ws")
		assertNothingOutside(t, h)
	})
}
