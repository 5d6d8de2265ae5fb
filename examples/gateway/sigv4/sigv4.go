// Package sigv4 verifies the AWS Signature Version 4 of HTTP requests, as an
// AWS service does, so that the AWS SDKs and CLI authenticate to the
// gateway's Invoke API unchanged, with an access key pair the gateway holds.
//
// Only the Authorization header form is taken (what the SDKs and the CLI
// send), with X-Amz-Date; a presigned URL's query parameters and the Date
// header are not. Credentials.Sign signs that way too, for clients without
// an AWS SDK.
//
// The canonical request is written here, per the SigV4 specification, from
// exactly what the client listed in SignedHeaders, rather than by re-signing
// a copy of the request with the AWS SDK's signer: that signer decides for
// itself which headers it signs, and so cannot reproduce what other clients
// sign. It adds content-length whenever the body is not empty and never when
// it is, while botocore (the AWS CLI) never signs content-length and the
// JavaScript SDK v3 signs it even when it is 0; and it leaves out headers
// such as User-Agent, Expect and Transfer-Encoding whatever the client
// listed. The tests check this package against the SDK's signer, the AWS
// CLI and the JavaScript SDK.
package sigv4

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

const (
	// Algorithm is the only signing algorithm taken.
	Algorithm = "AWS4-HMAC-SHA256"
	// MaxSkew is how far a request's X-Amz-Date may be from the server's
	// clock, either way, as AWS allows: a signed request can be replayed
	// for that long, and a client's clock may be off by that much.
	MaxSkew = 15 * time.Minute
	// TimeFormat is X-Amz-Date's format (ISO 8601 basic, UTC).
	TimeFormat = "20060102T150405Z"
)

// The exceptions a refusal names, as AWS services answer them (in the
// X-Amzn-ErrorType header), so that the SDKs and the CLI report them.
const (
	// MissingAuthenticationToken: no Authorization header.
	MissingAuthenticationToken = "MissingAuthenticationTokenException"
	// IncompleteSignature: an Authorization header that is not a whole
	// SigV4 signature, or no X-Amz-Date.
	IncompleteSignature = "IncompleteSignatureException"
	// UnrecognizedClient: an access key id the server does not hold.
	UnrecognizedClient = "UnrecognizedClientException"
	// InvalidSignature: a wrong signature, a wrong scope, or a date
	// outside MaxSkew.
	InvalidSignature = "InvalidSignatureException"
)

// Error is a refused request: Code is the exception AWS names for it and
// Message its text, in AWS's words.
type Error struct {
	Code, Message string
	// Canonical is, for a wrong signature, the canonical request and the
	// string to sign the server computed: what a client's author compares
	// with their own to find the difference. They hold nothing secret.
	Canonical string
}

func (e *Error) Error() string { return "sigv4: " + e.Code + ": " + e.Message }

