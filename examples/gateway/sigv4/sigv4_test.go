package sigv4_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

var creds = sigv4.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "s3cret/of+the=tests"}

func verifier(t *testing.T) *sigv4.Verifier {
	t.Helper()
	v, err := sigv4.NewVerifier("lambda", creds)
	require.NoError(t, err)
	return v
}

// refusal asserts that err is an *sigv4.Error with code, whose message
// contains msg.
func refusal(t *testing.T, err error, code, msg string) {
	t.Helper()
	var e *sigv4.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, code, e.Code)
	assert.Contains(t, e.Message, msg)
}

// server verifies every request it receives, as net/http hands it to a
// handler, and answers 200, or 403 with the refusal's code.
func server(t *testing.T, v *sigv4.Verifier) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := v.Check(r, time.Now())
		if err == nil {
			var body []byte
			if body, err = io.ReadAll(r.Body); err == nil {
				err = s.Verify(body)
			}
		}
		var e *sigv4.Error
		if errors.As(err, &e) {
			w.Header().Set("X-Code", e.Code)
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, e.Message+"\n"+e.Canonical)
			return
		} else if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// send signs req with the AWS SDK's signer (at time at, with c, for the
// lambda service in us-west-2), lets tamper change it, sends it and returns
// the status and the refusal's code.
func send(t *testing.T, req *http.Request, body []byte, c sigv4.Credentials, at time.Time, tamper func(*http.Request)) (int, string) {
	t.Helper()
	sum := sha256.Sum256(body)
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey},
		req, hex.EncodeToString(sum[:]), "lambda", "us-west-2", at)
	require.NoError(t, err)
	if tamper != nil {
		tamper(req)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Logf("%s %s: %d %s", req.Method, req.URL.RequestURI(), resp.StatusCode, msg)
	}
	return resp.StatusCode, resp.Header.Get("X-Code")
}

// newRequest is a request to base with path (escaped as it travels) and
// body.
func newRequest(t *testing.T, method, base, escapedPath string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, base+escapedPath, bytes.NewReader(body))
	require.NoError(t, err)
	return req
}

// What the AWS SDK's signer signs is accepted: a payload, none, a function
// ARN in the path (':' and '$' travel escaped, and are signed escaped
// twice), a query, headers with runs of blanks, a header sent twice; a
// header added after signing does not matter.
func TestSDKSignerAccepted(t *testing.T) {
	srv := server(t, verifier(t))
	payload := []byte(`{"name":"sigv4"}`)
	for _, c := range []struct {
		name, method, path string
		body               []byte
		header             http.Header
	}{
		{"payload", "POST", "/2015-03-31/functions/hello/invocations", payload, http.Header{"Content-Type": {"application/json"}}},
		{"no payload", "POST", "/2015-03-31/functions/hello/invocations", nil, nil},
		{"ARN as the SDKs send it", "POST", "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-west-2%3A000000000000%3Afunction%3Ahello%3A%24LATEST/invocations", payload, nil},
		{"ARN unescaped", "POST", "/2015-03-31/functions/arn:aws:lambda:us-west-2:000000000000:function:hello:$LATEST/invocations", payload, nil},
		{"escapes", "POST", "/2015-03-31/functions/" + url.PathEscape("a b%c~d") + "/invocations", payload, nil},
		{"query", "POST", "/2015-03-31/functions/hello/invocations?Qualifier=%24LATEST&a=b%20c&a=a", payload, nil},
		{"blanks", "GET", "/metrics", nil, http.Header{"X-Amz-Meta-Note": {"  a   b  c "}}},
		{"twice", "GET", "/metrics", nil, http.Header{"X-Amz-Meta-Note": {"one", "two"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := newRequest(t, c.method, srv.URL, c.path, c.body)
			for k, vs := range c.header {
				req.Header[k] = vs
			}
			code, _ := send(t, req, c.body, creds, time.Now(), func(r *http.Request) { r.Header.Set("X-Unsigned", "added") })
			assert.Equal(t, http.StatusOK, code)
		})
	}
}

// Every change to what was signed is refused: the body, the method, the
// path, the query, a signed header, the host, and a signature made with
// another secret.
func TestTamperingRefused(t *testing.T) {
	srv := server(t, verifier(t))
	const path = "/2015-03-31/functions/hello/invocations?Qualifier=%24LATEST"
	payload := []byte(`{"name":"sigv4"}`)
	for name, tamper := range map[string]func(*http.Request){
		"body": func(r *http.Request) {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(`{"name":"evil!"}`)), int64(len(`{"name":"evil!"}`))
		},
		"method":        func(r *http.Request) { r.Method = "PUT" },
		"path":          func(r *http.Request) { r.URL.Path, r.URL.RawPath = "/2015-03-31/functions/echo/invocations", "" },
		"query":         func(r *http.Request) { r.URL.RawQuery = "Qualifier=1" },
		"query added":   func(r *http.Request) { r.URL.RawQuery += "&x=1" },
		"signed header": func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") },
		"date": func(r *http.Request) {
			r.Header.Set("X-Amz-Date", time.Now().UTC().Add(time.Second).Format(sigv4.TimeFormat))
		},
		"host":             func(r *http.Request) { r.Host = "localhost" + r.Host[strings.LastIndex(r.Host, ":"):] },
		"signature":        func(r *http.Request) { r.Header.Set("Authorization", flipLast(r.Header.Get("Authorization"))) },
		"signature length": func(r *http.Request) { r.Header.Set("Authorization", r.Header.Get("Authorization")+"00") },
		"content sha256":   func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", strings.Repeat("0", 64)) },
	} {
		t.Run(name, func(t *testing.T) {
			req := newRequest(t, "POST", srv.URL, path, payload)
			req.Header.Set("Content-Type", "application/json")
			if name == "content sha256" {
				// Signed as claimed, though the body is another.
				sum := sha256.Sum256(payload)
				req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
				tamper = func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader(`{"name":"other"}`)) }
			}
			code, typ := send(t, req, payload, creds, time.Now(), tamper)
			assert.Equal(t, http.StatusForbidden, code)
			assert.Equal(t, sigv4.InvalidSignature, typ)
		})
	}
	req := newRequest(t, "POST", srv.URL, path, payload)
	code, typ := send(t, req, payload, sigv4.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: "another"}, time.Now(), nil)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, sigv4.InvalidSignature, typ)
	req = newRequest(t, "POST", srv.URL, path, payload)
	code, typ = send(t, req, payload, sigv4.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: creds.SecretAccessKey}, time.Now(), nil)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, sigv4.UnrecognizedClient, typ)
}

