package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAcceptLanguage: the language of an Accept-Language header.
func TestAcceptLanguage(t *testing.T) {
	for _, tc := range []struct {
		header []string
		want   Lang
	}{
		{nil, Japanese}, // no preference: the API's language as designed
		{[]string{""}, Japanese},
		{[]string{"*"}, Japanese},
		{[]string{"ja"}, Japanese},
		{[]string{"ja-JP,ja;q=0.9,en-US;q=0.8,en;q=0.7"}, Japanese},
		{[]string{"en-US,en;q=0.9"}, English},
		{[]string{"EN-gb"}, English},
		{[]string{"en;q=0.5, ja;q=0.8"}, Japanese}, // the higher q wins
		{[]string{"ja;q=0.5, en;q=0.8"}, English},
		{[]string{"en, ja"}, English},                         // a tie: the first
		{[]string{"ja, en"}, Japanese},                        // likewise
		{[]string{"fr-FR,fr;q=0.9"}, English},                 // neither: English
		{[]string{"fr, *;q=0.1"}, English},                    // the wildcard names neither
		{[]string{"fr-FR,fr;q=0.9,ja;q=0.3"}, Japanese},       // the only one named
		{[]string{"ja;q=0, en;q=0.1"}, English},               // q=0 refuses
		{[]string{"ja;q=0"}, English},                         // refused, and English not
		{[]string{"de", "ja;q=0.4"}, Japanese},                // several header lines
		{[]string{"ja;q=bogus, en;q=0.2"}, English},           // a bad q counts as 0
		{[]string{"jav, ena"}, English},                       // other languages, not ja or en
		{[]string{" en-US ; q=0.7 , ja-JP ; q=0.6"}, English}, // spaces
	} {
		assert.Equal(t, tc.want, acceptLang(tc.header), "%q", tc.header)
	}
}

// TestLanguageOfARequest: ?lang= wins over the cookie, the cookie over
// Accept-Language; a language the server does not speak is ignored.
func TestLanguageOfARequest(t *testing.T) {
	req := func(query, cookie, accept string) *http.Request {
		r := httptest.NewRequest("GET", "/api/system/status"+query, nil)
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: langCookie, Value: cookie})
		}
		if accept != "" {
			r.Header.Set("Accept-Language", accept)
		}
		return r
	}
	assert.Equal(t, English, langOf(req("?lang=en", "ja", "ja")))
	assert.Equal(t, Japanese, langOf(req("?lang=ja", "en", "en")))
	assert.Equal(t, English, langOf(req("", "en", "ja")))
	assert.Equal(t, Japanese, langOf(req("", "ja", "en")))
	assert.Equal(t, English, langOf(req("?lang=fr", "de", "en")), "unknown values fall through")
	assert.Equal(t, Japanese, langOf(req("?lang=fr", "", "")))
}

// TestEveryMessageInBothLanguages: each API message and page text has a
// Japanese and an English version, and they differ where they should.
func TestEveryMessageInBothLanguages(t *testing.T) {
	for code, m := range messages {
		assert.NotEmpty(t, m.ja, code)
		assert.NotEmpty(t, m.en, code)
		assert.NotEqual(t, m.ja, m.en, code)
		assert.Equal(t, strings.Count(m.ja, "%"), strings.Count(m.en, "%"), "%s: the same arguments", code)
	}
	for _, c := range codes {
		assert.Contains(t, messages, c, "leasehttp's code %s has a message", c)
	}
	for k, m := range pageTexts {
		assert.NotEmpty(t, m.ja, k)
		if k != "hb_after" { // "回" has no English counterpart
			assert.NotEmpty(t, m.en, k)
		}
	}
	assert.Equal(t, MsgOverCapacity, message(Japanese, CodeOverCapacity))
	assert.Equal(t, "There is no camera \"cam_x\".", message(English, "UNKNOWN_CAMERA", "cam_x"))
}

