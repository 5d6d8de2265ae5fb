package main

// The gateway with the clients its users have: the AWS CLI (each one on
// PATH: version 1 and 2 sign differently) and the AWS SDK for JavaScript v3,
// with the key pair a gateway makes at start and prints.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// unavailable skips t, or fails it when TTLKIT_REQUIRE_BACKENDS=1 (CI
// installs every client).
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if testenv.Required() {
		t.Fatalf(format+" (and "+testenv.EnvRequire+"=1)", args...)
	}
	t.Skipf(format, args...)
}

var exportRE = regexp.MustCompile(`(?m)^\s*export ((?:[A-Z_]+=\S+ ?)+)$`)

// startMadeCreds runs the program without a key pair and returns it and
// the variables of the export line it printed.
func startMadeCreds(t *testing.T) (*gw, map[string]string) {
	t.Helper()
	g := startGateway(t, label(t), map[string]string{envAccessKeyID: "", envSecretAccessKey: ""})
	var m []string
	require.Eventually(t, func() bool {
		m = exportRE.FindStringSubmatch(g.logs.String())
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, "no export line in:\n%s", g.logs)
	vars := map[string]string{}
	for _, kv := range strings.Fields(m[1]) {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return g, vars
}

// clientEnv is this process's environment without its AWS variables, with
// vars, and with no AWS configuration files: what a shell gets from
// pasting the export line, on a machine without an AWS profile.
func clientEnv(t *testing.T, vars map[string]string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	dir := t.TempDir()
	env = append(env, "AWS_CONFIG_FILE="+filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "credentials"),
		"AWS_PAGER=", "NODE_NO_WARNINGS=1")
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// A gateway started without a key pair makes one and prints it as a line
// to paste: the variables the AWS CLI and SDKs read, its endpoint among
// them. The SDK's client works with exactly those values.
func TestMadeCredentials(t *testing.T) {
	g, vars := startMadeCreds(t)
	assert.Regexp(t, `^TTLK[A-Z2-7]{16}$`, vars["AWS_ACCESS_KEY_ID"])
	assert.Len(t, vars["AWS_SECRET_ACCESS_KEY"], 40)
	assert.Equal(t, "us-east-1", vars["AWS_REGION"])
	assert.Equal(t, "us-east-1", vars["AWS_DEFAULT_REGION"], "version 1 of the CLI reads this one")
	assert.Equal(t, "http://"+g.addr, vars["AWS_ENDPOINT_URL_LAMBDA"])
	out := invoke(t, sdkWith(g.addr, sigv4.Credentials{AccessKeyID: vars["AWS_ACCESS_KEY_ID"], SecretAccessKey: vars["AWS_SECRET_ACCESS_KEY"]}), "echo", `{"made":true}`)
	assert.JSONEq(t, `{"made":true}`, string(out.Payload))
	_, err := sdk(g.addr).Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("echo")})
	refusedBy(t, err, 403, "UnrecognizedClientException")

	other, _ := startMadeCreds(t)
	assert.NotContains(t, other.logs.String(), vars["AWS_SECRET_ACCESS_KEY"], "each start makes its own pair")
}

// awsCLIs returns every AWS CLI on PATH (a Python one may stand before
// Debian's), or skips.
func awsCLIs(t *testing.T) []string {
	t.Helper()
	var clis []string
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "aws")
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		clis = append(clis, p)
	}
	if len(clis) == 0 {
		unavailable(t, "no aws on PATH (Debian's awscli)")
	}
	return clis
}

// runCLI runs the AWS CLI cli with env and args, bounded; it returns its
// output and error output, and whether it succeeded.
func runCLI(t *testing.T, cli string, env []string, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "%s %v did not finish", cli, args)
	return out.String(), errOut.String(), err == nil
}

