// Package dockertest gives ttlkit's tests a real Docker engine and images
// built offline: a static Go binary in an image FROM scratch, so no
// registry is needed.
//
// The engine is named by TTLKIT_TEST_DOCKER (a daemon address such as
// unix:///var/run/docker.sock). Unset skips the test; with
// TTLKIT_REQUIRE_BACKENDS=1 an unset variable or an engine that does not
// answer fails it.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ttlkit/ttlkit/internal/testenv"
)

// EnvDocker names the Docker engine tests use.
const EnvDocker = "TTLKIT_TEST_DOCKER"

// LabelTest marks every image and container a test makes.
const LabelTest = "io.ttlkit.test"

// Client returns a client of the test engine, closed when t ends.
func Client(t testing.TB) *client.Client {
	t.Helper()
	host := os.Getenv(EnvDocker)
	if host == "" {
		if testenv.Required() {
			t.Fatalf("%s is not set and %s=1", EnvDocker, testenv.EnvRequire)
		}
		t.Skipf("%s is not set", EnvDocker)
	}
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatalf("docker client for %s: %v", host, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		if testenv.Required() {
			t.Fatalf("docker engine %s does not answer: %v", host, err)
		}
		t.Skipf("docker engine %s does not answer: %v", host, err)
	}
	return cli
}

// Image builds the Go main package pkg (an import path) as a static binary
// and an image FROM scratch that runs it, tagged by the binary's hash and a
// name of the test's own, and removes that tag when t ends. extra maps paths in the image to files on
// this machine (a static busybox for a shell, say).
func Image(t testing.TB, cli *client.Client, pkg string, extra map[string]string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "app")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return BinaryImage(t, cli, bin, filepath.Base(pkg), extra)
}

// BinaryImage builds an image FROM scratch that runs the static binary bin,
// tagged "ttlkit-test/<name>:<hash>-<unique>", and removes it when t ends; extra is
// as Image's. It serves binaries built elsewhere than in the test's module.
func BinaryImage(t testing.TB, cli *client.Client, bin, name string, extra map[string]string) string {
	t.Helper()
	files := map[string]string{"app": bin}
	var dockerfile strings.Builder
	dockerfile.WriteString("FROM scratch\nCOPY app /app\n")
	for dst, src := range extra {
		file := "extra" + strings.ReplaceAll(dst, "/", "_")
		files[file] = src
		fmt.Fprintf(&dockerfile, "COPY %s %s\n", file, dst)
	}
	dockerfile.WriteString("ENTRYPOINT [\"/app\"]\n")

	h := sha256.New()
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	add := func(file string, data []byte, mode int64) {
		h.Write([]byte(file))
		h.Write(data)
		if err := tw.WriteHeader(&tar.Header{Name: file, Mode: mode, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	add("Dockerfile", []byte(dockerfile.String()), 0o644)
	for file, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		add(file, data, 0o755)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	// The tag is the test's own: tests running at once may build the same
	// content, and each removes its tag when it ends (the layers are
	// shared, so building again costs nothing).
	tag := "ttlkit-test/" + strings.ToLower(name) + ":" + hex.EncodeToString(h.Sum(nil))[:12] + "-" +
		strings.TrimPrefix(testenv.UniqueName(), "ttlkit_t_")[:8]

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, &ctxTar, client.ImageBuildOptions{
		Tags:        []string{tag},
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{LabelTest: "1"},
	})
	if err != nil {
		t.Fatalf("docker build %s: %v", tag, err)
	}
	defer res.Body.Close()
	// The build's outcome is in the stream: an "error" message fails it.
	dec := json.NewDecoder(res.Body)
	for {
		var msg struct {
			Stream, Error string
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("docker build %s: reading the output: %v", tag, err)
		}
		if msg.Error != "" {
			t.Fatalf("docker build %s: %s", tag, msg.Error)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cli.ImageRemove(ctx, tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return tag
}
