package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
)

// seatOf polls the status as the page does (naming the seat it has) and
// returns the answer; it remembers the seat it is given.
func seatOf(u *user, seat *string) answer {
	u.t.Helper()
	path := "/api/system/status"
	if *seat != "" {
		path += "?seat=" + *seat
	}
	a := u.do("GET", path, "", "")
	require.Equal(u.t, http.StatusOK, a.Status, a.Body)
	*seat = a.str("ui_seat")
	return a
}

// refusal returns the ui_seat_refused of a status answer.
func refusal(a answer) (code, msg string) {
	r, _ := a.Body["ui_seat_refused"].(map[string]any)
	code, _ = r["error_code"].(string)
	msg, _ = r["message"].(string)
	return code, msg
}

// TestUIUserCap: two instances on one (memory) store seat MAX_UI_USERS UI
// users between them; the eleventh and twelfth are told why they get no
// suggest stream, in their language, and get it once a seat is free: when
// a seated page gives its seat back, or 15 s after it stopped asking, not
// before. A playing suggest stream keeps its seat, and ends with it.
func TestUIUserCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leases, seats := lease.NewMemoryStore(nil), lease.NewMemoryStore(nil)
		cfg := testConfig()
		srvA, _ := newServer(t, cfg, Backend{Leases: leases, Seats: seats})
		srvB, _ := newServer(t, cfg, Backend{Leases: leases, Seats: seats})
		langs := []string{"ja-JP,ja;q=0.9", "en-US,en;q=0.9"}
		users := make([]*user, 12)
		seat := make([]string, 12)
		for i := range users {
			users[i] = inProcess(t, []*Server{srvA, srvB}[i%2])
			users[i].lang = langs[(i/2+i)%2] // both languages on both instances
		}
		poll := func(i int) answer { return seatOf(users[i], &seat[i]) }

		for i := range 10 {
			a := poll(i)
			require.NotEmpty(t, seat[i], "user %d is seated", i)
			assert.EqualValues(t, i+1, a.Body["active_ui_users"], "counted on both instances")
			assert.EqualValues(t, 10, a.Body["max_ui_users"])
			assert.NotContains(t, a.Body, "ui_seat_refused")
		}
		want := map[string]string{
			langs[0]: "同時に利用できるUIユーザー数の上限（10人）に達しているため、サジェストは表示されません。空きができると自動で表示されます。",
			langs[1]: "The page already has its maximum of 10 users, so the suggest stream is not shown to you. It starts by itself as soon as a place is free.",
		}
		for i := 10; i < 12; i++ {
			a := poll(i)
			assert.Empty(t, seat[i], "user %d is over MAX_UI_USERS", i)
			code, msg := refusal(a)
			assert.Equal(t, CodeUIUsersFull, code)
			assert.Equal(t, want[users[i].lang], msg, "in the user's language")
			assert.EqualValues(t, 10, a.Body["active_ui_users"])
			assert.EqualValues(t, 5+10, a.Body["current_usage"], "baseline + 10 suggest streams")
			// Nor can it open the suggest stream.
			w, done := users[i].openPath(t.Context(), "/stream/suggest")
			<-done
			status, frames, _ := w.snapshot()
			assert.Equal(t, http.StatusTooManyRequests, status)
			assert.Zero(t, frames)
		}
		require.NotEqual(t, users[10].lang, users[11].lang, "a refused user of each language")

		// A seated user's suggest stream plays and keeps the seat while
		// the page does not poll (a page busy elsewhere).
		ctx, stopStream := context.WithCancel(t.Context())
		w2, done2 := users[2].openPath(ctx, "/stream/suggest?seat="+seat[2])
		// A second stream of a seat another session holds is refused.
		wx, donex := users[10].openPath(t.Context(), "/stream/suggest?seat="+seat[3])
		<-donex
		status, _, _ := wx.snapshot()
		assert.Equal(t, http.StatusTooManyRequests, status, "a seat id is no ticket")

		// Users 0 and 2 stop polling; user 1 gives its seat back; the
		// others poll every 5 s, as the page does.
		require.Equal(t, http.StatusOK, users[1].do("DELETE", "/api/ui/seat/"+seat[1], "", "").Status)
		seat[1] = ""
		a := poll(10)
		require.NotEmpty(t, seat[10], "a seat given back is free at once")
		assert.EqualValues(t, 10, a.Body["active_ui_users"])
		active := []int{3, 4, 5, 6, 7, 8, 9, 10, 11}
		for step := 5 * time.Second; step <= 30*time.Second; step += 5 * time.Second {
			time.Sleep(5 * time.Second)
			for _, i := range active {
				poll(i)
			}
			if step < seatGrace {
				assert.Empty(t, seat[11], "user 0's seat is still theirs at %v", step)
			}
			for _, srv := range []*Server{srvA, srvB} {
				n, err := srv.seats.Users(t.Context())
				require.NoError(t, err)
				assert.LessOrEqual(t, n, 10)
				u, err := usageOf(t.Context(), srv.leases)
				require.NoError(t, err)
				assert.LessOrEqual(t, srv.adm.currentUsage(n, u.Units), cfg.TotalStreamUnits)
			}
		}
		assert.NotEmpty(t, seat[11], "user 0's seat lapsed 15 s after its last poll, and went to user 11")
		_, frames2, _ := w2.snapshot()
		assert.Greater(t, frames2, 50, "user 2's suggest stream played on, 2 frames a second")
		code, _ := refusal(poll(0))
		assert.Equal(t, CodeUIUsersFull, code, "user 0 came back too late")

		// User 2 closes the page: its stream stops, and its seat lapses.
		stopStream()
		<-done2
		for range 3 {
			time.Sleep(5 * time.Second)
			for _, i := range active {
				poll(i)
			}
		}
		poll(0)
		assert.NotEmpty(t, seat[0], "user 2's seat lapsed once its stream ended")

		// A seat given back ends its stream at once.
		ctx3, cancel3 := context.WithCancel(t.Context())
		defer cancel3()
		w3, done3 := users[3].openPath(ctx3, "/stream/suggest?seat="+seat[3])
		time.Sleep(2 * time.Second)
		require.Equal(t, http.StatusOK, users[3].do("DELETE", "/api/ui/seat/"+seat[3], "", "").Status)
		synctest.Wait()
		select {
		case <-done3:
		default:
			t.Fatal("the stream plays on after its seat was given back")
		}
		_, frames3, _ := w3.snapshot()
		assert.Positive(t, frames3)
		// Another session cannot give a seat back.
		require.Equal(t, http.StatusOK, users[5].do("DELETE", "/api/ui/seat/"+seat[4], "", "").Status)
		a = poll(4)
		assert.NotEmpty(t, seat[4])
		assert.EqualValues(t, 9, a.Body["active_ui_users"], "user 4 is still seated, user 3 left")
	})
}