// The AWS CLI, with exactly the values of the printed export line (and
// --endpoint-url, which versions before 2.13 need), invokes a function by
// its name and by its ARN (signed as it travels, ':' and '$' escaped); with
// another secret or an unknown access key id it reports AWS's exception.
func TestCLI(t *testing.T) {
	clis := awsCLIs(t)
	g, vars := startMadeCreds(t)
	for _, cli := range clis {
		// Older versions print it on stderr.
		stdout, stderr, ok := runCLI(t, cli, clientEnv(t, vars), "--version")
		require.True(t, ok, "%s --version: %s", cli, stderr)
		version := strings.Fields(stdout + stderr + " aws")[0]
		t.Run(strings.ReplaceAll(version, "/", "-"), func(t *testing.T) {
			// invokeArgs ends with the output file; extra are more options.
			invokeArgs := func(fn, payload string, extra ...string) []string {
				args := append([]string{"lambda", "invoke", "--endpoint-url", "http://" + g.addr, "--function-name", fn, "--payload", payload}, extra...)
				if strings.HasPrefix(version, "aws-cli/2") {
					args = append(args, "--cli-binary-format", "raw-in-base64-out")
				}
				return append(args, filepath.Join(t.TempDir(), "out.json"))
			}
			outFile := func(args []string) string {
				b, err := os.ReadFile(args[len(args)-1])
				require.NoError(t, err)
				return string(b)
			}

			args := invokeArgs("hello", `{"name":"cli"}`)
			stdout, stderr, ok := runCLI(t, cli, clientEnv(t, vars), args...)
			require.True(t, ok, "%s\n%s", stdout, stderr)
			assert.Contains(t, stdout, `"StatusCode": 200`)
			assert.Contains(t, outFile(args), `"message":"Hello, cli!"`)

			args = invokeArgs("arn:aws:lambda:us-east-1:000000000000:function:echo:$LATEST", `{"via":"arn"}`)
			stdout, stderr, ok = runCLI(t, cli, clientEnv(t, vars), args...)
			require.True(t, ok, "%s\n%s", stdout, stderr)
			assert.JSONEq(t, `{"via":"arn"}`, outFile(args))

			args = invokeArgs("000000000000:function:echo", `{"via":"partial"}`, "--qualifier", "$LATEST")
			stdout, stderr, ok = runCLI(t, cli, clientEnv(t, vars), args...)
			require.True(t, ok, "%s\n%s", stdout, stderr)
			assert.JSONEq(t, `{"via":"partial"}`, outFile(args))
			stdout, stderr, ok = runCLI(t, cli, clientEnv(t, vars), invokeArgs("hello:live", `{}`)...)
			require.True(t, ok, "%s\n%s", stdout, stderr)
			assert.Contains(t, stdout, `"ExecutedVersion": "1"`, "the template's AutoPublishAlias")
			_, stderr, ok = runCLI(t, cli, clientEnv(t, vars), invokeArgs("echo", `{}`, "--qualifier", "1")...)
			assert.False(t, ok)
			assert.Contains(t, stderr, "(ResourceNotFoundException) when calling the Invoke operation: Function not found: arn:aws:lambda:us-east-1:000000000000:function:echo:1")

			stdout, stderr, ok = runCLI(t, cli, clientEnv(t, vars), invokeArgs("echo", `{"async":true}`, "--invocation-type", "Event")...)
			require.True(t, ok, "%s\n%s", stdout, stderr)
			assert.Contains(t, stdout, `"StatusCode": 202`)
			stdout, stderr, ok = runCLI(t, cli, clientEnv(t, vars), invokeArgs("echo", `{}`, "--invocation-type", "DryRun")...)
			require.True(t, ok, "%s\n%s", stdout, stderr)
			assert.Contains(t, stdout, `"StatusCode": 204`)
			_, stderr, ok = runCLI(t, cli, clientEnv(t, vars), invokeArgs("echo:1", `{}`, "--invocation-type", "Event")...)
			assert.False(t, ok)
			assert.Contains(t, stderr, "(ResourceNotFoundException)")

			stdout, stderr, ok = runCLI(t, cli, clientEnv(t, vars), invokeArgs("echo", `{"log":"logged by echo"}`, "--log-type", "Tail")...)
			require.True(t, ok, "%s\n%s", stdout, stderr)
			var shown struct{ LogResult string }
			require.NoError(t, json.Unmarshal([]byte(stdout), &shown), stdout)
			log, err := base64.StdEncoding.DecodeString(shown.LogResult)
			require.NoError(t, err)
			assert.Regexp(t, `^START RequestId: [0-9a-f-]{36} Version: \$LATEST\nlogged by echo\nEND RequestId: .*\nREPORT RequestId: .*\tDuration: `, string(log))

			_, stderr, ok = runCLI(t, cli, clientEnv(t, vars), invokeArgs("nope", `{}`)...)
			assert.False(t, ok)
			assert.Contains(t, stderr, "An error occurred (ResourceNotFoundException) when calling the Invoke operation: Function not found: ")

			wrong := map[string]string{}
			for k, v := range vars {
				wrong[k] = v
			}
			wrong["AWS_SECRET_ACCESS_KEY"] = "wrong"
			_, stderr, ok = runCLI(t, cli, clientEnv(t, wrong), invokeArgs("echo", `{}`)...)
			assert.False(t, ok)
			assert.Contains(t, stderr, "(InvalidSignatureException)")
			wrong["AWS_SECRET_ACCESS_KEY"], wrong["AWS_ACCESS_KEY_ID"] = vars["AWS_SECRET_ACCESS_KEY"], "AKIDUNKNOWN"
			_, stderr, ok = runCLI(t, cli, clientEnv(t, wrong), invokeArgs("echo", `{}`)...)
			assert.False(t, ok)
			assert.Contains(t, stderr, "(UnrecognizedClientException)")
		})
	}
}

