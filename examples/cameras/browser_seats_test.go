package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/browsertest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
)

// tinyJPEG is a 16×9 picture: streams that a browser can decode, at
// almost no cost to a loaded machine.
func tinyJPEG(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 16, 9))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	img.Set(0, 0, color.White)
	var b bytes.Buffer
	require.NoError(t, jpeg.Encode(&b, img, nil))
	return b.Bytes()
}

// pageState is what one page shows, read in one evaluation.
type pageState struct {
	Lang       string `json:"lang"`
	Title      string `json:"title"`
	Suggest    string `json:"suggest"`    // the suggest tile's state: playing, full, ...
	SuggestW   int    `json:"suggestW"`   // the width of the suggest picture decoded
	Note       string `json:"note"`       // the message in the suggest tile
	NoteShown  bool   `json:"noteShown"`  // and whether it is shown
	Modal      string `json:"modal"`      // the modal's state: streaming, rejected, ...
	ModalCode  string `json:"modalCode"`  // the refusal's code
	ModalText  string `json:"modalText"`  // and its message
	Quality    string `json:"quality"`    // the quality granted
	Usage      string `json:"usage"`      // the status panel's current usage
	UIUsers    string `json:"uiUsers"`    // and its UI users
	ModalTitle string `json:"modalTitle"` // the modal's close button, in the page's language
}

const readPage = `(() => {
  const $ = id => document.getElementById(id);
  const s = $('suggest'), img = s && s.querySelector('img'), m = $('modal');
  return {lang: document.documentElement.lang, title: document.querySelector('h1').textContent,
    suggest: (s && s.dataset.state) || '', suggestW: (img && img.naturalWidth) || 0,
    note: $('suggest-note') ? $('suggest-note').textContent : '', noteShown: !!$('suggest-note') && !$('suggest-note').hidden,
    modal: m.dataset.state || '', modalCode: $('modal-message').dataset.code || '',
    modalText: $('modal-message').hidden ? '' : $('modal-message').textContent,
    quality: $('modal-quality').dataset.quality || '',
    usage: $('current-usage').textContent, uiUsers: $('ui-users').textContent,
    modalTitle: $('modal-close').textContent};
})()`

