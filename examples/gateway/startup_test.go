package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdBuilds puts a go command first on PATH that, run in dir, waits until
// the returned release is called before it builds (runs the real go);
// elsewhere it is the real go at once.
func holdBuilds(t *testing.T, dir string) (release func()) {
	t.Helper()
	realGo, err := exec.LookPath("go")
	require.NoError(t, err)
	dir, err = filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	bin := t.TempDir()
	fifo := filepath.Join(bin, "hold")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	script := "#!/bin/sh\nif [ \"$(pwd -P)\" = '" + dir + "' ]; then read _ < '" + fifo + "'; fi\nexec '" + realGo + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() {
		t.Helper()
		// Non-blocking: it fails unless the build waits on the other end.
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		require.NoError(t, err, "no build is held")
		_, err = f.WriteString("go\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
}

// The gateway listens before its functions are built, serves each as soon
// as it is built, logs each build, and tells through the AWS SDK that a
// function still building is Pending (invoking it is a
// ResourceConflictException); a function that does not build is Failed,
// and the others serve.
func TestStartServesWhileBuilding(t *testing.T) {
	fnDir, err := filepath.Abs("functions")
	require.NoError(t, err)
	release := holdBuilds(t, filepath.Join(fnDir, "echo"))
	broken := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(broken, "go.mod"), []byte("module broken\n\ngo 1.25\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "main.go"), []byte("package main\n\nfunc main() { notDefined() }\n"), 0o644))
	// hello first: the first function's build runs alone.
	tpl := writeTemplate(t, "", `Resources:
  Hello:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: hello
      CodeUri: {{functions}}/hello
      ReservedConcurrentExecutions: 1
  Echo:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: echo
      CodeUri: {{functions}}/echo
      ReservedConcurrentExecutions: 1
      ProvisionedConcurrencyConfig:
        ProvisionedConcurrentExecutions: 1
  Broken:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: broken
      CodeUri: `+broken+`
      ReservedConcurrentExecutions: 1
`)
	lbl := label(t)
	g := launch(t, withCreds(nil), "-addr", "127.0.0.1:0", "-label", lbl, "-build-dir", t.TempDir(), "-log-level", "info", "-template", tpl)
	c := sdk(g.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Listening, and echo's build held: echo is Pending.
	conf, err := c.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String("echo")})
	require.NoError(t, err)
	assert.Equal(t, types.StatePending, conf.State)
	assert.Equal(t, types.StateReasonCodeCreating, conf.StateReasonCode)
	assert.Equal(t, "The function is being created.", aws.ToString(conf.StateReason))
	_, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("echo"), Payload: []byte(`{}`)})
	var conflict *types.ResourceConflictException
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, "The operation cannot be performed at this time. The function is currently in the following state: Pending", conflict.ErrorMessage())
	assert.Equal(t, "User", aws.ToString(conflict.Type))

	// hello is built meanwhile, and serves; broken does not build.
	require.NoError(t, lambda.NewFunctionActiveV2Waiter(c, func(o *lambda.FunctionActiveV2WaiterOptions) { o.MinDelay = 50 * time.Millisecond }).
		Wait(ctx, &lambda.GetFunctionInput{FunctionName: aws.String("hello")}, 3*time.Minute), "hello Active (the SDK's waiter)")
	out := invoke(t, c, "hello", `{"name":"early"}`)
	assert.Nil(t, out.FunctionError)
	assert.Contains(t, string(out.Payload), "early")
	err = lambda.NewFunctionActiveV2Waiter(c, func(o *lambda.FunctionActiveV2WaiterOptions) { o.MinDelay = 50 * time.Millisecond }).
		Wait(ctx, &lambda.GetFunctionInput{FunctionName: aws.String("broken")}, 3*time.Minute)
	require.ErrorContains(t, err, "waiter state transitioned to Failure", "the SDK's waiter stops at Failed")
	fn, err := c.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String("broken")})
	require.NoError(t, err)
	assert.Equal(t, types.StateFailed, fn.Configuration.State)
	assert.Equal(t, types.StateReasonCodeInvalidZipFileException, fn.Configuration.StateReasonCode)
	assert.Contains(t, aws.ToString(fn.Configuration.StateReason), "undefined: notDefined")
	_, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("broken")})
	require.ErrorAs(t, err, &conflict)
	assert.Contains(t, conflict.ErrorMessage(), "in the following state: Failed")

	list, err := c.ListFunctions(ctx, &lambda.ListFunctionsInput{})
	require.NoError(t, err)
	states := map[string]types.State{}
	for _, f := range list.Functions {
		states[aws.ToString(f.FunctionName)] = f.State
	}
	assert.Equal(t, map[string]types.State{"hello": types.StateActive, "echo": types.StatePending, "broken": types.StateFailed}, states)
	assert.NotRegexp(t, builtRE, g.out.String(), "not every function is built")
	logs := g.logs.String()
	for _, fn := range []string{"hello", "echo", "broken"} {
		assert.Contains(t, logs, "msg=building function="+fn+"\n")
	}
	assert.Regexp(t, `msg=built function=hello took=\d`, logs)
	assert.Regexp(t, `level=ERROR msg="build failed" function=broken took=\S+ err="function broken: go build `, logs)
	assert.NotContains(t, logs, "msg=built function=echo")
	assert.Empty(t, listed(t, localAgent(t, lbl), "echo"), "no warm worker before the build")

	release()
	waitBuilt(t, g.out, g.errc)
	assert.Regexp(t, `functions built in \S+: 2 active, 1 failed`, g.out.String())
	assert.Regexp(t, `msg=built function=echo took=\d`, g.logs.String())
	conf, err = c.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String("echo")})
	require.NoError(t, err)
	assert.Equal(t, types.StateActive, conf.State)
	assert.Equal(t, types.LastUpdateStatusSuccessful, conf.LastUpdateStatus)
	out = invoke(t, c, "echo", `{"late":true}`)
	assert.JSONEq(t, `{"late":true}`, string(out.Payload))
	out = invoke(t, c, "hello", `{"name":"still"}`)
	assert.Contains(t, string(out.Payload), "still", "the failed build stopped nothing")
}
