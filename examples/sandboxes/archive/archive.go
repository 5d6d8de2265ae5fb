// Package archive keeps the files of conversations whose sandbox was
// destroyed: one tar stream per conversation, written when the sandbox is
// destroyed and read back into its successor.
//
// Store is all the backend needs, so an object store (S3: PutObject,
// GetObject, DeleteObject) plugs in beside Dir, the directory
// implementation.
package archive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotFound is returned by Store.Get for a conversation without an
// archive.
var ErrNotFound = errors.New("archive: not found")

// Store keeps one archive (a tar stream) per conversation. Implementations
// are safe for concurrent use, by several processes when they share the
// storage.
type Store interface {
	// Put stores the stream r as the archive of conversation, replacing
	// the previous one only once r has been read to its end without error:
	// a sandbox that dies mid-export never replaces a good archive with
	// half of one.
	Put(ctx context.Context, conversation string, r io.Reader) (size int64, err error)
	// Get returns the archive of conversation, or ErrNotFound.
	Get(ctx context.Context, conversation string) (io.ReadCloser, error)
	// Delete removes the archive of conversation; a missing one is not an
	// error.
	Delete(ctx context.Context, conversation string) error
}

// Dir is a Store of files in a directory, "<conversation>.tar", written
// through a temporary file renamed into place. Backend instances on one
// machine (or sharing the directory over a network file system with atomic
// rename) share it.
type Dir struct {
	path string
}

var _ Store = (*Dir)(nil)

// NewDir returns a Dir at path, creating the directory if needed.
func NewDir(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("archive: directory is empty")
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	return &Dir{path: path}, nil
}

// Path returns the directory.
func (d *Dir) Path() string { return d.path }

func (d *Dir) file(conversation string) (string, error) {
	if conversation == "" || conversation != filepath.Base(conversation) || conversation[0] == '.' {
		return "", fmt.Errorf("archive: conversation %q is not a plain name", conversation)
	}
	return filepath.Join(d.path, conversation+".tar"), nil
}

// Put writes r to a temporary file and renames it over the archive.
func (d *Dir) Put(ctx context.Context, conversation string, r io.Reader) (int64, error) {
	name, err := d.file(conversation)
	if err != nil {
		return 0, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := filepath.Join(d.path, "."+conversation+".tar."+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, fmt.Errorf("archive: %w", err)
	}
	n, err := io.Copy(f, readerCtx{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, fmt.Errorf("archive: put %s: %w", conversation, err)
	}
	return n, nil
}

// Get opens the archive.
func (d *Dir) Get(_ context.Context, conversation string) (io.ReadCloser, error) {
	name, err := d.file(conversation)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, conversation)
	}
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	return f, nil
}

// Delete removes the archive.
func (d *Dir) Delete(_ context.Context, conversation string) error {
	name, err := d.file(conversation)
	if err != nil {
		return err
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}

// readerCtx stops a copy when ctx ends.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, context.Cause(r.ctx)
	}
	return r.r.Read(p)
}