// flipLast changes the last hex digit of s.
func flipLast(s string) string {
	if strings.HasSuffix(s, "0") {
		return s[:len(s)-1] + "1"
	}
	return s[:len(s)-1] + "0"
}

// The example request of AWS's SigV4 test suite ("get-vanilla"), with its
// published signature: a check that does not rest on the SDK's signer.
func TestKnownSignature(t *testing.T) {
	v, err := sigv4.NewVerifier("service", sigv4.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"})
	require.NoError(t, err)
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "example.amazonaws.com"
	r.Header.Set("X-Amz-Date", "20150830T123600Z")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "+
		"SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
	s, err := v.Check(r, time.Date(2015, 8, 30, 12, 40, 0, 0, time.UTC))
	require.NoError(t, err)
	assert.Equal(t, "AKIDEXAMPLE", s.AccessKeyID())
	require.NoError(t, s.Verify(nil))
	refusal(t, s.Verify([]byte("x")), sigv4.InvalidSignature, "The request signature we calculated does not match the signature you provided. "+
		"Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
}

// Check refuses, before any body is read, a request without a signature,
// with an incomplete one, with an unknown access key id, with another
// service's or a malformed scope, one that does not sign Host, and one
// dated more than 15 minutes away, each with AWS's exception and words.
func TestCheck(t *testing.T) {
	v := verifier(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const date = "20260301T120000Z"
	authz := func(cred, signed string) string {
		return "AWS4-HMAC-SHA256 Credential=" + cred + ", SignedHeaders=" + signed + ", Signature=" + strings.Repeat("ab", 32)
	}
	good := "AKIDTEST/20260301/eu-west-3/lambda/aws4_request"
	for _, c := range []struct {
		name, authz, date, code, msg string
	}{
		{"none", "", "", sigv4.MissingAuthenticationToken, "Missing Authentication Token"},
		{"none, dated", "", date, sigv4.MissingAuthenticationToken, "Missing Authentication Token"},
		{"bearer", "Bearer k3y", date, sigv4.IncompleteSignature, "Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' parameter."},
		{"no date", authz(good, "host;x-amz-date"), "", sigv4.IncompleteSignature, "requires existence of either a 'X-Amz-Date' or a 'Date' header"},
		{"no signed headers", "AWS4-HMAC-SHA256 Credential=" + good + ", Signature=ab", date, sigv4.IncompleteSignature, "requires 'SignedHeaders' parameter"},
		{"short credential", authz("AKIDTEST/20260301/lambda/aws4_request", "host"), date, sigv4.IncompleteSignature, "Credential must have exactly 5 slash-delimited elements"},
		{"unknown key", authz("AKIDOTHER/20260301/eu-west-3/lambda/aws4_request", "host"), date, sigv4.UnrecognizedClient, "The security token included in the request is invalid."},
		{"bad date", authz(good, "host"), "2026-03-01T12:00:00Z", sigv4.IncompleteSignature, "ISO-8601"},
		{"scope date", authz("AKIDTEST/20260228/eu-west-3/lambda/aws4_request", "host"), date, sigv4.InvalidSignature, "'20260228' != '20260301'"},
		{"service", authz("AKIDTEST/20260301/eu-west-3/s3/aws4_request", "host"), date, sigv4.InvalidSignature, "Credential should be scoped to correct service: 'lambda'."},
		{"terminator", authz("AKIDTEST/20260301/eu-west-3/lambda/aws5_request", "host"), date, sigv4.InvalidSignature, "not 'aws5_request'"},
		{"no region", authz("AKIDTEST/20260301//lambda/aws4_request", "host"), date, sigv4.InvalidSignature, "valid region"},
		{"host unsigned", authz(good, "x-amz-date"), date, sigv4.InvalidSignature, "'Host' or ':authority' must be a 'SignedHeader'"},
		{"expired", authz("AKIDTEST/20260301/eu-west-3/lambda/aws4_request", "host"), "20260301T114459Z", sigv4.InvalidSignature,
			"Signature expired: 20260301T114459Z is now earlier than 20260301T114500Z (20260301T120000Z - 15 min.)"},
		{"future", authz("AKIDTEST/20260301/eu-west-3/lambda/aws4_request", "host"), "20260301T121501Z", sigv4.InvalidSignature,
			"Signature not yet current: 20260301T121501Z is still later than 20260301T121500Z (20260301T120000Z + 15 min.)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/2015-03-31/functions/hello/invocations", nil)
			if c.authz != "" {
				r.Header.Set("Authorization", c.authz)
			}
			if c.date != "" {
				r.Header.Set("X-Amz-Date", c.date)
			}
			_, err := v.Check(r, now)
			refusal(t, err, c.code, c.msg)
		})
	}
	// The edges of the window are inside it.
	for _, d := range []string{"20260301T114500Z", "20260301T121500Z"} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Authorization", authz(good, "host"))
		r.Header.Set("X-Amz-Date", d)
		_, err := v.Check(r, now)
		assert.NoError(t, err, d)
	}
}