// TestAPIAndPageSpeakTheBrowsersLanguage: the same refusals in Japanese and
// English by Accept-Language, the page in either, and the page's switch
// remembered for the API calls that follow.
func TestAPIAndPageSpeakTheBrowsersLanguage(t *testing.T) {
	var srv *Server
	call := func(method, path, accept string, cookies []*http.Cookie, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, strings.NewReader(body))
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		if accept != "" {
			r.Header.Set("Accept-Language", accept)
		}
		for _, c := range cookies {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	for _, tc := range []struct {
		accept string
		want   map[string]string
	}{
		{"ja-JP,ja;q=0.9", map[string]string{"UNKNOWN_CAMERA": `カメラ "cam_x" はありません`, "INVALID_QUALITY": `quality "4k" は sub か main にしてください`,
			"BAD_JSON": "リクエストのJSONが不正です", CodeSystemOverload: MsgSystemOverload, "LEASE_NOT_FOUND": "Leaseが見つかりません（解放済みか期限切れです）",
			"INVALID_ARGUMENT": "minutes は 1 から保持期間までの整数にしてください"}},
		{"en-US,en;q=0.9", map[string]string{"UNKNOWN_CAMERA": `There is no camera "cam_x".`, "INVALID_QUALITY": `quality "4k" must be sub or main.`,
			"BAD_JSON": "The request's JSON is invalid.", CodeSystemOverload: "The server is under heavy load. Please try again in a little while.",
			"LEASE_NOT_FOUND": "No such lease (it was released or has expired).", "INVALID_ARGUMENT": "minutes must be a whole number from 1 up to the retention period."}},
	} {
		var load *fakeLoad
		srv, load = newServer(t, testConfig(), Backend{})
		got := map[string]string{}
		for _, w := range []*httptest.ResponseRecorder{
			call("POST", "/api/modal/lease", tc.accept, nil, `{"camera_id":"cam_x","quality":"sub"}`),
			call("POST", "/api/modal/lease", tc.accept, nil, `{"camera_id":"cam_1f_01","quality":"4k"}`),
			call("POST", "/api/modal/lease", tc.accept, nil, `{`),
			call("DELETE", "/api/modal/lease/0123456789abcdef0123456789abcdef", tc.accept, nil, ""),
			call("GET", "/api/system/metrics?minutes=0", tc.accept, nil, ""),
		} {
			b := decodeJSON(t, w.Body.String())
			got[b["error_code"].(string)] = b["message"].(string)
		}
		load.set(97, 40)
		_, err := srv.monitor.Step(t.Context())
		require.NoError(t, err)
		w := call("POST", "/api/modal/lease", tc.accept, nil, `{"camera_id":"cam_1f_01","quality":"sub"}`)
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
		b := decodeJSON(t, w.Body.String())
		got[b["error_code"].(string)] = b["message"].(string)
		assert.Equal(t, tc.want, got, tc.accept)
	}

	// The page, by Accept-Language, and with the switch.
	page := func(path, accept string, cookies []*http.Cookie) (string, *httptest.ResponseRecorder) {
		w := call("GET", path, accept, cookies, "")
		require.Equal(t, http.StatusOK, w.Code)
		b, _ := io.ReadAll(w.Body)
		return string(b), w
	}
	ja, w := page("/", "ja", nil)
	assert.Contains(t, ja, `<html lang="ja">`)
	assert.Contains(t, ja, "<h1>カメラ監視</h1>")
	assert.Equal(t, "ja", w.Header().Get("Content-Language"))
	en, w := page("/", "en-GB,en;q=0.8", nil)
	assert.Contains(t, en, `<html lang="en">`)
	assert.Contains(t, en, "<h1>Camera monitor</h1>")
	assert.Contains(t, en, `"ttl_title":"Your viewing time is over"`, "app.js's texts")
	assert.NotContains(t, en, "カメラ監視")
	assert.Equal(t, "en", w.Header().Get("Content-Language"))
	fr, _ := page("/", "fr-FR,fr;q=0.9", nil)
	assert.Contains(t, fr, `<html lang="en">`, "neither language preferred: English")
	none, _ := page("/", "", nil)
	assert.Contains(t, none, `<html lang="ja">`, "no preference: the design's Japanese")

	// The switch: ?lang=en on a Japanese browser sets a cookie, and the
	// API then answers in English.
	sw, w := page("/?lang=en", "ja", nil)
	assert.Contains(t, sw, `<html lang="en">`)
	assert.Contains(t, sw, `<a href="?lang=en" lang="en" hreflang="en" aria-current="true">English</a>`)
	var langC *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == langCookie {
			langC = c
		}
	}
	require.NotNil(t, langC, "the choice is remembered")
	assert.Equal(t, "en", langC.Value)
	assert.True(t, langC.HttpOnly)
	again, _ := page("/", "ja", []*http.Cookie{langC})
	assert.Contains(t, again, `<html lang="en">`)
	r := call("POST", "/api/modal/lease", "ja", []*http.Cookie{langC}, `{"camera_id":"cam_x","quality":"sub"}`)
	assert.Equal(t, `There is no camera "cam_x".`, decodeJSON(t, r.Body.String())["message"])
	// The page's template is not served raw.
	assert.Equal(t, http.StatusNotFound, call("GET", "/static/index.html", "", nil, "").Code)
	assert.Equal(t, http.StatusNotFound, call("GET", "/static/", "", nil, "").Code)
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), s)
	return m
}
