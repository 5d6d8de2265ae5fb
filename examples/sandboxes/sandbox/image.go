package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// DefaultImage is the sandbox image's name.
const DefaultImage = "workspace-base:latest"

// DefaultBusybox is where Debian's busybox-static package installs its
// static binary.
const DefaultBusybox = "/bin/busybox"

// AgentRevision names what the image's agent does that the backend counts
// on. An image labelled with another (or none: built before the agent ran
// its commands under shims, checked Host names and kept its owner) is
// rebuilt, so that an engine's old image does not keep serving the old
// agent. Bump it with such a change of the agent.
const AgentRevision = "3"

// labelRevision is the image's label holding its AgentRevision.
const labelRevision = "io.ttlkit.sandboxes.agent-revision"

// agentPath is the agent's path in the image.
const agentPath = "/usr/local/bin/sandbox-agent"

// dockerfile builds workspace-base FROM scratch: a static busybox for a
// shell and coreutils (its applets installed as links in /bin), the static
// agent, and an unprivileged user. Nothing is pulled.
const dockerfile = `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY passwd group /etc/
COPY agent ` + agentPath + `
USER 65534:65534
WORKDIR ` + WorkDir + `
ENV HOME=` + WorkDir + ` PATH=/usr/local/bin:/usr/bin:/bin
ENTRYPOINT ["` + agentPath + `"]
CMD ["-listen", ":8080", "-dir", "` + WorkDir + `"]
`

// EnsureImage builds the image tag unless the engine has it with this
// AgentRevision. See BuildImage.
func EnsureImage(ctx context.Context, cli *client.Client, tag, busybox string, labels map[string]string, log io.Writer) (built bool, err error) {
	res, err := cli.ImageInspect(ctx, tag)
	switch {
	case err == nil && res.Config != nil && res.Config.Labels[labelRevision] == AgentRevision:
		return false, nil
	case err != nil && !cerrdefs.IsNotFound(err):
		return false, fmt.Errorf("sandbox: image %s: %w", tag, err)
	}
	return true, BuildImage(ctx, cli, tag, busybox, labels, log)
}

// BuildImage builds the workspace-base image as tag, offline: the agent
// (agent/sandbox-agent, compiled here as a static binary with the Go
// toolchain) and the static busybox at busybox, in an image FROM scratch,
// labelled with labels and the AgentRevision. The build's output goes to
// log (nil discards it).
func BuildImage(ctx context.Context, cli *client.Client, tag, busybox string, labels map[string]string, log io.Writer) error {
	labels = maps.Clone(labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelRevision] = AgentRevision
	dir, err := os.MkdirTemp("", "workspace-base-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	agentBin := filepath.Join(dir, "agent")
	if err := buildAgent(ctx, agentBin); err != nil {
		return err
	}
	files := map[string]string{"agent": agentBin, "busybox": busybox}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, data []byte, mode int64) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("Dockerfile", []byte(dockerfile), 0o644); err != nil {
		return err
	}
	if err := add("passwd", []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:"+WorkDir+":/bin/sh\n"), 0o644); err != nil {
		return err
	}
	if err := add("group", []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644); err != nil {
		return err
	}
	for name, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("sandbox: image %s: %w (install Debian's busybox-static, or pass its path)", tag, err)
		}
		if err := add(name, data, 0o755); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags: []string{tag}, Remove: true, ForceRemove: true, Labels: labels,
	})
	if err != nil {
		return fmt.Errorf("sandbox: build %s: %w", tag, err)
	}
	defer res.Body.Close()
	if log == nil {
		log = io.Discard
	}
	dec := json.NewDecoder(res.Body)
	for {
		var msg struct{ Stream, Error string }
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("sandbox: build %s: %w", tag, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("sandbox: build %s: %s", tag, msg.Error)
		}
		_, _ = io.WriteString(log, msg.Stream)
	}
}

// buildAgent compiles agent/sandbox-agent as a static binary to out.
func buildAgent(ctx context.Context, out string) error {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return fmt.Errorf("sandbox: cannot find the example's source")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./agent/sandbox-agent")
	cmd.Dir = filepath.Dir(filepath.Dir(file)) // examples/sandboxes
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sandbox: go build the agent in %s: %v\n%s", cmd.Dir, err, b)
	}
	return nil
}
