//go:build linux

package host

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxRestored bounds what Restore unpacks, against an archive that was
// tampered with to fill the disk.
const maxRestored = 1 << 30

// Archive packs workspace id's files into its archive and removes the
// directory. Its server must be stopped. Each step leaves a state that a
// later Archive or Restore completes: the archive is written under a
// temporary name and renamed, and the directory is renamed away before it
// is removed, so a directory that exists is always whole.
func (h *Host) Archive(ctx context.Context, id string) error {
	dir := h.FilesDir(id)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if _, aerr := os.Stat(h.ArchivePath(id)); aerr == nil {
			return nil // archived already
		}
		// Never started: an empty archive keeps the workspace restorable.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("host: archive %s: %w", id, err)
		}
	}
	tmp := h.ArchivePath(id) + ".tmp"
	if err := pack(ctx, dir, tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("host: archive %s: %w", id, err)
	}
	if err := os.Rename(tmp, h.ArchivePath(id)); err != nil {
		return fmt.Errorf("host: archive %s: %w", id, err)
	}
	trash := filepath.Join(h.opts.Dir, "files", "."+id+".removing")
	_ = os.RemoveAll(trash)
	if err := os.Rename(dir, trash); err != nil {
		return fmt.Errorf("host: archive %s: %w", id, err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("host: archive %s: %w", id, err)
	}
	h.log.Debug("workspace archived", "workspace", id, "archive", h.ArchivePath(id))
	return nil
}

// pack writes dir as a gzip-compressed tar to path, and syncs it.
func pack(ctx context.Context, dir, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// Restore unpacks workspace id's archive into its directory and removes
// the archive. A workspace with a directory needs nothing (a directory
// that exists is whole; an archive beside it is a leftover and is
// removed); one with neither is new.
func (h *Host) Restore(ctx context.Context, id string) error {
	dir, archive := h.FilesDir(id), h.ArchivePath(id)
	if _, err := os.Stat(dir); err == nil {
		_ = os.Remove(archive)
		return nil
	}
	if _, err := os.Stat(archive); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	tmp := filepath.Join(h.opts.Dir, "files", "."+id+".restoring")
	_ = os.RemoveAll(tmp)
	if err := unpack(ctx, archive, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("host: restore %s: %w", id, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("host: restore %s: %w", id, err)
	}
	if err := os.Remove(archive); err != nil {
		return fmt.Errorf("host: restore %s: %w", id, err)
	}
	h.log.Debug("workspace restored", "workspace", id)
	return nil
}

// unpack extracts the archive at path into a new directory dir: regular
// files and directories only, every name local to dir (os.Root refuses
// the rest), at most maxRestored bytes.
func unpack(ctx context.Context, path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(zr)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(hdr.Name) {
			return fmt.Errorf("archive entry %q is outside the workspace", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(hdr.Name, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if total += hdr.Size; total > maxRestored {
				return fmt.Errorf("archive holds more than %d bytes", maxRestored)
			}
			if d := filepath.Dir(hdr.Name); d != "." {
				if err := root.MkdirAll(d, 0o700); err != nil {
					return err
				}
			}
			out, err := root.OpenFile(hdr.Name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			_, err = io.CopyN(out, tr, hdr.Size)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			_ = root.Chtimes(hdr.Name, hdr.ModTime, hdr.ModTime)
		default:
			return fmt.Errorf("archive entry %q is not a file or directory", hdr.Name)
		}
	}
}