func refuse(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// signatureMismatch is AWS's message for a wrong signature.
const signatureMismatch = "The request signature we calculated does not match the signature you provided. " +
	"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."

// Credentials is an access key pair.
type Credentials struct {
	AccessKeyID, SecretAccessKey string
}

// NewCredentials returns a random pair: a 20-character access key id, as
// AWS's are ("TTLK" and 80 random bits), and a 40-character secret of 240
// random bits in URL-safe base64, which a shell takes unquoted.
func NewCredentials() Credentials {
	var id [10]byte
	var secret [30]byte
	_, _ = rand.Read(id[:])
	_, _ = rand.Read(secret[:])
	return Credentials{
		AccessKeyID:     "TTLK" + base32.StdEncoding.EncodeToString(id[:]),
		SecretAccessKey: base64.RawURLEncoding.EncodeToString(secret[:]),
	}
}

// Check reports what is wrong with c: an access key id must be 1 to 128
// letters, digits, '-', '_' or '.' (a '/' or ',' would break the
// Authorization header it travels in), a secret must not be empty.
func (c Credentials) Check() error {
	if c.AccessKeyID == "" || len(c.AccessKeyID) > 128 ||
		strings.ContainsFunc(c.AccessKeyID, func(r rune) bool { return !keyIDChar(r) }) {
		return fmt.Errorf("access key id %q is not 1 to 128 letters, digits, '-', '_' or '.'", c.AccessKeyID)
	}
	if c.SecretAccessKey == "" {
		return errors.New("the secret access key is empty")
	}
	return nil
}

func keyIDChar(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
}

// Verifier verifies the signatures of requests to one service, made with
// one of the key pairs it holds. It is safe for concurrent use.
type Verifier struct {
	service string
	secrets map[string]string // access key id -> secret
}

// NewVerifier returns a Verifier of the requests to service (the SigV4
// service name, "lambda") signed with one of creds, which must pass
// Check.
func NewVerifier(service string, creds ...Credentials) (*Verifier, error) {
	v := &Verifier{service: service, secrets: map[string]string{}}
	for _, c := range creds {
		if err := c.Check(); err != nil {
			return nil, fmt.Errorf("sigv4: %w", err)
		}
		v.secrets[c.AccessKeyID] = c.SecretAccessKey
	}
	if len(v.secrets) == 0 {
		return nil, errors.New("sigv4: no credentials")
	}
	return v, nil
}

// Signed is a request whose Authorization header Check accepted: its
// signature is still to be verified over the body, with Verify.
type Signed struct {
	r             *http.Request
	keyID, secret string
	amzDate       string
	scope         string // date/region/service/aws4_request
	date, region  string
	service       string
	signedHeaders string
	signature     string // hex, as the client sent it
}

// Check parses r's Authorization header and checks everything a signature
// tells without the body: that it is complete, that the server holds its
// access key id, that its scope is this service's, and that its date is
// within MaxSkew of now. A request refused here costs the server no read
// of its body. The error is an *Error.
func (v *Verifier) Check(r *http.Request, now time.Time) (*Signed, error) {
	authz := r.Header.Get("Authorization")
	if authz == "" {
		return nil, refuse(MissingAuthenticationToken, "Missing Authentication Token")
	}
	params := map[string]string{}
	if rest, ok := strings.CutPrefix(authz, Algorithm+" "); ok {
		for _, kv := range strings.Split(rest, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
			params[k] = val
		}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	var missing []string
	for _, p := range []string{"Credential", "Signature", "SignedHeaders"} {
		if params[p] == "" {
			missing = append(missing, "Authorization header requires '"+p+"' parameter.")
		}
	}
	if amzDate == "" {
		missing = append(missing, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	if len(missing) > 0 {
		return nil, refuse(IncompleteSignature, "%s", strings.Join(missing, " "))
	}
	cred := strings.Split(params["Credential"], "/")
	if len(cred) != 5 {
		return nil, refuse(IncompleteSignature, "Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term, got '%s'", params["Credential"])
	}
	keyID, date, region, service, term := cred[0], cred[1], cred[2], cred[3], cred[4]
	secret, ok := v.secrets[keyID]
	if !ok {
		return nil, refuse(UnrecognizedClient, "The security token included in the request is invalid.")
	}
	at, err := time.Parse(TimeFormat, amzDate)
	if err != nil {
		return nil, refuse(IncompleteSignature, "Date must be in ISO-8601 'basic format'. Got '%s'.", amzDate)
	}
	switch {
	case date != amzDate[:8]:
		return nil, refuse(InvalidSignature, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", date, amzDate[:8], amzDate)
	case region == "":
		return nil, refuse(InvalidSignature, "Credential should be scoped to a valid region.")
	case service != v.service:
		return nil, refuse(InvalidSignature, "Credential should be scoped to correct service: '%s'.", v.service)
	case term != "aws4_request":
		return nil, refuse(InvalidSignature, "Credential should be scoped with a valid terminator: 'aws4_request', not '%s'.", term)
	case !slices.Contains(strings.Split(params["SignedHeaders"], ";"), "host"):
		// A signature that does not cover Host could be sent to any server
		// that holds the key.
		return nil, refuse(InvalidSignature, "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
	}
	now = now.UTC()
	if earliest := now.Add(-MaxSkew); at.Before(earliest) {
		return nil, refuse(InvalidSignature, "Signature expired: %s is now earlier than %s (%s - 15 min.)",
			amzDate, earliest.Format(TimeFormat), now.Format(TimeFormat))
	}
	if latest := now.Add(MaxSkew); at.After(latest) {
		return nil, refuse(InvalidSignature, "Signature not yet current: %s is still later than %s (%s + 15 min.)",
			amzDate, latest.Format(TimeFormat), now.Format(TimeFormat))
	}
	return &Signed{
		r: r, keyID: keyID, secret: secret, amzDate: amzDate, scope: strings.Join(cred[1:], "/"),
		date: date, region: region, service: service, signedHeaders: params["SignedHeaders"], signature: params["Signature"],
	}, nil
}

// AccessKeyID returns the access key id the request was signed with.
func (s *Signed) AccessKeyID() string { return s.keyID }

// Region returns the region of the request's credential scope: the one
// the client signed for.
func (s *Signed) Region() string { return s.region }

// Verify reports whether the signature is the one the request with body
// payload (as received: it must be the whole body) makes with the key
// pair's secret, compared in constant time. The payload's own hash is
// signed, never what an X-Amz-Content-Sha256 header claims: a header that
// does not match the body fails like any other change. The error is an
// *Error.
func (s *Signed) Verify(payload []byte) error {
	want, canonical, toSign := s.sign(payload)
	got, err := hex.DecodeString(s.signature)
	if err != nil || !hmac.Equal(got, want) {
		return &Error{Code: InvalidSignature, Message: signatureMismatch,
			Canonical: "canonical request:\n" + canonical + "\nstring to sign:\n" + toSign}
	}
	return nil
}

// sign returns the signature of the request with payload, and the
// canonical request and string to sign it is made of.
func (s *Signed) sign(payload []byte) (signature []byte, canonical, toSign string) {
	canonical = s.canonicalRequest(payload)
	sum := sha256.Sum256([]byte(canonical))
	toSign = Algorithm + "\n" + s.amzDate + "\n" + s.scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+s.secret), s.date)
	key = hmacSHA256(key, s.region)
	key = hmacSHA256(key, s.service)
	key = hmacSHA256(key, "aws4_request")
	return hmacSHA256(key, toSign), canonical, toSign
}

// Sign signs r, whose body is payload, with c for service in region at
// time at, as the AWS CLI does: it sets X-Amz-Date and an Authorization
// header whose signature covers the method, path, query, Host, X-Amz-Date
// and payload. It is for clients without an AWS SDK; r's headers must be
// set, and its path escaped, as they will be sent.
func (c Credentials) Sign(r *http.Request, payload []byte, service, region string, at time.Time) {
	amzDate := at.UTC().Format(TimeFormat)
	r.Header.Set("X-Amz-Date", amzDate)
	s := &Signed{
		r: r, keyID: c.AccessKeyID, secret: c.SecretAccessKey, amzDate: amzDate,
		scope: amzDate[:8] + "/" + region + "/" + service + "/aws4_request",
		date:  amzDate[:8], region: region, service: service, signedHeaders: "host;x-amz-date",
	}
	signature, _, _ := s.sign(payload)
	r.Header.Set("Authorization", Algorithm+" Credential="+c.AccessKeyID+"/"+s.scope+
		", SignedHeaders="+s.signedHeaders+", Signature="+hex.EncodeToString(signature))
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// canonicalRequest is the request as SigV4 signs it: method, path, query,
// the signed headers and the payload's hash.
func (s *Signed) canonicalRequest(payload []byte) string {
	r := s.r
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	// Every AWS service but S3 signs the path URI-encoded once more, as
	// it travels (a function ARN's ':' is %3A on the wire, %253A here).
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(uriEncode(path, false))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.RawQuery))
	b.WriteByte('\n')
	for _, name := range strings.Split(s.signedHeaders, ";") {
		b.WriteString(name)
		b.WriteByte(':')
		if name == "host" {
			// net/http moves Host out of the header map (and a client's
			// request may leave it to the URL).
			b.WriteString(cmp.Or(r.Host, r.URL.Host))
		} else {
			for i, v := range r.Header.Values(name) {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(canonicalValue(v))
			}
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(s.signedHeaders)
	b.WriteByte('\n')
	sum := sha256.Sum256(payload)
	b.WriteString(hex.EncodeToString(sum[:]))
	return b.String()
}

// canonicalValue is a header value as SigV4 signs it: each run of spaces
// made one, and trimmed. (Its ends are trimmed of any white space, as the
// AWS SDK for Go does; net/http has trimmed blanks and tabs already.)
func canonicalValue(v string) string {
	var b strings.Builder
	b.Grow(len(v))
	space := false
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(v[i])
	}
	return strings.TrimSpace(b.String())
}

// canonicalQuery is the query's parameters, each name and value decoded
// and URI-encoded again, sorted by name, then by value.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	var params []string
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		// A parameter that does not decode is signed as it came: its
		// signature will not match, which is the answer it deserves.
		if dk, err := url.QueryUnescape(k); err == nil {
			k = uriEncode(dk, true)
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = uriEncode(dv, true)
		}
		params = append(params, k+"="+v)
	}
	slices.SortFunc(params, func(a, b string) int {
		ak, av, _ := strings.Cut(a, "=")
		bk, bv, _ := strings.Cut(b, "=")
		if c := strings.Compare(ak, bk); c != 0 {
			return c
		}
		return strings.Compare(av, bv)
	})
	return strings.Join(params, "&")
}

// uriEncode percent-encodes every byte of s but the unreserved characters
// (A-Z a-z 0-9 - _ . ~) and, unless encodeSlash, '/', in upper-case hex,
// as SigV4 specifies.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || c == '/' && !encodeSlash {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
