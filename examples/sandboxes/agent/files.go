package agent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sort"
	"strconv"
	"time"
)

// Entry is one item of a directory listing (GET /files/ on a directory).
type Entry struct {
	Name    string    `json:"name"`
	Dir     bool      `json:"dir,omitempty"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
}

// CleanPath turns the path of a /files URL into a path under the work
// directory ("." for the directory itself), or says why it leaves it.
// os.Root refuses anything that would leave it, symbolic links included;
// this only gives clear errors.
func CleanPath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	c := path.Clean(p)
	if path.IsAbs(c) || c == ".." || len(c) > 2 && c[:3] == "../" {
		return "", fmt.Errorf("path %q leaves the work directory", p)
	}
	return c, nil
}

// readFile serves GET /files/{path...}: a file's bytes, or a directory's
// listing as JSON.
func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	p, err := CleanPath(r.PathValue("path"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "files: %v", err)
		return
	}
	f, err := s.root.Open(p)
	if err != nil {
		fileError(w, p, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		fileError(w, p, err)
		return
	}
	if st.IsDir() {
		ents, err := f.ReadDir(-1)
		if err != nil {
			fileError(w, p, err)
			return
		}
		out := make([]Entry, 0, len(ents))
		for _, e := range ents {
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			out = append(out, Entry{Name: e.Name(), Dir: e.IsDir(), Size: info.Size(), ModTime: info.ModTime().UTC()})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		writeJSON(w, http.StatusOK, out)
		return
	}
	if !st.Mode().IsRegular() {
		writeError(w, http.StatusBadRequest, "files: %s is not a regular file", p)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	_, _ = io.Copy(w, f)
}

// writeFile serves PUT /files/{path...}: it writes the body to the file,
// creating its directories, at most MaxFile bytes.
func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	p, err := CleanPath(r.PathValue("path"))
	if err != nil || p == "." {
		if err == nil {
			err = errors.New("no file name")
		}
		writeError(w, http.StatusBadRequest, "files: %v", err)
		return
	}
	if r.ContentLength > s.opts.MaxFile {
		writeError(w, http.StatusRequestEntityTooLarge, "files: %s is %d bytes, over the limit of %d", p, r.ContentLength, s.opts.MaxFile)
		return
	}
	if err := s.root.MkdirAll(path.Dir(p), 0o755); err != nil {
		fileError(w, p, err)
		return
	}
	n, err := s.writeTo(p, http.MaxBytesReader(w, r.Body, s.opts.MaxFile), 0o644)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		_ = s.root.Remove(p)
		writeError(w, http.StatusRequestEntityTooLarge, "files: %s is over the limit of %d bytes", p, s.opts.MaxFile)
	case err != nil:
		fileError(w, p, err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"path": p, "size": n})
	}
}

// writeTo writes r to the file p under the root, through a temporary file
// renamed into place, so a reader never sees half a file.
func (s *Server) writeTo(p string, r io.Reader, perm fs.FileMode) (int64, error) {
	tmp := path.Join(path.Dir(p), ".agent-tmp-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+path.Base(p))
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Rename(tmp, p)
	}
	if err != nil {
		_ = s.root.Remove(tmp)
	}
	return n, err
}

func fileError(w http.ResponseWriter, p string, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, "files: %s does not exist", p)
	case errors.Is(err, fs.ErrPermission):
		writeError(w, http.StatusForbidden, "files: %s: permission denied", p)
	default:
		// os.Root's "path escapes from parent" and the like.
		writeError(w, http.StatusBadRequest, "files: %s: %v", p, err)
	}
}

// exportArchive serves GET /archive: the work directory as a tar stream
// (directories, regular files and symbolic links).
func (s *Server) exportArchive(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/x-tar")
	tw := tar.NewWriter(w)
	err := fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if p == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		var link string
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = s.root.Readlink(p); err != nil {
				return nil
			}
		} else if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, pipes, devices: not files of the conversation
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = p
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = "", "", 0, 0
		if !info.Mode().IsRegular() {
			return tw.WriteHeader(hdr)
		}
		f, err := s.root.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		// The size is the one stat saw: a file that grows or shrinks
		// meanwhile is cut or padded rather than breaking the stream.
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
		if err != nil {
			return err
		}
		if n < hdr.Size {
			_, err = io.CopyN(tw, zeros{}, hdr.Size-n)
		}
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		s.log.Warn("archive export failed", "err", err)
		// The status is sent: break the stream so the reader sees an
		// error instead of a short archive.
		panic(http.ErrAbortHandler)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// importArchive serves PUT /archive: it extracts a tar stream into the work
// directory (directories, regular files, symbolic links), at most
// MaxArchive bytes of file content.
func (s *Server) importArchive(w http.ResponseWriter, r *http.Request) {
	tr := tar.NewReader(r.Body)
	var total int64
	files := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "archive: %v", err)
			return
		}
		p, err := CleanPath(hdr.Name)
		if err != nil {
			writeError(w, http.StatusBadRequest, "archive: %v", err)
			return
		}
		if p == "." {
			continue
		}
		perm := fs.FileMode(hdr.Mode) & 0o777
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = s.root.MkdirAll(p, perm|0o700)
		case tar.TypeReg:
			total += hdr.Size
			if total > s.opts.MaxArchive {
				writeError(w, http.StatusRequestEntityTooLarge, "archive: over the limit of %d bytes", s.opts.MaxArchive)
				return
			}
			if err = s.root.MkdirAll(path.Dir(p), 0o755); err == nil {
				_, err = s.writeTo(p, tr, perm|0o600)
			}
			files++
		case tar.TypeSymlink:
			_ = s.root.Remove(p)
			if err = s.root.MkdirAll(path.Dir(p), 0o755); err == nil {
				err = s.root.Symlink(hdr.Linkname, p)
			}
		default:
			continue // not a file of the conversation
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "archive: %s: %v", p, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": files, "bytes": total})
}
