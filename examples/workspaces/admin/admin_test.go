package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/workspaces/admin"
	"github.com/ttlkit/ttlkit/examples/workspaces/auth"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const adminToken = "an-admin-token-of-24-bytes"

// TestDeleteAnswersOnceStopped: a DELETE answers 200 only once the
// workspace's server no longer runs, so that no request reaches it after;
// a server that nobody stops within DeleteWait gets a 202, and the
// deletion stands either way.
func TestDeleteAnswersOnceStopped(t *testing.T) { synctest.Test(t, testDeleteAnswersOnceStopped) }

func testDeleteAnswersOnceStopped(t *testing.T) {
	ctx := context.Background()
	store := entities.NewMemoryStore(entities.MemoryStoreOptions{})
	cat := catalog.New(store, nil)
	keys, err := auth.New("a-secret-of-at-least-16-bytes", adminToken, nil)
	require.NoError(t, err)
	h, err := admin.New(admin.Options{Catalog: cat, Keys: keys, Standby: time.Hour, Archive: time.Hour, DeleteWait: 300 * time.Millisecond})
	require.NoError(t, err)
	for _, id := range []string{"never-started", "running", "stopped-by-controller"} {
		_, err := cat.Create(ctx, id)
		require.NoError(t, err)
	}
	for _, id := range []string{"running", "stopped-by-controller"} {
		_, err := store.Update(ctx, id, entities.Update{Phase: catalog.Running})
		require.NoError(t, err)
	}
	del := func(id string) int {
		req := httptest.NewRequest("DELETE", "/admin/api/workspaces/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	assert.Equal(t, http.StatusOK, del("never-started"), "no server ran")
	assert.Equal(t, http.StatusAccepted, del("running"), "nobody stopped the server")

	// A controller stops the server while the DELETE waits.
	start := time.Now()
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, err := store.Update(ctx, "stopped-by-controller", entities.Update{Phase: catalog.Standby})
		assert.NoError(t, err)
	}()
	assert.Equal(t, http.StatusOK, del("stopped-by-controller"))
	assert.Less(t, time.Since(start), 150*time.Millisecond, "answered within a poll of the stop")

	for _, id := range []string{"never-started", "running", "stopped-by-controller"} {
		e, err := cat.Get(ctx, id)
		require.NoError(t, err)
		assert.False(t, e.DeletedAt.IsZero(), "%s is deleted", id)
		assert.Equal(t, catalog.Archived, e.DesiredState, id)
	}
	assert.Equal(t, http.StatusNotFound, del("nobody"))
}
