package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
	"github.com/ttlkit/ttlkit/internal/testenv/dockertest"
	"github.com/ttlkit/ttlkit/pool/docker"
)

// dockerTemplate runs the slow demo function from an image: slow
// (capacity 3, Timeout 5) and limited (capacity 1, Timeout 1).
const dockerTemplate = `Resources:
  Slow:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: slow
      PackageType: Image
      ImageUri: {{image}}
      Timeout: 5
      MemorySize: 128
      ReservedConcurrentExecutions: 3
  Limited:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: limited
      PackageType: Image
      ImageUri: {{image}}
      Timeout: 1
      ReservedConcurrentExecutions: 1
`

// containers returns the ids of the containers (in any state) that the
// gateway labelled lbl made for fn.
func containers(t *testing.T, cli *client.Client, lbl, fn string) []string {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", docker.LabelPool+"="+lbl+"."+fn),
	})
	require.NoError(t, err)
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// removeContainers removes, when t ends, every container the gateway
// labelled lbl made, whatever the test left.
func removeContainers(t *testing.T, cli *client.Client, lbl string) {
	t.Cleanup(func() {
		for _, fn := range []string{"slow", "limited"} {
			for _, id := range containers(t, cli, lbl, fn) {
				_, err := cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
				assert.NoError(t, err)
			}
		}
	})
}

// The gateway with workers as real Docker containers: the slow demo
// function built into an image FROM scratch, invoked through the AWS SDK.
func TestDocker(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.Image(t, cli, "github.com/ttlkit/ttlkit/examples/gateway/functions/slow", nil)
	tpl := writeTemplate(t, "", strings.ReplaceAll(dockerTemplate, "{{image}}", image))
	host := os.Getenv(dockertest.EnvDocker)

	// A result, a crash and a timeout, each evicting its container.
	t.Run("invoke", func(t *testing.T) {
		lbl := label(t)
		removeContainers(t, cli, lbl)
		g := startGateway(t, lbl, nil, "-template", tpl, "-docker", host)
		c := sdk(g.addr)
		destroyed := func(fn, reason string) {
			t.Helper()
			require.Eventually(t, func() bool {
				return gwtest.Metric(t, g.metrics(t), `gateway_workers_destroyed_total{function="`+fn+`",reason="`+reason+`"}`) == 1
			}, 30*time.Second, 20*time.Millisecond, "%s %s", fn, reason)
		}

		out := invoke(t, c, "slow", `{"ms":1}`)
		assert.Nil(t, out.FunctionError)
		assert.JSONEq(t, `{"slept_ms":1,"pid":1}`, string(out.Payload), "the runtime is its container's first process")
		first := containers(t, cli, lbl, "slow")
		require.Len(t, first, 1)

		out = invoke(t, c, "slow", `{"crash":true}`)
		require.NotNil(t, out.FunctionError)
		assert.Contains(t, string(out.Payload), "Runtime.ExitError")
		destroyed("slow", "crashed")
		assert.NotContains(t, containers(t, cli, lbl, "slow"), first[0], "the crashed container is removed")
		assert.Nil(t, invoke(t, c, "slow", `{"ms":1}`).FunctionError)

		out = invoke(t, c, "limited", `{"ms":4000}`)
		require.NotNil(t, out.FunctionError)
		assert.Contains(t, string(out.Payload), "Sandbox.Timedout")
		destroyed("limited", "timeout")
		assert.Empty(t, containers(t, cli, lbl, "limited"), "the timed-out container is removed")

		require.NoError(t, g.stop())
		assert.Empty(t, containers(t, cli, lbl, "slow"), "the drain removes every container")
	})

	t.Run("capacity", func(t *testing.T) {
		removeContainers(t, cli, label(t))
		capacityUnderLoad(t, tpl, "-docker", host)
	})

	t.Run("kill and restart", func(t *testing.T) {
		lbl := label(t)
		removeContainers(t, cli, lbl)
		a, err := agent.NewLocal(agent.Options{Label: lbl, Docker: cli})
		require.NoError(t, err)
		before := killAndRestart(t, a, "-template", tpl, "-docker", host)
		for _, w := range before {
			assert.True(t, strings.HasPrefix(w.ID, "c-"), w.ID)
		}
		assert.Empty(t, containers(t, cli, lbl, "slow"))
	})
}