// TestUIUserCapOnEveryStore: two instances on each store share the seats;
// a user's seat is theirs on both instances.
func TestUIUserCapOnEveryStore(t *testing.T) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			ba, bb := sc.open(t)
			_, _, urlA := serve(t, testConfig(), ba)
			_, _, urlB := serve(t, testConfig(), bb)
			seat := make([]string, 11)
			users := make([]*user, 11)
			for i := range users {
				users[i] = overHTTP(t, []string{urlA, urlB}[i%2])
				users[i].lang = "en"
				a := seatOf(users[i], &seat[i])
				if i < 10 {
					require.NotEmpty(t, seat[i], "user %d", i)
					continue
				}
				assert.Empty(t, seat[i])
				code, msg := refusal(a)
				assert.Equal(t, CodeUIUsersFull, code)
				assert.Contains(t, msg, "maximum of 10 users")
				assert.EqualValues(t, 10, a.Body["active_ui_users"])
				assert.EqualValues(t, 15, a.Body["current_usage"])
			}
			// User 0 polls on the other instance: the same seat.
			other := users[0].on(urlB)
			before := seat[0]
			seatOf(other, &seat[0])
			assert.Equal(t, before, seat[0])
			// and gives it back there: user 10 gets it.
			require.Equal(t, http.StatusOK, other.do("DELETE", "/api/ui/seat/"+seat[0], "", "").Status)
			a := seatOf(users[10], &seat[10])
			assert.NotEmpty(t, seat[10], "%v", a.Body)
			// The suggest stream plays on a seat, on either instance.
			res, err := users[10].on(urlA).client.Get(urlA + "/stream/suggest?seat=" + seat[10])
			require.NoError(t, err)
			defer res.Body.Close()
			assert.Equal(t, http.StatusOK, res.StatusCode)
			assert.Equal(t, "multipart/x-mixed-replace; boundary=frame", res.Header.Get("Content-Type"))
		})
	}
}

// TestMaxSeats: the suggest reserve seats MAX_UI_USERS users when a sub
// stream costs 1 unit, fewer when it costs more, and nobody without it.
func TestMaxSeats(t *testing.T) {
	c := testConfig()
	assert.Equal(t, 10, c.MaxSeats())
	c.SubStreamCost, c.MainStreamCost = 2, 3
	assert.Equal(t, 5, c.MaxSeats())
	c = testConfig()
	c.MaxUIUsers = 0
	assert.Equal(t, 0, c.MaxSeats())
	srv, _ := newServer(t, c, Backend{})
	a := inProcess(t, srv).status()
	code, msg := refusal(a)
	assert.Equal(t, CodeUIUsersFull, code)
	assert.Equal(t, fmt.Sprintf(messages[CodeUIUsersFull].ja, 0), msg)
	assert.EqualValues(t, 0, a.Body["active_ui_users"])
	assert.EqualValues(t, 5, a.Body["current_usage"])
}