// Sign signs as AWS's test suite does ("get-vanilla" again, and the
// signature stands a change of the body), and what it signs is verified.
func TestSign(t *testing.T) {
	example := sigv4.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	r, err := http.NewRequest("GET", "http://example.amazonaws.com/", nil)
	require.NoError(t, err)
	example.Sign(r, nil, "service", "us-east-1", time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC))
	assert.Equal(t, "20150830T123600Z", r.Header.Get("X-Amz-Date"))
	assert.Equal(t, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "+
		"SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31", r.Header.Get("Authorization"))

	srv := server(t, verifier(t))
	payload := []byte(`{"signed":"by sigv4"}`)
	r = newRequest(t, "POST", srv.URL, "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-west-2%3A000000000000%3Afunction%3Ahello/invocations?Qualifier=%24LATEST", payload)
	creds.Sign(r, payload, "lambda", "eu-west-3", time.Now())
	resp, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestCredentials(t *testing.T) {
	a, b := sigv4.NewCredentials(), sigv4.NewCredentials()
	assert.Regexp(t, `^TTLK[A-Z2-7]{16}$`, a.AccessKeyID)
	assert.Regexp(t, `^[A-Za-z0-9_-]{40}$`, a.SecretAccessKey)
	assert.NotEqual(t, a, b)
	require.NoError(t, a.Check())
	require.NoError(t, sigv4.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}.Check(), "LocalStack's")
	for _, bad := range []sigv4.Credentials{
		{AccessKeyID: "", SecretAccessKey: "s"},
		{AccessKeyID: "a/b", SecretAccessKey: "s"},
		{AccessKeyID: "a,b", SecretAccessKey: "s"},
		{AccessKeyID: "a b", SecretAccessKey: "s"},
		{AccessKeyID: strings.Repeat("A", 129), SecretAccessKey: "s"},
		{AccessKeyID: "AKID", SecretAccessKey: ""},
	} {
		assert.Error(t, bad.Check(), "%+v", bad)
		_, err := sigv4.NewVerifier("lambda", bad)
		assert.Error(t, err, "%+v", bad)
	}
	_, err := sigv4.NewVerifier("lambda")
	assert.Error(t, err, "no credentials")
}

// BenchmarkVerify is the cost of a signature to the gateway: Check and
// Verify of an invocation signed as the Go SDK signs it, with a small
// payload.
func BenchmarkVerify(b *testing.B) {
	v, err := sigv4.NewVerifier("lambda", creds)
	require.NoError(b, err)
	payload := []byte(`{"op":"get","key":"user:42"}`)
	r := httptest.NewRequest("POST", "http://127.0.0.1:8080/2015-03-31/functions/echo/invocations", bytes.NewReader(payload))
	r.Header.Set("Content-Type", "application/octet-stream")
	r.Header.Set("Amz-Sdk-Invocation-Id", "6551a253-0f43-4f65-8d67-b22928a26654")
	r.Header.Set("Amz-Sdk-Request", "attempt=1; max=1")
	sum := sha256.Sum256(payload)
	require.NoError(b, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey},
		r, hex.EncodeToString(sum[:]), "lambda", "us-east-1", time.Now()))
	r.Header.Set("Content-Length", strconv.Itoa(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := v.Check(r, time.Now())
		if err == nil {
			err = s.Verify(payload)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
