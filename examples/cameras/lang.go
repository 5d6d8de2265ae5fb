package main

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Lang is a language the page and the API speak: the design's Japanese, or
// English.
type Lang string

// The languages.
const (
	Japanese Lang = "ja"
	English  Lang = "en"
)

// langCookie remembers the language picked with the page's switch.
const langCookie = "cam_lang"

// langs are the languages, in the order of the page's switch.
var langs = []Lang{English, Japanese}

func parseLang(s string) (Lang, bool) {
	l := Lang(strings.ToLower(strings.TrimSpace(s)))
	return l, slices.Contains(langs, l)
}

// langOf returns the language to answer r in:
//
//  1. ?lang=en or ?lang=ja, what the page's switch links to;
//  2. else the cam_lang cookie the switch set;
//  3. else the browser's Accept-Language: the one of English and Japanese it
//     rates higher (an earlier entry wins a tie; "en-GB" is English, "ja-JP"
//     Japanese); English when the header names neither, since whoever reads
//     neither reads English more likely than Japanese;
//  4. else, with no Accept-Language at all or only "*" (curl, scripts, an
//     API client of the design), Japanese: the API's language as designed,
//     so its existing clients get the messages they always got.
func langOf(r *http.Request) Lang {
	if l, ok := parseLang(r.URL.Query().Get("lang")); ok {
		return l
	}
	if c, err := r.Cookie(langCookie); err == nil {
		if l, ok := parseLang(c.Value); ok {
			return l
		}
	}
	return acceptLang(r.Header.Values("Accept-Language"))
}

// acceptLang picks the language of Accept-Language header values (step 3
// and 4 of langOf).
func acceptLang(header []string) Lang {
	best, bestQ, named := Japanese, -1.0, false
	for _, h := range header {
		for _, part := range strings.Split(h, ",") {
			tag, params, _ := strings.Cut(part, ";")
			tag = strings.ToLower(strings.TrimSpace(tag))
			if tag == "" {
				continue
			}
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.TrimSpace(k) == "q" {
					f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
					if err != nil || f < 0 || f > 1 {
						f = 0
					}
					q = f
				}
			}
			if tag != "*" {
				named = true
			}
			primary, _, _ := strings.Cut(tag, "-")
			l, ok := parseLang(primary)
			if !ok || q <= 0 {
				continue
			}
			if q > bestQ {
				best, bestQ = l, q
			}
		}
	}
	if bestQ < 0 && named {
		return English
	}
	return best
}

// setLangCookie remembers a language picked with ?lang= for the API calls
// the page then makes and for the next visit.
func setLangCookie(w http.ResponseWriter, r *http.Request) {
	l, ok := parseLang(r.URL.Query().Get("lang"))
	if !ok {
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: langCookie, Value: string(l), Path: "/", MaxAge: int(365 * 24 * time.Hour / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
	})
}