// TestBrowserUIUserCap opens the page in 40 browsers (separate browser
// contexts: 40 users), half of them preferring Japanese and half English,
// on two instances sharing one Redis, and has each open a camera's main
// stream. Exactly MAX_UI_USERS pages play the suggest stream; the others
// say why, in their language. The modals take the 35 units of their budget
// (17 main, one fallen back to sub, the rest refused with OVER_CAPACITY in
// the page's language). An auditor reads the store all along: the UI users
// never exceed MAX_UI_USERS, the suggest streams served never exceed the
// seats, and the current usage never exceeds TOTAL_STREAM_UNITS; at the
// end it is exactly 50.
func TestBrowserUIUserCap(t *testing.T) {
	root := browsertest.New(t)
	r := redistest.OpenRedis(t)
	prefix := r.Prefix + "{cams}:"
	ba, err := redisBackend(t.Context(), r.Client, prefix)
	require.NoError(t, err)
	bb, err := redisBackend(t.Context(), r.NewClient(t), prefix)
	require.NoError(t, err)
	cfg := testConfig()
	cfg.Cameras = DefaultCameras[:2] // fewer thumbnails for 40 pages to refresh
	srvA, _, urlA := serve(t, cfg, ba)
	srvB, _, urlB := serve(t, cfg, bb)
	tiny := tinyJPEG(t)
	for _, srv := range []*Server{srvA, srvB} {
		srv.streams.frames.draw = func(string, Quality, time.Time) []byte { return tiny }
	}

	// The auditor.
	actx, stopAudit := context.WithCancel(context.Background())
	var audits, maxUsers, maxStreams, maxUsage, streamsAboveSeats atomic.Int64
	raise := func(v *atomic.Int64, n int64) {
		for m := v.Load(); n > m && !v.CompareAndSwap(m, n); m = v.Load() {
		}
	}
	audited := make(chan struct{})
	go func() {
		defer close(audited)
		for actx.Err() == nil {
			// Streams first: a stream counted here began on a seat that
			// the store still holds when it is read next.
			streams := srvA.streams.activeSuggest.Load() + srvB.streams.activeSuggest.Load()
			users, err1 := srvA.seats.Users(actx)
			u, err2 := usageOf(actx, srvB.leases)
			if err1 == nil && err2 == nil {
				audits.Add(1)
				raise(&maxUsers, int64(users))
				raise(&maxStreams, streams)
				raise(&maxUsage, int64(srvA.adm.currentUsage(users, u.Units)))
				if streams > int64(users) {
					streamsAboveSeats.Add(1)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// 40 users, each in a browser context of its own.
	type page struct {
		ctx  context.Context
		lang Lang
		url  string
	}
	pages := make([]page, 40)
	for i := range pages {
		ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		pages[i] = page{ctx: ctx, lang: []Lang{Japanese, English}[i%2], url: []string{urlA, urlB}[(i/2)%2]}
	}
	accept := map[Lang]string{Japanese: "ja-JP,ja;q=0.9,en;q=0.5", English: "en-US,en;q=0.9"}
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	errs := make([]error, len(pages))
	for i, p := range pages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// The first call makes the tab: under p.ctx, which it lives as
			// long as. The next ones are bounded.
			if errs[i] = chromedp.Do(p.ctx, preferLanguage(accept[p.lang])); errs[i] != nil {
				return
			}
			ctx, cancel := context.WithTimeout(p.ctx, 3*time.Minute)
			defer cancel()
			errs[i] = chromedp.Do(ctx,
				chromedp.Navigate(p.url),
				chromedp.WaitVisible(chromedp.CSS(`[data-camera="cam_1f_01"]`)),
				chromedp.Click(chromedp.CSS(`[data-camera="cam_1f_01"]`)),
			)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "page %d", i)
	}
	t.Logf("40 pages opened in %v", time.Since(start).Round(time.Millisecond))

	// Every page settles: 10 play the suggest stream, 30 say why not; 18
	// modals stream, 22 are refused; every status panel shows 50 / 50.
	// states is written by read, which assert.Eventually runs on a
	// goroutine it may leave running when it gives up: the report reads a
	// copy of it and of last under statesMu.
	var statesMu sync.Mutex
	states := make([]pageState, len(pages))
	read := func() (playing, full, streaming, rejected, full50 int) {
		for i, p := range pages {
			ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
			s, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](readPage))
			cancel()
			if err != nil {
				t.Logf("page %d: %v", i, err)
				continue
			}
			statesMu.Lock()
			states[i] = s
			statesMu.Unlock()
			switch {
			case s.Suggest == "playing" && s.SuggestW == 16:
				playing++
			case s.Suggest == "full" && s.NoteShown:
				full++
			}
			switch s.Modal {
			case "streaming":
				streaming++
			case "rejected":
				rejected++
			}
			if s.Usage == "50 / 50" {
				full50++
			}
		}
		return
	}
	settled := time.Now()
	var last string
	ok := assert.Eventually(t, func() bool {
		playing, full, streaming, rejected, full50 := read()
		streams := srvA.streams.activeSuggest.Load() + srvB.streams.activeSuggest.Load()
		statesMu.Lock()
		last = fmt.Sprintf("playing %d, full %d, modals streaming %d, rejected %d, panels at 50/50 %d, suggest streams %d",
			playing, full, streaming, rejected, full50, streams)
		statesMu.Unlock()
		return playing == 10 && full == 30 && streaming == 18 && rejected == 22 && full50 == 40 && streams == 10
	}, 4*time.Minute, time.Second, "the pages did not settle")
	statesMu.Lock()
	seen, lastSeen := slices.Clone(states), last
	statesMu.Unlock()
	t.Logf("settled %v after the pages opened: %s", time.Since(settled).Round(time.Millisecond), lastSeen)
	if !ok {
		for i, s := range seen {
			t.Logf("page %d: %+v", i, s)
		}
		t.FailNow()
	}

	// What each page says, in its language.
	byLang := map[Lang]int{}
	for i, s := range states {
		l := pages[i].lang
		assert.Equal(t, string(l), s.Lang, "page %d", i)
		assert.Equal(t, pageTexts["title"].in(l), s.Title, "page %d", i)
		assert.Equal(t, pageTexts["close_x"].in(l), s.ModalTitle, "page %d", i)
		assert.Equal(t, "10 / 10", s.UIUsers, "page %d: the UI users of both instances", i)
		if s.Suggest == "full" {
			byLang[l]++
			assert.Equal(t, message(l, CodeUIUsersFull, 10), s.Note, "page %d", i)
		} else {
			assert.Empty(t, s.Note, "page %d", i)
		}
		if s.Modal == "rejected" {
			assert.Equal(t, CodeOverCapacity, s.ModalCode, "page %d", i)
			assert.Contains(t, s.ModalText, message(l, CodeOverCapacity), "page %d", i)
		}
	}
	assert.Positive(t, byLang[Japanese], "refused pages in Japanese")
	assert.Positive(t, byLang[English], "refused pages in English")
	var mains, subs int
	for _, s := range states {
		if s.Modal == "streaming" {
			switch s.Quality {
			case "main":
				mains++
			case "sub":
				subs++
			}
		}
	}
	assert.Equal(t, 17, mains)
	assert.Equal(t, 1, subs, "the 18th main fell back to sub")

	stopAudit()
	<-audited
	t.Logf("%d audits: at most %d UI users, %d suggest streams, %d units in use; streams above seats in %d audits",
		audits.Load(), maxUsers.Load(), maxStreams.Load(), maxUsage.Load(), streamsAboveSeats.Load())
	assert.Greater(t, audits.Load(), int64(20))
	assert.EqualValues(t, 10, maxUsers.Load(), "MAX_UI_USERS, never more")
	assert.EqualValues(t, 10, maxStreams.Load(), "one suggest stream per seat, never more")
	assert.Zero(t, streamsAboveSeats.Load(), "no suggest stream without its seat")
	assert.EqualValues(t, cfg.TotalStreamUnits, maxUsage.Load(), "the whole hardware, never more")
}