// jsClient returns the directory of testdata/jsclient with its packages
// installed (npm ci, which .ci/run does), or skips.
func jsClient(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		unavailable(t, "no node on PATH")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "jsclient"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@aws-sdk", "client-lambda")); err != nil {
		unavailable(t, "the JavaScript SDK is not installed: npm ci --prefix %s", dir)
	}
	return dir
}

type jsResult struct {
	Status          int
	FunctionError   string
	Payload         string
	ExecutedVersion string
	LogResult       string
	Error           string
	Message         string
	RequestID       string
}

// runJS invokes fn with payload through the JavaScript SDK's Lambda
// client, configured by env alone; options (at most one) are more fields
// of its InvokeCommand, as JSON.
func runJS(t *testing.T, dir string, env []string, fn, payload string, options ...string) jsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"invoke.mjs", fn, payload}, options...)...)
	cmd.Dir, cmd.Env = dir, env
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, _ := cmd.Output()
	var r jsResult
	require.NoError(t, json.Unmarshal(out, &r), "node invoke.mjs %s: %s\n%s", fn, out, errOut.String())
	return r
}

// The AWS SDK for JavaScript v3's Lambda client, configured by the printed
// export line alone (its endpoint too), invokes by name and by ARN, with a
// payload and with an empty one (whose content-length: 0 it signs, unlike
// the Go SDK); with another secret or an unknown access key id it raises
// AWS's exception.
func TestJavaScriptSDK(t *testing.T) {
	dir := jsClient(t)
	_, vars := startMadeCreds(t)
	env := clientEnv(t, vars)

	r := runJS(t, dir, env, "hello", `{"name":"js"}`)
	assert.Equal(t, 200, r.Status, "%+v", r)
	assert.Contains(t, r.Payload, `"message":"Hello, js!"`)
	r = runJS(t, dir, env, "arn:aws:lambda:us-east-1:000000000000:function:echo:$LATEST", `{"via":"arn"}`)
	assert.Equal(t, 200, r.Status, "%+v", r)
	assert.JSONEq(t, `{"via":"arn"}`, r.Payload)
	r = runJS(t, dir, env, "echo", "")
	assert.Equal(t, 200, r.Status, "%+v", r)
	assert.JSONEq(t, `{}`, r.Payload)
	r = runJS(t, dir, env, "000000000000:function:echo", `{"via":"partial"}`, `{"Qualifier":"$LATEST"}`)
	assert.Equal(t, 200, r.Status, "%+v", r)
	assert.Equal(t, "$LATEST", r.ExecutedVersion)
	assert.JSONEq(t, `{"via":"partial"}`, r.Payload)
	r = runJS(t, dir, env, "hello:live", `{"name":"alias"}`)
	assert.Equal(t, 200, r.Status, "%+v", r)
	assert.Equal(t, "1", r.ExecutedVersion, "the template's AutoPublishAlias")
	r = runJS(t, dir, env, "echo", `{"log":"logged by echo"}`, `{"LogType":"Tail"}`)
	assert.Equal(t, 200, r.Status, "%+v", r)
	log, err := base64.StdEncoding.DecodeString(r.LogResult)
	require.NoError(t, err)
	assert.Regexp(t, `^START RequestId: `+r.RequestID+` Version: \$LATEST\nlogged by echo\nEND RequestId: `+r.RequestID+`\nREPORT RequestId: `, string(log))
	r = runJS(t, dir, env, "echo", `{"async":true}`, `{"InvocationType":"Event"}`)
	assert.Equal(t, 202, r.Status, "%+v", r)
	r = runJS(t, dir, env, "echo", `{}`, `{"InvocationType":"DryRun"}`)
	assert.Equal(t, 204, r.Status, "%+v", r)
	r = runJS(t, dir, env, "echo", `{}`, `{"InvocationType":"Event","Qualifier":"2"}`)
	assert.Equal(t, "ResourceNotFoundException", r.Error, "%+v", r)
	r = runJS(t, dir, env, "echo", `{}`, `{"Qualifier":"1"}`)
	assert.Equal(t, "ResourceNotFoundException", r.Error, "%+v", r)
	assert.Contains(t, r.Message, "function:echo:1")

	assert.Regexp(t, `^[0-9a-f-]{36}$`, r.RequestID, "the SDK reads x-amzn-RequestId")
	r = runJS(t, dir, env, "nope", `{}`)
	assert.Equal(t, "ResourceNotFoundException", r.Error, "%+v", r)
	assert.Equal(t, 404, r.Status)
	assert.Contains(t, r.Message, "Function not found: ")
	assert.Regexp(t, `^[0-9a-f-]{36}$`, r.RequestID)

	wrong := clientEnv(t, vars)
	wrong = append(wrong, "AWS_SECRET_ACCESS_KEY=wrong")
	r = runJS(t, dir, wrong, "echo", `{}`)
	assert.Equal(t, "InvalidSignatureException", r.Error, "%+v", r)
	assert.Equal(t, 403, r.Status)
	unknown := append(clientEnv(t, vars), "AWS_ACCESS_KEY_ID=AKIDUNKNOWN")
	r = runJS(t, dir, unknown, "echo", `{}`)
	assert.Equal(t, "UnrecognizedClientException", r.Error, "%+v", r)
}

// callJS sends command (GetFunction, ..., or paginateListFunctions) with
// input (JSON) through the JavaScript SDK's Lambda client, configured by
// env alone, and decodes what it printed into out.
func callJS(t *testing.T, dir string, env []string, command, input string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "call.mjs", command, input)
	cmd.Dir, cmd.Env = dir, env
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	b, _ := cmd.Output()
	require.NoError(t, json.Unmarshal(b, out), "node call.mjs %s %s: %s\n%s", command, input, b, errOut.String())
}

// jsCall is what call.mjs prints of a command.
type jsCall struct {
	Output    map[string]any
	Pages     [][]string
	Error     string
	Message   string
	Status    int
	RequestID string
}

// The JavaScript SDK v3 lists the functions through its paginator, reads a
// function and its configuration, and raises ResourceNotFoundException,
// typed, for an unknown function or qualifier.
func TestJavaScriptSDKReadOperations(t *testing.T) {
	dir := jsClient(t)
	_, vars := startMadeCreds(t)
	env := clientEnv(t, vars)

	var c jsCall
	callJS(t, dir, env, "paginateListFunctions", `{"MaxItems":1}`, &c)
	assert.Equal(t, [][]string{{"echo"}, {"hello"}, {"slow"}}, c.Pages, "%+v", c)

	c = jsCall{}
	callJS(t, dir, env, "GetFunction", `{"FunctionName":"hello"}`, &c)
	require.Empty(t, c.Error, "%+v", c)
	conf := c.Output["Configuration"].(map[string]any)
	assert.Equal(t, "hello", conf["FunctionName"])
	assert.Equal(t, "arn:aws:lambda:us-east-1:000000000000:function:hello", conf["FunctionArn"])
	assert.Equal(t, "Active", conf["State"])
	assert.Equal(t, map[string]any{"ReservedConcurrentExecutions": 3.0}, c.Output["Concurrency"])
	assert.Regexp(t, `^[0-9a-f-]{36}$`, c.RequestID)

	c = jsCall{}
	callJS(t, dir, env, "GetFunctionConfiguration", `{"FunctionName":"hello","Qualifier":"live"}`, &c)
	require.Empty(t, c.Error, "%+v", c)
	assert.Equal(t, "1", c.Output["Version"])
	assert.Equal(t, "arn:aws:lambda:us-east-1:000000000000:function:hello:live", c.Output["FunctionArn"])
	assert.Equal(t, map[string]any{"Variables": map[string]any{"GREETING": "Hello", "STAGE": "ttlkit-gateway-demo"}}, c.Output["Environment"])

	for _, input := range []string{`{"FunctionName":"nope"}`, `{"FunctionName":"echo","Qualifier":"1"}`} {
		for _, command := range []string{"GetFunction", "GetFunctionConfiguration"} {
			c = jsCall{}
			callJS(t, dir, env, command, input, &c)
			assert.Equal(t, "ResourceNotFoundException", c.Error, "%s %s: %+v", command, input, c)
			assert.Equal(t, 404, c.Status)
			assert.Contains(t, c.Message, "Function not found: ")
		}
	}
}

// The AWS CLI lists the functions (its own pagination over pages of one),
// reads a function and its configuration, and reports
// ResourceNotFoundException for an unknown function or qualifier.
func TestCLIReadOperations(t *testing.T) {
	clis := awsCLIs(t)
	g, vars := startMadeCreds(t)
	for _, cli := range clis {
		stdout, stderr, ok := runCLI(t, cli, clientEnv(t, vars), "--version")
		require.True(t, ok, "%s --version: %s", cli, stderr)
		version := strings.Fields(stdout + stderr + " aws")[0]
		t.Run(strings.ReplaceAll(version, "/", "-"), func(t *testing.T) {
			lambdaCLI := func(args ...string) (map[string]any, string, bool) {
				stdout, stderr, ok := runCLI(t, cli, clientEnv(t, vars), append([]string{"lambda", "--endpoint-url", "http://" + g.addr, "--output", "json"}, args...)...)
				var out map[string]any
				if ok {
					require.NoError(t, json.Unmarshal([]byte(stdout), &out), stdout)
				}
				return out, stderr, ok
			}
			out, stderr, ok := lambdaCLI("list-functions", "--page-size", "1")
			require.True(t, ok, stderr)
			var names []string
			for _, f := range out["Functions"].([]any) {
				names = append(names, f.(map[string]any)["FunctionName"].(string))
			}
			assert.Equal(t, []string{"echo", "hello", "slow"}, names)

			out, stderr, ok = lambdaCLI("get-function", "--function-name", "hello")
			require.True(t, ok, stderr)
			conf := out["Configuration"].(map[string]any)
			assert.Equal(t, "Greets whoever it is given.", conf["Description"])
			assert.Equal(t, "$LATEST", conf["Version"])
			assert.Equal(t, "Successful", conf["LastUpdateStatus"])

			out, stderr, ok = lambdaCLI("get-function-configuration", "--function-name", "arn:aws:lambda:us-east-1:000000000000:function:slow")
			require.True(t, ok, stderr)
			assert.Equal(t, 5.0, out["Timeout"])
			assert.Equal(t, "provided.al2023", out["Runtime"])
			out, stderr, ok = lambdaCLI("get-function-configuration", "--function-name", "hello", "--qualifier", "live")
			require.True(t, ok, stderr)
			assert.Equal(t, "1", out["Version"])

			for _, args := range [][]string{
				{"get-function", "--function-name", "nope"},
				{"get-function-configuration", "--function-name", "nope"},
				{"get-function", "--function-name", "echo", "--qualifier", "1"},
				{"get-function-configuration", "--function-name", "echo:1"},
			} {
				_, stderr, ok = lambdaCLI(args...)
				assert.False(t, ok, "%v", args)
				assert.Contains(t, stderr, "(ResourceNotFoundException) when calling the ", "%v", args)
				assert.Contains(t, stderr, "Function not found: arn:aws:lambda:us-east-1:000000000000:function:", "%v", args)
			}
		})
	}
}
